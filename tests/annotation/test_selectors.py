"""The form's data: the window's critical actions to rate, and term suggestions."""

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.roles import Role
from annotation.critical import (
    critical_action_rules_clean,
    default_critical_action_rules,
)
from annotation.models import CampaignWindow, Label
from annotation.selectors.labelling import (
    _suggestions_python,
    recorded_critical_actions,
    term_suggestions,
)
from annotation.services import (
    campaign_critical_categories_set,
    label_save_draft,
    label_submit,
)

from .conftest import make_role_user
from .helpers import campaign_without_evidence


def test_critical_actions_are_the_windows_recorded_critical_ones(assignment, clinical):
    ids = list(
        recorded_critical_actions(assignment=assignment).values_list("pk", flat=True)
    )
    assert ids == [clinical["norepinephrine"].pk, clinical["intubation"].pk]


def test_admin_can_change_the_critical_categories(
    admin_user, campaign, assignment, clinical
):
    rules = default_critical_action_rules()
    rules.append(
        {
            "key": "insulin",
            "label": "Insulin",
            "domains": ["medication_admin_intermittent"],
            "categories": ["insulin"],
        }
    )
    campaign_critical_categories_set(admin=admin_user, campaign=campaign, rules=rules)
    assignment.campaign.refresh_from_db()
    ids = set(
        recorded_critical_actions(assignment=assignment).values_list("pk", flat=True)
    )
    assert clinical["insulin"].pk in ids


@pytest.mark.parametrize(
    "rules,message",
    [
        ("vasopressors", "must be a list of rules"),
        (
            [{"label": "x", "domains": ["vitals"]}],
            'Critical action rule 1 needs a "key".',
        ),
        ([{"key": "x", "domains": ["nowhere"]}], "names unknown domains: nowhere"),
        ([{"key": "x", "domains": []}], 'needs a list of one or more "domains"'),
        (
            [{"key": "x", "domains": ["vitals"], "categories": [""]}],
            '"categories" must be',
        ),
    ],
)
def test_bad_critical_rules_are_refused(admin_user, campaign, rules, message):
    with pytest.raises(ValidationError, match=message):
        campaign_critical_categories_set(
            admin=admin_user, campaign=campaign, rules=rules
        )
    campaign.refresh_from_db()
    assert campaign.critical_action_categories == critical_action_rules_clean(
        default_critical_action_rules()
    )


def _submit_items(physician, assignment, problems, clinical):
    payload = {
        "status": "stable",
        "acute_problems": [
            {"text": t, "evidence": [clinical["heart_rate"].pk]} for t in problems
        ],
        "action_ratings": [
            {"event_id": clinical["norepinephrine"].pk, "rating": "acceptable"},
            {"event_id": clinical["intubation"].pk, "rating": "acceptable"},
        ]
        if assignment.window.index == 0
        else [],
    }
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload=payload,
        base_version=0,
    )


def test_suggestions_are_campaign_wide_texts_most_used_first(
    physicians, campaign, gold_windows, clinical
):
    a, b = physicians
    mine = {
        w.index: campaign.assignments.get(annotator=a, window=w) for w in gold_windows
    }
    theirs = {
        w.index: campaign.assignments.get(annotator=b, window=w) for w in gold_windows
    }
    _submit_items(b, theirs[1], ["Septic shock", "Acute kidney injury"], clinical)
    _submit_items(b, theirs[2], ["septic  shock", "Shock liver"], clinical)
    _submit_items(a, mine[0], ["Hypotension"], clinical)
    _submit_items(a, mine[1], ["Septic shock"], clinical)
    _submit_items(a, mine[2], [], clinical)
    # another physician's draft is not suggested
    label_save_draft(
        annotator=b,
        assignment_id=theirs[0].pk,
        payload={"acute_problems": [{"text": "Shockwave"}]},
        base_version=0,
    )
    # b co-rates windows a has open: nothing b wrote is suggested to a
    assert term_suggestions(
        user=a, campaign=campaign, field="acute_problems", prefix="sho"
    ) == [("Septic shock", 1)]
    # not even once two of the three shared windows are closed: b's words on
    # them could repeat what b wrote on the one still open
    CampaignWindow.objects.filter(
        campaign=campaign, window__in=[gold_windows[1], gold_windows[2]]
    ).update(adjudicated_at=timezone.now())
    assert term_suggestions(
        user=a, campaign=campaign, field="acute_problems", prefix="sho"
    ) == [("Septic shock", 1)]
    CampaignWindow.objects.filter(campaign=campaign, window=gold_windows[0]).update(
        adjudicated_at=timezone.now()
    )

    got = term_suggestions(
        user=a, campaign=campaign, field="acute_problems", prefix="sho"
    )
    assert got == [("Septic shock", 3), ("Shock liver", 1)]
    assert term_suggestions(
        user=a, campaign=campaign, field="acute_problems", prefix="ACUTE"
    ) == [("Acute kidney injury", 1)]
    # b has not submitted window 0: a's words stay hidden from b
    assert (
        term_suggestions(
            user=b, campaign=campaign, field="acute_problems", prefix="hypo"
        )
        == []
    )
    # the portable version agrees
    labels = Label.objects.filter(
        assignment__campaign=campaign, assignment__state="submitted"
    )
    assert _suggestions_python(
        labels=labels, field="acute_problems", prefix="sho", limit=10
    ) == [("Septic shock", 3), ("Shock liver", 1)]


def test_suggestions_leave_out_a_co_raters_words_from_every_campaign(
    admin_user, physicians, campaign
):
    """A co-rater of a window in one campaign writes in another campaign (on
    another stay's window, with someone else): none of it is suggested
    (issue 12); the other rater's words are."""
    from annotation.models import CampaignPhysician
    from tests.factories import make_admission, make_stay

    from .conftest import make_gold_windows

    a, b = physicians
    c = make_role_user(Role.PHYSICIAN)
    elsewhere = make_gold_windows(
        stay=make_stay(admission=make_admission(), hours=12), count=1
    )
    # Its stay has no events to cite.
    other = campaign_without_evidence(admin_user, "Other", elsewhere, [b, c])
    # a takes part in the other campaign, on none of its windows yet
    CampaignPhysician.objects.create(campaign=other, user=a)
    for physician, text in ((b, "Pneumothorax"), (c, "Pneumonia")):
        label_submit(
            annotator=physician,
            assignment_id=other.assignments.get(annotator=physician).pk,
            payload={"status": "stable", "acute_problems": [{"text": text}]},
            base_version=0,
        )
    # b shares the first campaign's windows with a
    assert term_suggestions(
        user=a, campaign=other, field="acute_problems", prefix="pneum"
    ) == [("Pneumonia", 1)]


def test_suggestions_only_for_the_campaigns_physicians_and_known_fields(
    physicians, campaign, gold_windows, clinical
):
    a, b = physicians
    _submit_items(
        b,
        campaign.assignments.get(annotator=b, window=gold_windows[1]),
        ["Septic shock"],
        clinical,
    )
    outsider = make_role_user(Role.PHYSICIAN)
    assert (
        term_suggestions(
            user=outsider, campaign=campaign, field="acute_problems", prefix="sep"
        )
        == []
    )
    assert (
        term_suggestions(
            user=make_role_user(Role.RESEARCHER),
            campaign=campaign,
            field="acute_problems",
            prefix="sep",
        )
        == []
    )
    assert term_suggestions(user=a, campaign=campaign, field="status", prefix="s") == []
    assert (
        term_suggestions(user=a, campaign=campaign, field="acute_problems", prefix="%")
        == []
    )
    assert (
        term_suggestions(user=a, campaign=campaign, field="acute_problems", prefix="")
        == []
    )
