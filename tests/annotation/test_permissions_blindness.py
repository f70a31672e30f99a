"""Roles and blindness: physicians act on and see only their own assignments and
labels; ids not theirs are 404s; researchers and admins without the physician
role cannot label. The blindness rule itself (annotation.blindness): when a
window closes, who stays blind to it and to whom; the whole site is crawled for
leaks in test_blindness_canary."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.utils import timezone

from accounts.roles import Role
from annotation.blindness import (
    blind_window_ids,
    co_rater_ids,
    own_assignments,
    window_is_closed,
)
from annotation.models import CampaignWindow
from annotation.selectors import assignment_get_for_annotator, physician_queue
from annotation.services import (
    assignment_add,
    campaign_create,
    label_reopen,
    label_save_draft,
    label_submit,
    window_consensus_refresh,
)
from tests.factories import make_admission, make_stay
from windows.models import Event

from .conftest import make_gold_windows, make_role_user
from .helpers import accept_items, written_state

ACTIONS = ["draft", "submit", "reopen"]


def _act(action, user, assignment_id, payload):
    if action == "draft":
        return label_save_draft(
            annotator=user, assignment_id=assignment_id, payload=payload, base_version=0
        )
    if action == "submit":
        return label_submit(
            annotator=user, assignment_id=assignment_id, payload=payload, base_version=0
        )
    return label_reopen(annotator=user, assignment_id=assignment_id)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.usefixtures("submitted")
def test_acting_on_another_physicians_assignment_is_a_404_and_writes_nothing(
    physicians, assignment, complete_payload, action
):
    before = written_state()
    with pytest.raises(Http404):
        _act(action, physicians[1], assignment.pk, complete_payload)
    assert written_state() == before


@pytest.mark.parametrize("action", ACTIONS)
def test_unknown_or_malformed_assignment_ids_are_404s(
    physicians, assignment, complete_payload, action
):
    before = written_state()
    for bad_id in (10**9, "abc", None):
        with pytest.raises(Http404):
            _act(action, physicians[0], bad_id, complete_payload)
    assert written_state() == before


def test_a_physician_not_in_the_campaign_gets_404_for_its_windows(
    assignment, complete_payload
):
    outsider = make_role_user(Role.PHYSICIAN)
    before = written_state()
    with pytest.raises(Http404):
        _act("draft", outsider, assignment.pk, complete_payload)
    with pytest.raises(Http404):
        assignment_get_for_annotator(annotator=outsider, assignment_id=assignment.pk)
    assert written_state() == before


@pytest.mark.parametrize("role", [Role.RESEARCHER, Role.ADMIN])
@pytest.mark.parametrize("action", ["draft", "submit"])
def test_a_researcher_or_admin_without_physician_role_cannot_post_a_label(
    assignment, complete_payload, role, action
):
    user = make_role_user(role)
    before = written_state()
    with pytest.raises(PermissionDenied) as excinfo:
        _act(action, user, assignment.pk, complete_payload)
    assert str(excinfo.value) == (
        "Only physicians label windows, and your account has no physician role."
    )
    assert written_state() == before


def test_an_inactive_physician_cannot_post_a_label(
    physicians, assignment, complete_payload
):
    physicians[0].is_active = False
    physicians[0].save()
    before = written_state()
    with pytest.raises(PermissionDenied):
        _act("draft", physicians[0], assignment.pk, complete_payload)
    assert written_state() == before


def test_assignment_get_returns_own_and_404s_others(physicians, assignment):
    assert (
        assignment_get_for_annotator(
            annotator=physicians[0], assignment_id=assignment.pk
        )
        == assignment
    )
    with pytest.raises(Http404):
        assignment_get_for_annotator(
            annotator=physicians[1], assignment_id=assignment.pk
        )
    with pytest.raises(Http404):
        assignment_get_for_annotator(
            annotator=make_role_user(Role.RESEARCHER), assignment_id=assignment.pk
        )


def test_queue_shows_only_own_assignments(db, admin_user, physicians, campaign):
    third = make_role_user(Role.PHYSICIAN)
    other_windows = make_gold_windows(
        stay=make_stay(admission=make_admission(), hours=6)
    )
    from annotation.services import campaign_create

    campaign_create(
        admin=admin_user,
        name="Other",
        windows=other_windows,
        physicians=[physicians[1], third],
    )

    queue = physician_queue(user=physicians[0])
    assert {a.annotator_id for a in queue.assignments} == {physicians[0].pk}
    assert {a.campaign_id for a in queue.assignments} == {campaign.pk}
    assert physician_queue(user=third, campaign=campaign).assignments == []
    assert physician_queue(user=admin_user).assignments == []
    assert physician_queue(user=make_role_user(Role.RESEARCHER)).assignments == []


# The blindness rule (annotation.blindness) ------------------------------------


def _stable(physician, campaign, window, problems=()):
    assignment = campaign.assignments.get(annotator=physician, window=window)
    # Each problem cites an event of the window's admission (campaign setting).
    cited = list(
        Event.objects.filter(admission_id=window.stay.admission_id)
        .order_by("pk")
        .values_list("pk", flat=True)[:1]
    )
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload={
            "status": "stable",
            "acute_problems": [{"text": t, "evidence": cited} for t in problems],
        },
        base_version=0,
    )


def test_a_window_closes_when_its_consensus_has_no_dispute_and_stays_closed(
    physicians, campaign, gold_windows, matcher
):
    """Every rater agreeing closes the window with no admin step: the raters
    are no longer blind to it, and its labels can no longer be reopened."""
    a, b = physicians
    window = gold_windows[1]
    assert not window_is_closed(campaign_id=campaign.pk, window_id=window.pk)
    _stable(a, campaign, window, ["Delirium"])
    assert window.pk in set(blind_window_ids(a).values_list("window_id", flat=True))
    assert b.pk in set(co_rater_ids(a).values_list("annotator_id", flat=True))
    mine = _stable(b, campaign, window, ["Delirium"])
    # submitted by both, agreement not computed yet: still open
    assert not window_is_closed(campaign_id=campaign.pk, window_id=window.pk)

    window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)

    assert window_is_closed(campaign_id=campaign.pk, window_id=window.pk)
    assert window.pk not in set(blind_window_ids(a).values_list("window_id", flat=True))
    before = written_state()
    with pytest.raises(ValidationError, match="window is closed"):
        label_reopen(annotator=b, assignment_id=mine.assignment_id)
    assert written_state() == before


def test_a_window_with_a_dispute_stays_open_until_adjudicated(
    admin_user, physicians, campaign, gold_windows, matcher
):
    a, b = physicians
    window = gold_windows[1]
    _stable(a, campaign, window, ["Delirium"])
    _stable(b, campaign, window)
    consensus = window_consensus_refresh(
        campaign=campaign, window=window, matcher=matcher
    )
    assert consensus.dispute_count == 1
    assert not window_is_closed(campaign_id=campaign.pk, window_id=window.pk)
    assert b.pk in set(co_rater_ids(a).values_list("annotator_id", flat=True))

    (dispute,) = consensus.open_disputes
    accept_items(
        admin_user,
        campaign,
        window,
        [dispute["item_ref"]],
        "seen on imaging",
        task=dispute["task"],
    )
    assert window_is_closed(campaign_id=campaign.pk, window_id=window.pk)
    assert window.pk not in set(blind_window_ids(a).values_list("window_id", flat=True))


def test_a_closed_window_stays_closed_when_a_recompute_finds_a_dispute(
    physicians, campaign, gold_windows, matcher
):
    """Closed as agreed at tau 0.5; recomputed at a stricter tau the two
    wordings no longer match: the dispute goes to adjudication, but the window
    is not reopened (its raters may have compared already)."""
    a, b = physicians
    window = gold_windows[1]
    _stable(a, campaign, window, ["Delirium"])
    mine = _stable(b, campaign, window, ["Acute delirium"])
    assert (
        window_consensus_refresh(
            campaign=campaign, window=window, matcher=matcher
        ).dispute_count
        == 0
    )
    tau = matcher.tau
    try:
        matcher.tau = 0.999
        recomputed = window_consensus_refresh(
            campaign=campaign, window=window, matcher=matcher
        )
    finally:
        matcher.tau = tau
    assert recomputed.dispute_count > 0
    assert window_is_closed(campaign_id=campaign.pk, window_id=window.pk)
    with pytest.raises(ValidationError, match="window is closed"):
        label_reopen(annotator=b, assignment_id=mine.assignment_id)


def test_a_window_closed_in_one_campaign_keeps_its_rater_in_another_blind(
    admin_user, physicians, campaign, gold_windows
):
    a, b = physicians
    window = gold_windows[1]
    third = make_role_user(Role.PHYSICIAN)
    other = campaign_create(
        admin=admin_user, name="Other", windows=[window], physicians=[a, third]
    )
    _stable(a, campaign, window)
    _stable(b, campaign, window)
    CampaignWindow.objects.filter(campaign=campaign, window=window).update(
        adjudicated_at=timezone.now()
    )
    # b's window is closed; a still rates it in the other campaign with third
    assert window.pk not in set(blind_window_ids(b).values_list("window_id", flat=True))
    assert window.pk in set(blind_window_ids(a).values_list("window_id", flat=True))
    co_raters = set(co_rater_ids(a).values_list("annotator_id", flat=True))
    assert {b.pk, third.pk} <= co_raters
    assert other.assignments.filter(annotator=a).exists()


def test_a_rater_added_after_the_window_closed_stays_blind_until_submitting(
    admin_user, physicians, campaign, gold_windows
):
    a, b = physicians
    window = gold_windows[1]
    _stable(a, campaign, window)
    _stable(b, campaign, window)
    CampaignWindow.objects.filter(campaign=campaign, window=window).update(
        adjudicated_at=timezone.now()
    )
    late = make_role_user(Role.PHYSICIAN)
    assignment_add(admin=admin_user, window=window, campaign=campaign, physician=late)
    assert window.pk in set(blind_window_ids(late).values_list("window_id", flat=True))
    co_raters = set(co_rater_ids(late).values_list("annotator_id", flat=True))
    assert {a.pk, b.pk} <= co_raters


def test_own_assignments_are_a_physicians_active_ones_only(
    physicians, campaign, admin_user
):
    a, _ = physicians
    assert set(own_assignments(a)) == set(campaign.assignments.filter(annotator=a))
    assert not own_assignments(admin_user).exists()
    assert not own_assignments(make_role_user(Role.RESEARCHER)).exists()


@pytest.mark.usefixtures("submitted")
def test_second_physician_opens_the_same_window_with_an_empty_form(
    physicians, campaign, assignment
):
    other = assignment_get_for_annotator(
        annotator=physicians[1],
        assignment_id=campaign.assignments.get(
            annotator=physicians[1], window=assignment.window
        ).pk,
    )
    from annotation.selectors import label_of

    assert label_of(other) is None
