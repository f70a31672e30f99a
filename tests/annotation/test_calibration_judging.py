"""Threshold calibration, judging and adopting: physicians' judgments
(replaced when judged again, refused when bad), the report's majority sweep,
and the admin adopting a tau (recorded, and used by the next matcher)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from annotation.calibration_judging import (
    calibration_judge,
    calibration_report,
    tau_adopt,
)
from annotation.models import CalibrationJudgment, CalibrationPair, TauAdoption
from evaluation.calibration import sweep_taus
from evaluation.matcher import SemanticMatcher
from evaluation.models import MatcherModel

from .calibration_data import SAME, draw_pairs, judge, judged_set  # noqa: F401
from .consensus_data import stay  # noqa: F401 - stay, a fixture

# Judgments, report, adoption --------------------------------------------------------


def test_judging_again_replaces_the_judgment(judged_set, physicians):
    pair = judged_set.pairs.get(position=0)
    calibration_judge(
        judge=physicians[0], calibration_set=judged_set, pair_id=pair.pk, same=False
    )
    judgment = CalibrationJudgment.objects.get(pair=pair, judge=physicians[0])
    assert judgment.same is False
    assert CalibrationJudgment.objects.filter(pair=pair).count() == 2


def test_bad_judgments_are_refused(judged_set, physicians, researcher):
    count = CalibrationJudgment.objects.count()
    with pytest.raises(ValidationError, match="same item or different"):
        calibration_judge(
            judge=physicians[0],
            calibration_set=judged_set,
            pair_id=judged_set.pairs.first().pk,
            same="maybe",
        )
    with pytest.raises(ValidationError, match="No such pair"):
        calibration_judge(
            judge=physicians[0], calibration_set=judged_set, pair_id=987654, same=True
        )
    with pytest.raises(PermissionDenied):
        calibration_judge(
            judge=researcher,
            calibration_set=judged_set,
            pair_id=judged_set.pairs.first().pk,
            same=True,
        )
    assert CalibrationJudgment.objects.count() == count


def test_report_sweeps_the_majority_judgments(judged_set, admin_user):
    report = calibration_report(admin=admin_user, calibration_set=judged_set)

    assert report["pairs"] == 7
    assert report["used"] == 6 and report["tied"] == 1 and report["judges"] == 2
    rows = {r["tau"]: r for r in report["rows"]}
    assert [r["tau"] for r in report["rows"]] == sweep_taus()
    assert rows[0.3]["f1"] == pytest.approx(0.75)
    assert rows[0.5]["f1"] == pytest.approx(2 / 3)
    assert rows[0.6]["accuracy"] == pytest.approx(5 / 6)
    assert rows[0.6]["f1"] == pytest.approx(0.8)
    # tau 0.4: 0.9 0.7 0.55 0.45 predicted -> TP 3, FP 1, FN 0: F1 6/7, the best.
    assert rows[0.4]["f1"] == pytest.approx(6 / 7)
    assert report["best"]["tau"] == 0.4


def test_report_counts_each_stratum_in_a_bounded_number_of_queries(
    judged_set, admin_user, django_assert_max_num_queries
):
    """Issue 35: the report reads the pairs and judgments as two queries of
    plain rows, whatever the set's size; its figures per stratum unchanged."""
    CalibrationPair.objects.create(
        calibration_set=judged_set,
        position=7,
        task="acute_problems",
        text_a="a7",
        text_b="b7",
        cosine=0.95,
        stratum="near_match",
    )
    with django_assert_max_num_queries(6):
        report = calibration_report(admin=admin_user, calibration_set=judged_set)

    assert report["pairs"] == 8 and report["unjudged"] == 1
    assert report["used"] == 6 and report["tied"] == 1 and report["judges"] == 2
    strata = {s["stratum"]: s for s in report["strata"]}
    assert strata["near_match"] == {
        "stratum": "near_match",
        "label": "Near match (just at or above tau)",
        "pairs": 1,
        "judged": 0,
        "same": 0,
    }
    assert strata["random"]["pairs"] == 7 and strata["random"]["judged"] == 6
    assert strata["random"]["same"] == sum(SAME) == report["positives"]
    assert strata["near_miss"]["pairs"] == 0


def test_adopting_a_tau_sets_the_models_tau_and_records_who_when_and_from_what(
    judged_set, admin_user, matcher
):
    MatcherModel.objects.update_or_create(
        name=matcher.model_name, defaults={"tau": 0.5}
    )

    adoption = tau_adopt(
        admin=admin_user, calibration_set=judged_set, tau="0.6", reason="Best F1"
    )

    model = MatcherModel.objects.get(name=matcher.model_name)
    assert model.tau == 0.6 and model.calibrated_at is not None
    assert "Hand" in model.notes and admin_user.username in model.notes
    assert adoption.adopted_by == admin_user and adoption.previous_tau == 0.5
    assert adoption.calibration_set == judged_set and adoption.reason == "Best F1"
    assert adoption.report["used"] == 6
    assert adoption.report["best"]["tau"] == 0.4
    # The next matcher of the model matches at the adopted tau.
    assert SemanticMatcher(matcher.model_name).tau == 0.6


@pytest.mark.parametrize("tau", ["0.62", "abc", "nan", None])
def test_a_tau_outside_the_report_is_refused_and_nothing_changes(
    judged_set, admin_user, matcher, tau
):
    with pytest.raises(ValidationError, match="report"):
        tau_adopt(admin=admin_user, calibration_set=judged_set, tau=tau)
    assert not TauAdoption.objects.exists()
    assert not MatcherModel.objects.filter(name=matcher.model_name).exists()


def test_a_set_without_judgments_cannot_calibrate(labelled, admin_user, matcher, judge):
    drawn = draw_pairs(
        admin_user, "Unjudged", [labelled], matcher, per_stratum=2, judges=[judge]
    )
    with pytest.raises(ValidationError, match="No pair of this set has a judgment"):
        tau_adopt(admin=admin_user, calibration_set=drawn, tau=0.5)
    assert not TauAdoption.objects.exists()


def test_only_admins_adopt(judged_set, physicians):
    with pytest.raises(PermissionDenied):
        tau_adopt(admin=physicians[0], calibration_set=judged_set, tau=0.6)
