"""Threshold calibration, the sweep and the draw: the tau sweep against
hand-computed figures, and pairs drawn from real labels in their cosine strata,
with who may be shown which pair and the draws that are refused."""

import math

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from annotation.blindness import calibration_pairs_visible_to
from annotation.calibration import calibration_invite, calibration_set_draw
from annotation.calibration_judging import calibration_judge
from annotation.models import CalibrationJudgment, CalibrationPair, CalibrationSet
from evaluation.calibration import best_row, majority, sweep_taus, tau_sweep

from .calibration_data import COSINES, SAME, draw_pairs, judge  # noqa: F401
from .consensus_data import stay, submit  # noqa: F401 - stay, a fixture

# The sweep (pure) -----------------------------------------------------------------


def test_sweep_taus_run_from_0_3_to_0_9_by_0_05():
    taus = sweep_taus()
    assert taus[0] == 0.3 and taus[-1] == 0.9 and len(taus) == 13
    assert 0.5 in taus and 0.65 in taus


def test_tau_sweep_matches_hand_computed_figures():
    rows = {r.tau: r for r in tau_sweep(COSINES, SAME, [0.3, 0.5, 0.6, 0.8, 0.95])}

    # tau 0.3: predicted 0.9 0.7 0.55 0.45 0.35 -> TP 3, FP 2, FN 0, TN 1.
    r = rows[0.3]
    assert (r.tp, r.fp, r.fn, r.tn) == (3, 2, 0, 1)
    assert r.accuracy == pytest.approx(4 / 6)
    assert r.precision == pytest.approx(3 / 5)
    assert r.recall == pytest.approx(1.0)
    assert r.f1 == pytest.approx(0.75)
    # tau 0.5: TP 2, FP 1 (0.55), FN 1 (0.45), TN 2.
    r = rows[0.5]
    assert (r.tp, r.fp, r.fn, r.tn) == (2, 1, 1, 2)
    assert (r.accuracy, r.precision, r.recall) == pytest.approx((4 / 6, 2 / 3, 2 / 3))
    assert r.f1 == pytest.approx(2 / 3)
    # tau 0.6: TP 2, FP 0, FN 1, TN 3.
    r = rows[0.6]
    assert (r.accuracy, r.precision, r.recall, r.f1) == pytest.approx(
        (5 / 6, 1.0, 2 / 3, 0.8)
    )
    # tau 0.8: TP 1, FN 2, TN 3.
    r = rows[0.8]
    assert (r.accuracy, r.precision, r.recall, r.f1) == pytest.approx(
        (4 / 6, 1.0, 1 / 3, 0.5)
    )
    # tau 0.95: nothing predicted: precision undefined, F1 0.
    r = rows[0.95]
    assert math.isnan(r.precision)
    assert (r.accuracy, r.recall, r.f1) == pytest.approx((0.5, 0.0, 0.0))
    assert best_row(list(rows.values())).tau == 0.6


def test_a_cosine_equal_to_tau_is_a_match():
    (row,) = tau_sweep([0.5], [True], [0.5])
    assert row.tp == 1


def test_sweep_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="one of each per pair"):
        tau_sweep([0.5, 0.6], [True])


def test_majority_of_judgments():
    assert majority([True, True, False]) is True
    assert majority([False]) is False
    assert majority([True, False]) is None
    assert majority([]) is None


# Drawing pairs from labels ---------------------------------------------------------


def test_pairs_are_drawn_from_the_labels_in_their_cosine_strata(
    labelled, admin_user, matcher, judge
):
    drawn = draw_pairs(
        admin_user,
        "Cal 1",
        [labelled],
        matcher,
        per_stratum=3,
        band=0.2,
        seed=1,
        judges=[judge],
    )

    pairs = list(drawn.pairs.all())
    assert drawn.model_name == matcher.model_name
    assert drawn.tau_at_draw == 0.5
    assert 1 <= len(pairs) <= 9
    texts = {
        "Septic shock",
        "Respiratory failure",
        "Shock due to sepsis",
        "Delirium",
        "Hypokalemia",
        "Blood cultures",
        "Obtain blood cultures",
        "Avoid fluid overload",
        "Avoid excessive fluids",
        "Avoid nephrotoxic drugs",
    }
    for pair in pairs:
        assert {pair.text_a, pair.text_b} <= texts
        assert pair.text_a != pair.text_b
        cosine = float(matcher.similarity([pair.text_a], [pair.text_b])[0, 0])
        assert pair.cosine == pytest.approx(cosine, abs=1e-5)
        if pair.stratum == "near_match":
            assert 0.5 <= pair.cosine < 0.7
        elif pair.stratum == "near_miss":
            assert 0.3 <= pair.cosine < 0.5
        assert len(pair.sources) == 2 and pair.sources[0]["label_id"]
    assert sum(p.stratum == "random" for p in pairs) == 3
    assert sorted(p.position for p in pairs) == list(range(len(pairs)))
    assert list(drawn.invitations.values_list("judge", flat=True)) == [judge.pk]


def test_drawn_pairs_store_the_guarded_similarity_so_an_opposite_pair_gets_minus_one(
    gold, physicians, windows, admin_user, matcher, judge
):
    a, b = physicians
    submit(a, gold, windows[1], "stable", added=["Start norepinephrine infusion"])
    submit(b, gold, windows[1], "stable", added=["Stop norepinephrine infusion"])

    drawn = draw_pairs(
        admin_user,
        "Opposites",
        [gold],
        matcher,
        per_stratum=3,
        band=0.3,
        seed=0,
        judges=[judge],
    )

    (pair,) = drawn.pairs.all()
    # The model reads them as near the same: only the guard tells them apart.
    raw = float(matcher.cosine([pair.text_a], [pair.text_b])[0, 0])
    assert raw >= matcher.tau
    assert pair.cosine == -1.0
    assert pair.stratum == "random"  # -1 is in no band near tau


def test_without_judges_only_closed_windows_give_items(
    labelled, admin_user, matcher, windows
):
    """Window 0 is adjudicated; windows 1 and 3 stay open and give nothing
    (window 2, closed as agreed, has no item)."""
    from django.utils import timezone

    from annotation.models import CampaignWindow

    CampaignWindow.objects.filter(campaign=labelled, window=windows[0]).update(
        adjudicated_at=timezone.now()
    )
    drawn = draw_pairs(
        admin_user, "Closed", [labelled], matcher, per_stratum=50, band=0.5
    )
    texts = {t for p in drawn.pairs.all() for t in (p.text_a, p.text_b)}
    assert texts and texts <= {
        "Septic shock",
        "Respiratory failure",
        "Shock due to sepsis",
        "Blood cultures",
        "Obtain blood cultures",
        "Avoid fluid overload",
        "Avoid excessive fluids",
    }
    assert not drawn.invitations.exists()


def test_a_judge_who_rates_the_windows_gets_no_item_of_them_nor_of_their_co_raters(
    labelled, admin_user, matcher, physicians, judge
):
    """Drawn for physician a, who rates every window of the campaign with b:
    nothing is left to pair (a's own items come from open windows too)."""
    with pytest.raises(ValidationError, match="nothing to pair"):
        draw_pairs(
            admin_user,
            "For a",
            [labelled],
            matcher,
            per_stratum=5,
            judges=[physicians[0], judge],
        )
    assert not CalibrationSet.objects.exists()


def test_an_invited_rater_is_never_shown_a_pair_with_a_co_raters_words(
    labelled, admin_user, matcher, physicians, judge
):
    """Drawn for an outside judge, then a (who co-rates every window with b) is
    invited: a is shown only pairs without b's words, and cannot judge the
    others by forging their id."""
    drawn = draw_pairs(
        admin_user,
        "Late",
        [labelled],
        matcher,
        per_stratum=20,
        band=0.5,
        judges=[judge],
    )
    a, b = physicians
    calibration_invite(admin=admin_user, calibration_set=drawn, judges=[a])
    b_words = {
        "shock due to sepsis",
        "obtain blood cultures",
        "avoid excessive fluids",
        "delirium",
    }
    shown = list(calibration_pairs_visible_to(user=a, calibration_set=drawn))
    hidden = [
        p for p in drawn.pairs.all() if {p.text_a.lower(), p.text_b.lower()} & b_words
    ]
    assert hidden
    assert not {p.pk for p in shown} & {p.pk for p in hidden}
    assert len(shown) == drawn.pairs.count() - len(hidden)
    with pytest.raises(ValidationError, match="No such pair"):
        calibration_judge(
            judge=a, calibration_set=drawn, pair_id=hidden[0].pk, same=True
        )
    assert not CalibrationJudgment.objects.exists()
    # the outside judge sees every pair
    assert calibration_pairs_visible_to(user=judge, calibration_set=drawn).count() == (
        drawn.pairs.count()
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"name": " "}, "Give the calibration set a name"),
        ({"campaigns": []}, "Choose at least one campaign"),
        ({"per_stratum": 0}, "Pairs per stratum must be a whole number"),
        ({"band": 0.9}, "The band must be above 0"),
    ],
)
def test_bad_draws_are_refused_and_nothing_is_written(
    labelled, admin_user, matcher, changes, message
):
    arguments = {
        "admin": admin_user,
        "name": "Cal",
        "campaigns": [labelled],
        "matcher": matcher,
        "per_stratum": 3,
        "band": 0.15,
    }
    with pytest.raises(ValidationError, match=message):
        calibration_set_draw(**{**arguments, **changes})
    assert not CalibrationSet.objects.exists()
    assert not CalibrationPair.objects.exists()


def test_a_campaign_without_submitted_labels_has_nothing_to_pair(
    gold, admin_user, matcher
):
    with pytest.raises(ValidationError, match="nothing to pair"):
        draw_pairs(admin_user, "Empty", [gold], matcher)
    assert not CalibrationSet.objects.exists()


def test_only_admins_draw(labelled, physicians, matcher):
    with pytest.raises(PermissionDenied):
        draw_pairs(physicians[0], "X", [labelled], matcher)
