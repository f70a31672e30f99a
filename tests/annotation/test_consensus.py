"""Agreement and consensus through the services, end to end with the real
semantic matcher: agreement once every label is in, matched items kept with
merged texts and evidence, a queue of exactly the disagreements, the hook and
the task that compute agreement, and the campaign's IRR figures."""

import math

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from annotation.models import ConsensusLabel, WindowAgreement
from annotation.selectors.disputes import adjudication_queue
from annotation.selectors.irr import campaign_irr, physician_stats
from annotation.services import window_agreement_compute, window_consensus_refresh
from annotation.services.agreement import on_label_submitted
from annotation.tasks import window_agreement_task
from jobs.models import OutboxMessage

from .consensus_data import ACTIONS, FLAGS, PROBLEMS, consensus_of, decide, stay, submit  # noqa: F401 - stay, a fixture

# Agreement ----------------------------------------------------------------------


def test_agreement_needs_every_assigned_label_submitted(
    gold, physicians, windows, matcher
):
    submit(physicians[0], gold, windows[1], "stable")

    with pytest.raises(ValidationError, match="1 of 2 are"):
        window_agreement_compute(campaign=gold, window=windows[1], matcher=matcher)
    assert not WindowAgreement.objects.exists()


def test_agreement_records_status_clusters_and_pairwise_f1(labelled, windows, matcher):
    agreement = WindowAgreement.objects.get(campaign=labelled, window=windows[0])

    assert agreement.status_agreed is True
    assert agreement.status_value == "deteriorating"
    assert agreement.matcher_model == matcher.model_name
    assert agreement.tau == 0.5
    problems = agreement.clusters[PROBLEMS]
    assert [sorted(i["text"] for i in c["items"]) for c in problems] == [
        ["Septic shock", "Shock due to sepsis"],
        ["Respiratory failure"],
    ]
    assert [c["kept"] for c in problems] == [True, False]
    # 1 of 2 vs 1 of 1 matched: P = 0.5, R = 1.
    assert agreement.pairwise_f1[PROBLEMS]["mean"] == pytest.approx(2 / 3)
    # Norepinephrine and the blood cultures match; the ventilator is one-sided.
    assert agreement.pairwise_f1[ACTIONS]["mean"] == pytest.approx(0.8)
    assert agreement.pairwise_f1[FLAGS]["mean"] == pytest.approx(1.0)

    disagreed = WindowAgreement.objects.get(campaign=labelled, window=windows[3])
    assert disagreed.status_agreed is False
    assert disagreed.status_value == ""
    assert disagreed.pairwise_f1[PROBLEMS]["mean"] == 0.0


def test_recomputing_agreement_replaces_it(labelled, windows, matcher):
    first = WindowAgreement.objects.get(campaign=labelled, window=windows[0])

    again = window_agreement_compute(
        campaign=labelled, window=windows[0], matcher=matcher
    )

    assert again.pk == first.pk
    assert again.clusters == first.clusters
    assert WindowAgreement.objects.filter(campaign=labelled).count() == 4


# Consensus ----------------------------------------------------------------------


def test_matched_items_are_kept_with_merged_texts_and_evidence(
    labelled, windows, clinical
):
    consensus = consensus_of(labelled, windows[0])

    assert consensus.status == "deteriorating"
    assert consensus.status_source == "agreed"
    (problem,) = consensus.items[PROBLEMS]
    assert problem["text"] == "Septic shock"
    assert problem["texts"] == ["Septic shock", "Shock due to sepsis"]
    assert problem["evidence"] == sorted(
        [clinical["lactate"].pk, clinical["norepinephrine"].pk]
    )
    assert problem["source"] == "consensus"
    actions = consensus.items[ACTIONS]
    assert [a["texts"] for a in actions] == [
        ["start Norepinephrine 0.1 mcg/kg/min"],  # the decision, not the drug
        ["Blood cultures", "Obtain blood cultures"],
    ]
    assert consensus.items[FLAGS][0]["texts"] == [
        "Avoid fluid overload",
        "Avoid excessive fluids",
    ]


def test_queue_holds_exactly_the_disagreements(labelled, admin_user, windows):
    queue = adjudication_queue(admin=admin_user, campaign=labelled)

    assert [c.window_id for c in queue] == [windows[0].pk, windows[1].pk, windows[3].pk]
    disputes = {
        c.window_id: sorted((d["task"], tuple(d["texts"])) for d in c.open_disputes)
        for c in queue
    }
    assert disputes == {
        windows[0].pk: [
            (PROBLEMS, ("Respiratory failure",)),
            (ACTIONS, ("Invasive mechanical ventilation (Ventilator)",)),
        ],
        windows[1].pk: [(FLAGS, ("Avoid nephrotoxic drugs",))],
        windows[3].pk: [
            (PROBLEMS, ("Hypokalemia",)),
            ("status", ("stable", "deteriorating")),
        ],
    }
    assert consensus_of(labelled, windows[2]).dispute_count == 0


def test_queue_is_for_admins_only(labelled, physicians):
    with pytest.raises(PermissionDenied):
        adjudication_queue(admin=physicians[0], campaign=labelled)


# Hook and task ------------------------------------------------------------------


def test_last_label_of_a_window_enqueues_the_agreement_task(
    gold, physicians, windows, django_capture_on_commit_callbacks
):
    first = submit(physicians[0], gold, windows[2], "stable")
    with django_capture_on_commit_callbacks() as callbacks:
        assert on_label_submitted(first) is False
    assert callbacks == []

    with django_capture_on_commit_callbacks() as callbacks:
        last = submit(physicians[1], gold, windows[2], "stable")
    assert len(callbacks) == 1
    # The agreement task waits in the outbox (sent on commit); once per window.
    assert on_label_submitted(last) is True
    message = OutboxMessage.objects.get()
    assert message.task == "annotation.tasks.window_agreement_task"
    assert message.args == [gold.pk, windows[2].pk]


def test_agreement_task_is_idempotent_and_skips_incomplete_windows(
    gold, physicians, windows, matcher
):
    submit(physicians[0], gold, windows[2], "stable")
    window_agreement_task(gold.pk, windows[2].pk)
    assert not WindowAgreement.objects.exists()

    submit(physicians[1], gold, windows[2], "stable")
    window_agreement_task(gold.pk, windows[2].pk)
    window_agreement_task(gold.pk, windows[2].pk)
    assert WindowAgreement.objects.count() == 1
    assert ConsensusLabel.objects.get().status == "stable"


# Campaign figures ---------------------------------------------------------------


def test_campaign_irr_on_a_fixed_example(labelled, physicians):
    irr = campaign_irr(campaign=labelled, n_boot=200, seed=1)

    status = irr["status"]
    assert irr["windows"] == 4
    assert status["percent_agreement"]["estimate"] == pytest.approx(0.75)
    # Rater 1: det, stable, improving, stable; rater 2: det, stable, improving,
    # det. p_o = 3/4, p_e = 1/4*2/4 + 2/4*1/4 + 1/4*1/4 = 5/16, kappa = 7/11.
    assert status["kappa_name"] == "cohen"
    assert status["kappa"]["estimate"] == pytest.approx(7 / 11)
    # Ordinal alpha: n = 8 values (improving 2, stable 3, deteriorating 3);
    # one stable-deteriorating pair, delta^2 = (6 - 3)^2 = 9, so D_o sum = 18;
    # D_e sum = 2 (2*3*6.25 + 2*3*30.25 + 3*3*9) = 600; 1 - 7*18/600 = 0.79.
    assert status["alpha_ordinal"]["estimate"] == pytest.approx(0.79)
    for figure in ("percent_agreement", "kappa", "alpha_ordinal"):
        ci = status[figure]
        assert ci["low"] <= ci["estimate"] <= ci["high"]
    # Problems: w0 2/3, w1 1, w2 1 (both empty), w3 0.
    problems = irr["set_tasks"][PROBLEMS]["mean_pairwise_f1"]
    assert problems["estimate"] == pytest.approx((2 / 3 + 1 + 1 + 0) / 4)
    # Red flags: w0 1, w1 0, w2 1, w3 1.
    assert irr["set_tasks"][FLAGS]["mean_pairwise_f1"]["estimate"] == pytest.approx(
        0.75
    )

    (pair,) = irr["pairs"]
    assert pair["physicians"] == sorted(p.pk for p in physicians)
    assert pair["windows"] == 4
    assert pair["status_percent_agreement"] == pytest.approx(0.75)
    assert pair["status_cohens_kappa"] == pytest.approx(7 / 11)

    keep = irr["keep_rates"]
    assert keep["status"]["raw"] == 4 and keep["status"]["kept_auto"] == 3
    assert keep["status"]["keep_rate"] == pytest.approx(0.75)
    # Problems: 6 raw items, 4 of them in matched pairs (w0 shock, w1 delirium).
    assert keep[PROBLEMS]["raw"] == 6
    assert keep[PROBLEMS]["kept_auto"] == 4
    assert keep[PROBLEMS]["keep_rate"] == pytest.approx(4 / 6)
    assert keep[PROBLEMS]["clusters"] == 4
    assert keep[PROBLEMS]["kept_final"] == 2


def test_physician_stats(labelled, admin_user, physicians):
    rows = physician_stats(admin=admin_user, campaign=labelled)

    assert {r["user_id"] for r in rows} == {p.pk for p in physicians}
    for row in rows:
        assert row["assigned"] == 4 and row["labels_done"] == 4
        assert row["median_seconds"] == 0
        assert row["windows_compared"] == 4
        assert row["status_agreement"] == pytest.approx(0.75)
        assert row["mean_pairwise_f1"][PROBLEMS] == pytest.approx(2 / 3)
    with pytest.raises(PermissionDenied):
        physician_stats(admin=physicians[0], campaign=labelled)


def test_campaign_irr_without_agreement_is_empty(gold):
    irr = campaign_irr(campaign=gold, n_boot=10)

    assert irr["windows"] == 0
    assert irr["status"] is None
    assert math.isnan(irr["keep_rates"]["status"]["keep_rate"])


def test_reopening_a_label_forgets_the_window_agreement(labelled, windows):
    from annotation.models import Label
    from annotation.services.agreement import on_label_reopened

    label = Label.objects.filter(
        assignment__campaign=labelled, assignment__window=windows[2]
    ).first()

    on_label_reopened(label)

    assert not WindowAgreement.objects.filter(
        campaign=labelled, window=windows[2]
    ).exists()
    assert not ConsensusLabel.objects.filter(
        campaign=labelled, window=windows[2]
    ).exists()
    assert WindowAgreement.objects.filter(campaign=labelled).count() == 3


def test_submit_stands_when_the_broker_is_unreachable(
    gold, physicians, windows, django_capture_on_commit_callbacks, monkeypatch
):
    """The label is committed before the agreement task is sent: a broker that
    cannot be reached leaves it in the outbox for the reaper, and the
    physician's submit still succeeds (tests/annotation/test_recompute_jobs.py
    follows it to the agreement)."""
    from realicu_web.celery import app

    def broker_down(*args, **kwargs):
        raise OSError("broker unreachable")

    monkeypatch.setattr(app, "send_task", broker_down)
    submit(physicians[0], gold, windows[2], "stable")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        last = submit(physicians[1], gold, windows[2], "stable")
    assert len(callbacks) == 1
    last.refresh_from_db()
    assert last.submitted_at is not None
    assert OutboxMessage.objects.get().last_error == "OSError: broker unreachable"


def test_consensus_status_carries_the_evidence_of_the_labels_that_gave_it(
    gold, physicians, windows, clinical, admin_user, matcher
):
    from annotation.services import campaign_agreement_refresh

    a, b = physicians
    ne, lactate, insulin = (
        clinical["norepinephrine"].pk,
        clinical["lactate"].pk,
        clinical["insulin"].pk,
    )
    w0, w1, w2, w3 = windows
    submit(a, gold, w0, "deteriorating", status_evidence=[ne])
    submit(b, gold, w0, "deteriorating", status_evidence=[lactate, ne])
    submit(a, gold, w1, "stable", status_evidence=[insulin])
    submit(b, gold, w1, "deteriorating", status_evidence=[lactate])
    submit(a, gold, w2, "improving")
    submit(b, gold, w2, "improving")

    # Campaign-wide path: agreed status -> the union of both labels' evidence;
    # a status in dispute has none yet.
    campaign_agreement_refresh(
        campaign=gold, matcher=matcher, window_ids=[w0.pk, w1.pk, w2.pk]
    )
    assert consensus_of(gold, w0).status_evidence == sorted([ne, lactate])
    assert (
        consensus_of(gold, w1).status == ""
        and consensus_of(gold, w1).status_evidence == []
    )
    assert consensus_of(gold, w2).status_evidence == []

    # Single-window path gives the same.
    window_consensus_refresh(campaign=gold, window=w0, matcher=matcher)
    assert consensus_of(gold, w0).status_evidence == sorted([ne, lactate])

    # Settled: the evidence of the label whose status the admin settled on.
    decide(
        gold,
        admin_user,
        w1,
        "status",
        "settle_status",
        new_status="stable",
        reason="Lactate falling",
    )
    settled = consensus_of(gold, w1)
    assert settled.status_source == "settled" and settled.status_evidence == [insulin]
