"""Adjudication through the services, end to end with the real semantic
matcher: decisions settle disputes and are recorded apart from the labels,
bad or non-admin decisions write nothing, decisions are append-only, the
third-rater path, a dropped window, and the adjudication page's data."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection, transaction

from accounts.roles import Role
from annotation.models import (
    AdjudicationDecision,
    Assignment,
    AssignmentState,
    CampaignWindow,
    WindowAgreement,
)
from annotation.selectors.disputes import adjudication_queue, window_adjudication_get
from annotation.selectors.irr import campaign_irr
from annotation.services import (
    adjudication_decide,
    campaign_create,
    consensus_build,
    window_agreement_compute,
    window_consensus_refresh,
)
from annotation.tasks import window_agreement_task

from .conftest import make_role_user
from .consensus_data import ACTIONS, PROBLEMS, consensus_of, decide, stay, submit  # noqa: F401 - stay, a fixture
from .helpers import written_state


def _dispute(consensus, task):
    return next(d for d in consensus.open_disputes if d["task"] == task)


# Adjudication -------------------------------------------------------------------


def test_decisions_settle_disputes_and_leave_labels_unchanged(
    labelled, admin_user, windows
):
    before = written_state()
    w0 = windows[0]
    consensus = consensus_of(labelled, w0)
    problem_ref = _dispute(consensus, PROBLEMS)["item_ref"]
    action_ref = _dispute(consensus, ACTIONS)["item_ref"]

    accepted = decide(
        labelled,
        admin_user,
        w0,
        PROBLEMS,
        "rewrite",
        item_ref=problem_ref,
        new_text="Acute hypoxemic respiratory failure",
        reason="Intubated for hypoxemia",
    )
    dropped = decide(
        labelled,
        admin_user,
        w0,
        ACTIONS,
        "drop",
        item_ref=action_ref,
        reason="Intubation was not clearly indicated",
    )

    assert written_state() == before
    assert accepted.author == admin_user and accepted.created_at is not None
    assert accepted.reason == "Intubated for hypoxemia"
    assert accepted.context["dispute"]["texts"] == ["Respiratory failure"]
    consensus = consensus_of(labelled, w0)
    assert consensus.dispute_count == 0
    rewritten = consensus.items[PROBLEMS][1]
    assert rewritten["text"] == "Acute hypoxemic respiratory failure"
    assert rewritten["source"] == "adjudicated"
    assert rewritten["decision_id"] == accepted.pk
    assert "Ventilator" not in [t for a in consensus.items[ACTIONS] for t in a["texts"]]
    assert dropped.action == "drop"
    campaign_window = CampaignWindow.objects.get(campaign=labelled, window=w0)
    assert campaign_window.adjudication_started_at is not None
    assert campaign_window.adjudicated_at is not None
    assert w0.pk not in [
        c.window_id for c in adjudication_queue(admin=admin_user, campaign=labelled)
    ]


def test_accept_keeps_the_item_and_settle_status_sets_the_status(
    labelled, admin_user, windows
):
    w3 = windows[3]
    ref = _dispute(consensus_of(labelled, w3), PROBLEMS)["item_ref"]

    decide(
        labelled,
        admin_user,
        w3,
        PROBLEMS,
        "accept",
        item_ref=ref,
        reason="K 2.9 on the labs",
    )
    settle = decide(
        labelled,
        admin_user,
        w3,
        "status",
        "settle_status",
        new_status="deteriorating",
        reason="Rising lactate",
    )

    consensus = consensus_of(labelled, w3)
    assert consensus.items[PROBLEMS][0]["text"] == "Hypokalemia"
    assert consensus.items[PROBLEMS][0]["source"] == "adjudicated"
    assert consensus.status == "deteriorating"
    assert consensus.status_source == "settled"
    assert consensus.status_decision == settle
    assert consensus.dispute_count == 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"reason": "  "}, "Give a reason"),
        ({"action": "rewrite"}, "needs the new text"),
        ({"new_text": "x"}, "only goes with a rewrite"),
        ({"item_ref": "999/acute_problems/0"}, "not an open dispute"),
        ({"task": "status"}, "Settling the status|apply to an item"),
        (
            {"action": "settle_status", "task": "status", "item_ref": ""},
            "not in dispute",
        ),
        ({"action": "frobnicate"}, "Unknown decision"),
        ({"task": "vitals"}, "Unknown task"),
    ],
)
def test_bad_decisions_are_refused_and_nothing_is_written(
    labelled, admin_user, windows, change, message
):
    w0 = windows[0]
    ref = _dispute(consensus_of(labelled, w0), PROBLEMS)["item_ref"]
    arguments = {
        "admin": admin_user,
        "campaign": labelled,
        "window": w0,
        "task": PROBLEMS,
        "item_ref": ref,
        "action": "accept",
        "reason": "ok",
        **change,
    }
    before = (AdjudicationDecision.objects.count(), written_state())

    with pytest.raises(ValidationError, match=message):
        adjudication_decide(**arguments)

    assert (AdjudicationDecision.objects.count(), written_state()) == before
    assert (
        CampaignWindow.objects.get(campaign=labelled, window=w0).adjudication_started_at
        is None
    )


def test_settling_the_status_needs_a_valid_status(labelled, admin_user, windows):
    with pytest.raises(ValidationError, match="improving, stable or deteriorating"):
        decide(
            labelled,
            admin_user,
            windows[3],
            "status",
            "settle_status",
            new_status="critical",
        )
    assert not AdjudicationDecision.objects.exists()
    assert consensus_of(labelled, windows[3]).status == ""


def test_kept_items_agreed_status_and_decided_items_need_no_decision(
    labelled, admin_user, windows
):
    w0 = windows[0]
    consensus = consensus_of(labelled, w0)
    kept_ref = consensus.items[PROBLEMS][0]["cluster_id"]
    with pytest.raises(ValidationError, match="not an open dispute"):
        decide(labelled, admin_user, w0, PROBLEMS, "drop", item_ref=kept_ref)
    with pytest.raises(ValidationError, match="not in dispute"):
        decide(labelled, admin_user, w0, "status", "settle_status", new_status="stable")
    ref = _dispute(consensus, PROBLEMS)["item_ref"]
    decide(labelled, admin_user, w0, PROBLEMS, "accept", item_ref=ref)
    with pytest.raises(ValidationError, match="already decided"):
        decide(
            labelled,
            admin_user,
            w0,
            PROBLEMS,
            "drop",
            item_ref=ref,
            reason="changed my mind",
        )
    with pytest.raises(ValidationError, match="no open dispute"):
        decide(labelled, admin_user, windows[2], "window", "drop_window")


def test_only_admins_decide(labelled, physicians, windows):
    with pytest.raises(PermissionDenied):
        decide(
            labelled,
            physicians[0],
            windows[3],
            "status",
            "settle_status",
            new_status="stable",
        )
    assert not AdjudicationDecision.objects.exists()


def test_decisions_are_append_only(labelled, admin_user, windows):
    decision = decide(
        labelled, admin_user, windows[3], "status", "settle_status", new_status="stable"
    )

    with pytest.raises(ValidationError, match="append-only"):
        decision.save()
    with pytest.raises(ValidationError, match="append-only"):
        AdjudicationDecision.objects.all().delete()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE annotation_adjudicationdecision SET reason = 'x' WHERE id = %s",
            [decision.pk],
        )


def test_third_rater_path_recomputes_consensus_by_majority(
    labelled, admin_user, windows, matcher
):
    w3 = windows[3]
    third = make_role_user(Role.PHYSICIAN)

    decision = decide(
        labelled,
        admin_user,
        w3,
        "window",
        "request_third_rater",
        reason="Status unclear",
        physician=third,
    )

    added = Assignment.objects.get(campaign=labelled, window=w3, annotator=third)
    assert added.active and added.state == AssignmentState.TODO
    assert decision.context["assignment_id"] == added.pk
    assert not WindowAgreement.objects.filter(campaign=labelled, window=w3).exists()
    assert w3.pk not in [
        c.window_id for c in adjudication_queue(admin=admin_user, campaign=labelled)
    ]
    with pytest.raises(ValidationError, match="2 of 3 are"):
        window_agreement_compute(campaign=labelled, window=w3, matcher=matcher)

    submit(third, labelled, w3, "deteriorating", problems=["Hypokalemia"])
    window_agreement_task(labelled.pk, w3.pk)

    consensus = consensus_of(labelled, w3)
    assert consensus.status == "deteriorating"
    assert consensus.status_source == "majority"
    assert consensus.items[PROBLEMS][0]["texts"] == ["Hypokalemia"]
    assert len(consensus.items[PROBLEMS][0]["label_ids"]) == 2
    assert consensus.dispute_count == 0


def test_third_rater_is_chosen_from_the_campaign_when_not_named(
    admin_user, windows, clinical, matcher
):
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(3)]
    campaign = campaign_create(
        admin=admin_user, name="Three", windows=windows[1:2], physicians=doctors
    )
    raters = [a.annotator for a in campaign.assignments.all()]
    submit(raters[0], campaign, windows[1], "stable")
    submit(raters[1], campaign, windows[1], "improving")
    window_consensus_refresh(campaign=campaign, window=windows[1], matcher=matcher)

    decide(
        campaign,
        admin_user,
        windows[1],
        "status",
        "request_third_rater",
        reason="split",
    )

    (spare,) = set(doctors) - set(raters)
    assert Assignment.objects.filter(
        campaign=campaign, window=windows[1], annotator=spare, active=True
    ).exists()


def test_dropped_window_leaves_the_queue_and_takes_no_more_decisions(
    labelled, admin_user, windows
):
    w3 = windows[3]
    decide(
        labelled,
        admin_user,
        w3,
        "status",
        "drop_window",
        reason="Nobody can tell the trajectory",
    )

    consensus = consensus_of(labelled, w3)
    assert consensus.dropped is True
    assert consensus.dispute_count == 0
    assert w3.pk not in [
        c.window_id for c in adjudication_queue(admin=admin_user, campaign=labelled)
    ]
    assert CampaignWindow.objects.get(campaign=labelled, window=w3).adjudicated_at
    with pytest.raises(ValidationError, match="was dropped"):
        decide(labelled, admin_user, w3, "status", "settle_status", new_status="stable")
    # Rebuilding keeps it dropped.
    assert consensus_build(campaign=labelled, window=w3).dropped is True
    assert (
        campaign_irr(campaign=labelled, n_boot=50)["keep_rates"]["status"][
            "dropped_windows"
        ]
        == 1
    )


def test_adjudication_page_data(labelled, admin_user, windows):
    data = window_adjudication_get(
        admin=admin_user, campaign=labelled, window_id=windows[0].pk
    )

    assert len(data["labels"]) == 2
    assert data["agreement"].status_agreed
    assert data["consensus"].dispute_count == 2
    assert data["decisions"] == []
