"""Roles and blindness: physicians act on and see only their own assignments and
labels; ids not theirs are 404s; researchers and admins without the physician
role cannot label."""

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils import timezone

from annotation.models import CampaignWindow
from annotation.selectors import (
    assignment_get_for_annotator,
    physician_queue,
    window_labels_visible_to,
)
from annotation.services import label_reopen, label_save_draft, label_submit
from tests.factories import make_admission, make_stay
from windows.accounts import Role

from .conftest import make_gold_windows, make_role_user
from .helpers import written_state

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
def test_acting_on_another_physicians_assignment_is_a_404_and_writes_nothing(
    physicians, assignment, complete_payload, action
):
    label_submit(
        annotator=physicians[0],
        assignment_id=assignment.pk,
        payload=complete_payload,
        base_version=0,
    )
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


def test_a_physician_never_sees_the_co_raters_label_before_adjudication(
    physicians, campaign, assignment, complete_payload, admin_user
):
    window = assignment.window
    other = campaign.assignments.get(annotator=physicians[1], window=window)
    mine = label_submit(
        annotator=physicians[0],
        assignment_id=assignment.pk,
        payload=complete_payload,
        base_version=0,
    )
    theirs = label_save_draft(
        annotator=physicians[1],
        assignment_id=other.pk,
        payload={"status": "stable"},
        base_version=0,
    )

    assert list(window_labels_visible_to(user=physicians[0], window=window)) == [mine]
    assert list(window_labels_visible_to(user=physicians[1], window=window)) == [theirs]
    assert set(window_labels_visible_to(user=admin_user, window=window)) == {
        mine,
        theirs,
    }
    assert (
        list(
            window_labels_visible_to(
                user=make_role_user(Role.RESEARCHER), window=window
            )
        )
        == []
    )
    outsider = make_role_user(Role.PHYSICIAN)
    assert list(window_labels_visible_to(user=outsider, window=window)) == []

    # after adjudication the window's raters may compare, outsiders still not
    CampaignWindow.objects.filter(campaign=campaign, window=window).update(
        adjudicated_at=timezone.now()
    )
    assert set(window_labels_visible_to(user=physicians[1], window=window)) == {
        mine,
        theirs,
    }
    assert list(window_labels_visible_to(user=outsider, window=window)) == []


def test_second_physician_opens_the_same_window_with_an_empty_form(
    physicians, campaign, assignment, complete_payload
):
    label_submit(
        annotator=physicians[0],
        assignment_id=assignment.pk,
        payload=complete_payload,
        base_version=0,
    )
    other = assignment_get_for_annotator(
        annotator=physicians[1],
        assignment_id=campaign.assignments.get(
            annotator=physicians[1], window=assignment.window
        ).pk,
    )
    from annotation.selectors import label_of

    assert label_of(other) is None
