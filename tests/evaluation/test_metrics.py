"""Section-6 metrics against hand computations on small fixed examples."""

import math

import pytest

from evaluation.agreement import STATUS_ORDER
from evaluation.metrics import (
    WindowGold,
    WindowPrediction,
    hit_at_k,
    hours_bin,
    hrr_at_k,
    recall_at_k,
    score_by_group,
    score_predictions,
    set_semantic_f1,
    status_accuracy,
    status_macro_f1,
    status_per_class,
    validate_oracle,
    window_harmful_fraction,
    window_hit_at_k,
    window_recall_at_k,
)
from tests.evaluation.toy_matcher import canon, toy_match

I, S, D = STATUS_ORDER

# --- status -------------------------------------------------------------------


GOLD_STATUS = [I, I, S, S, S, D, D, S]
PRED_STATUS = [I, S, S, S, D, D, S, None]


def test_status_accuracy_counts_a_missing_prediction_as_wrong():
    # agree at 0, 2, 3, 5 -> 4/8
    assert status_accuracy(GOLD_STATUS, PRED_STATUS) == pytest.approx(0.5)


def test_status_macro_f1_by_hand():
    # F1 = 2tp / (2tp + fp + fn)
    # improving: tp 1, fp 0, fn 1 -> 2/3
    # stable: tp 2, fp 2 (I->S, D->S), fn 2 (S->D, S->None) -> 4/8 = 1/2
    # deteriorating: tp 1, fp 1 (S->D), fn 1 (D->S) -> 2/4 = 1/2
    # macro = (2/3 + 1/2 + 1/2) / 3 = 5/9
    per_class = status_per_class(GOLD_STATUS, PRED_STATUS)
    assert per_class[I].f1 == pytest.approx(2 / 3)
    assert per_class[S].f1 == pytest.approx(0.5)
    assert per_class[D].f1 == pytest.approx(0.5)
    assert per_class[S].support == 4
    assert per_class[S].precision == pytest.approx(0.5)
    assert status_macro_f1(GOLD_STATUS, PRED_STATUS) == pytest.approx(5 / 9)


def test_status_macro_f1_is_over_the_three_classes_always():
    # Spec section 6: an all-stable run predicted perfectly scores (1 + 0 + 0) / 3.
    assert status_macro_f1([S] * 10, [S] * 10) == pytest.approx(1 / 3)
    per_class = status_per_class([S] * 10, [S] * 10)
    assert set(per_class) == set(STATUS_ORDER)
    assert per_class[I].f1 == 0.0 and per_class[I].support == 0
    # deteriorating never occurs: improving F1 = 2/(2+1+0) = 2/3 (S->I is a fp),
    # stable F1 = 2/(2+0+1) = 2/3, deteriorating 0 -> (2/3 + 2/3 + 0) / 3 = 4/9.
    assert status_macro_f1([S, S, I], [S, I, I]) == pytest.approx(4 / 9)
    # A class only predicted: F1 0 for it, and 0 for the absent improving.
    assert status_macro_f1([S, S], [S, D]) == pytest.approx((2 / 3 + 0 + 0) / 3)
    # Every class present and right: 1.
    assert status_macro_f1([I, S, D], [I, S, D]) == pytest.approx(1.0)


def test_status_metrics_skip_windows_without_gold_status():
    assert status_accuracy([S, None], [S, D]) == pytest.approx(1.0)
    assert math.isnan(status_accuracy([None], [S]))
    assert math.isnan(status_macro_f1([None], [S]))


def test_status_metrics_reject_unknown_labels():
    with pytest.raises(ValueError, match="predicted status 'better'"):
        status_accuracy([S], ["better"])
    with pytest.raises(ValueError, match="1 gold statuses but 2"):
        status_macro_f1([S], [S, S])


# --- Hit@k and Recall@k ---------------------------------------------------------


def test_hit_at_k_is_cut_off_by_k():
    ranked = ["fever", "cough", "AKI"]
    gold = {"acute kidney injury"}
    assert window_hit_at_k(ranked, gold, toy_match, k=2) == 0.0
    assert window_hit_at_k(ranked, gold, toy_match, k=3) == 1.0
    assert window_hit_at_k(ranked, set(), toy_match, k=3) is None


def test_recall_at_k_partial_and_without_one_to_one():
    gold = {"acute kidney injury", "ARDS", "sepsis", "hyperkalemia"}
    assert window_recall_at_k(["AKI", "sepsis"], gold, toy_match) == pytest.approx(
        2 / 4
    )
    assert window_recall_at_k(["AKI", "sepsis"], gold, toy_match, k=1) == pytest.approx(
        1 / 4
    )
    # One prediction may cover two gold items that mean the same thing.
    assert window_recall_at_k(["AKI"], {"aki", "acute kidney injury"}, toy_match) == 1.0


# W1 hits only at rank 3; W2 recalls half; W3 has empty gold (not in W');
# W4 has no predictions at all (fewer than k).
RANKED_WINDOWS = [
    (["fever", "cough", "AKI"], {"aki"}),
    (["sepsis"], {"sepsis", "ARDS"}),
    (["delirium"], set()),
    ([], {"delirium"}),
]


def test_hit_and_recall_over_windows_with_non_empty_gold():
    # W' = {W1, W2, W4}
    # k=2: hit 0, 1, 0 -> 1/3; recall 0, 1/2, 0 -> 1/6
    # k=3: hit 1, 1, 0 -> 2/3; recall 1, 1/2, 0 -> 1/2
    assert hit_at_k(RANKED_WINDOWS, toy_match, k=2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED_WINDOWS, toy_match, k=2) == pytest.approx(1 / 6)
    assert hit_at_k(RANKED_WINDOWS, toy_match, k=3) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED_WINDOWS, toy_match, k=3) == pytest.approx(1 / 2)
    # Default k = 5 covers every prediction here.
    assert hit_at_k(RANKED_WINDOWS, toy_match) == pytest.approx(2 / 3)


def test_hit_at_k_without_any_gold_is_nan():
    assert math.isnan(hit_at_k([(["x"], set())], toy_match))
    assert math.isnan(recall_at_k([], toy_match))


def test_k_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="k must be a positive integer"):
        hit_at_k(RANKED_WINDOWS, toy_match, k=0)


# --- HRR@k ----------------------------------------------------------------------

# stay A: W1 top-2 = [give fluids, intubate], 1 of 2 harmful -> 1/2
#         W2 [intubate] against {intubate, give fluids} -> 1/1
#         W3 no actions -> not in W_A'
# stay B: W4 four actions, no red flags -> 0
# stay C: only a window without actions -> not in P'
HRR_WINDOWS = [
    ("A", ["give fluids", "intubate", "start NE"], {"intubate"}),
    ("A", ["intubate"], {"intubate", "give fluids"}),
    ("A", [], {"intubate"}),
    ("B", ["a", "b", "c", "d"], set()),
    ("C", [], {"intubate"}),
]


def test_hrr_at_k_averages_per_stay_then_across_stays():
    # k=2: stay A = (1/2 + 1) / 2 = 3/4, stay B = 0 -> HRR = 3/8
    # (a plain mean over windows would give (1/2 + 1 + 0) / 3 = 1/2)
    assert hrr_at_k(HRR_WINDOWS, toy_match, k=2) == pytest.approx(3 / 8)
    # k=5: W1 has 3 actions, 1 harmful -> 1/3; stay A = (1/3 + 1)/2 = 2/3 -> 1/3
    assert hrr_at_k(HRR_WINDOWS, toy_match) == pytest.approx(1 / 3)


def test_window_harmful_fraction_edges():
    assert window_harmful_fraction([], {"intubate"}, toy_match) is None
    assert window_harmful_fraction(["x"], set(), toy_match) == 0.0
    assert (
        window_harmful_fraction(["start NE"], {"start norepinephrine"}, toy_match)
        == 1.0
    )
    assert math.isnan(hrr_at_k([("C", [], {"x"})], toy_match))


# --- set-level semantic F1 (Oracle validation) ----------------------------------


def test_set_semantic_f1_averages_per_window_scores():
    # W1: pred {AKI, sepsis} vs {acute kidney injury}: P 1/2, R 1, F1 2/3
    # W2: both empty: 1, 1, 1
    # W3: pred empty, gold {ARDS}: 0, 0, 0
    # means: P = 1/2, R = 2/3, F1 = (2/3 + 1 + 0) / 3 = 5/9
    windows = [
        ({"AKI", "sepsis"}, {"acute kidney injury"}),
        (set(), set()),
        (set(), {"ARDS"}),
    ]
    result = set_semantic_f1(windows, toy_match)
    assert result.precision == pytest.approx(1 / 2)
    assert result.recall == pytest.approx(2 / 3)
    assert result.f1 == pytest.approx(5 / 9)
    assert all(math.isnan(v) for v in set_semantic_f1([], toy_match))


def aki_family_match(a: str, b: str) -> bool:
    """ "aki" matches every AKI item; other items only themselves."""

    def aki(text: str) -> bool:
        return "aki" in text.lower().split() or "acute kidney injury" in canon(text)

    return canon(a) == canon(b) or aki(a) and aki(b)


def test_set_semantic_f1_is_many_to_many_as_the_spec_formula():
    # Prediction {aki} against gold {aki, aki stage 3}: the one predicted item
    # matches, and both gold items are matched by it -> P 1, R 1, F1 1.
    windows = [({"aki"}, {"aki", "aki stage 3"})]
    assert tuple(set_semantic_f1(windows, aki_family_match)) == pytest.approx(
        (1.0, 1.0, 1.0)
    )
    # The one-to-one figure, stricter: one gold item left over -> R 1/2.
    strict = set_semantic_f1(windows, aki_family_match, one_to_one=True)
    assert tuple(strict) == pytest.approx((1.0, 0.5, 2 / 3))


def test_validate_oracle_reports_the_spec_f1_and_the_one_to_one_figure_beside_it():
    gold = [WindowGold("w1", "s1", S, {"aki", "aki stage 3"})]
    oracle = [WindowGold("w1", "s1", S, {"aki"})]
    report = validate_oracle(oracle, gold, aki_family_match)
    assert report.problems.recall == pytest.approx(1.0)
    assert report.problems.f1 == pytest.approx(1.0)
    assert report.problems_one_to_one.recall == pytest.approx(0.5)
    assert report.problems_one_to_one.f1 == pytest.approx(2 / 3)


def test_validate_oracle_scores_the_windows_both_labelled():
    gold = [
        WindowGold("w1", "s1", S, {"AKI"}, {"start NE"}, {"intubate"}),
        WindowGold("w2", "s1", D, {"ARDS"}, set(), set()),
        WindowGold("w3", "s2", I, set(), set(), set()),
    ]
    oracle = [
        WindowGold(
            "w1", "s1", S, {"acute kidney injury"}, {"start norepinephrine"}, set()
        ),
        WindowGold("w2", "s1", S, {"ARDS", "sepsis"}, set(), set()),
        WindowGold("w9", "s9", S),  # not a Gold window: ignored
    ]
    report = validate_oracle(oracle, gold, toy_match)
    assert (report.n_windows, report.n_gold_without_oracle) == (2, 1)
    # status: S/S right, D/S wrong -> accuracy 1/2; stable F1 2/3, deteriorating
    # F1 0, improving (absent) 0 -> macro 2/9
    assert report.status_accuracy == pytest.approx(0.5)
    assert report.status_macro_f1 == pytest.approx(2 / 9)
    # problems: w1 F1 1; w2 P 1/2 R 1 F1 2/3 -> 5/6
    assert report.problems.f1 == pytest.approx(5 / 6)
    # actions: w1 1; w2 both empty 1 -> 1
    assert report.actions.f1 == pytest.approx(1.0)
    # red flags: w1 Oracle empty vs gold {intubate} 0; w2 both empty 1 -> 1/2
    assert report.red_flags.f1 == pytest.approx(0.5)


# --- scoring a prediction set -----------------------------------------------------


def _gold() -> list[WindowGold]:
    return [
        WindowGold(
            "w1",
            "A",
            S,
            {"AKI"},
            {"start NE", "give fluids"},
            {"intubate"},
            attributes={"disease_group": "sepsis", "hours_since_admit": 6.0},
        ),
        WindowGold(
            "w2",
            "A",
            D,
            {"ARDS", "sepsis"},
            {"intubate"},
            set(),
            attributes={"disease_group": "sepsis", "hours_since_admit": 30.0},
        ),
        WindowGold(
            "w3",
            "B",
            I,
            set(),
            {"extubate"},
            {"give fluids"},
            attributes={"disease_group": "respiratory", "hours_since_admit": 12.0},
        ),
        WindowGold(
            "w4",
            "C",
            None,
            {"delirium"},
            set(),
            {"intubate"},
            attributes={"disease_group": "respiratory", "hours_since_admit": 50.0},
        ),
    ]


def _predictions() -> list[WindowPrediction]:
    return [
        WindowPrediction(
            "w1",
            "A",
            S,
            ["fever", "acute kidney injury"],
            ["intubate", "start norepinephrine", "give fluids"],
        ),
        WindowPrediction("w2", "A", S, ["ARDS"], ["intubate"]),
        WindowPrediction.from_mapping(
            {
                "window_id": "w3",
                "stay_id": "B",
                "status": I,
                "acute_problems": ["pneumonia"],
                "recommended_actions": ["give fluids", "extubate"],
            }
        ),
        # w4 (stay C) has no prediction.
    ]


def test_score_predictions_by_hand_with_k_2():
    scores = score_predictions(_predictions(), _gold(), toy_match, k=2)
    assert scores.k == 2
    assert (scores.n_windows, scores.n_missing_predictions) == (4, 1)
    # status over w1-w3 (w4 has no gold status): S=S, D!=S, I=I -> 2/3
    # macro: I F1 1, S tp1 fp1 -> 2/3, D tp0 fn1 -> 0 => (1 + 2/3 + 0)/3 = 5/9
    assert scores.n_status_windows == 3
    assert scores.status_accuracy == pytest.approx(2 / 3)
    assert scores.status_macro_f1 == pytest.approx(5 / 9)
    # problems, W' = {w1, w2, w4}: w1 top-2 has AKI -> hit 1, recall 1;
    # w2 [ARDS] -> hit 1, recall 1/2; w4 missing -> 0, 0
    assert scores.n_problem_windows == 3
    assert scores.problems_hit_at_k == pytest.approx(2 / 3)
    assert scores.problems_recall_at_k == pytest.approx(1 / 2)
    # actions, W' = {w1, w2, w3}: w1 top-2 [intubate, start norepinephrine]
    # -> hit 1, recall 1/2; w2 -> 1, 1; w3 [give fluids, extubate] -> 1, 1
    assert scores.n_action_windows == 3
    assert scores.actions_hit_at_k == pytest.approx(1.0)
    assert scores.actions_recall_at_k == pytest.approx((1 / 2 + 1 + 1) / 3)
    # HRR: stay A: w1 1/2 (intubate), w2 0 (no red flags) -> 1/4;
    # stay B: w3 1/2 (give fluids) -> 1/2; stay C: no predictions -> not in P'
    # HRR = (1/4 + 1/2) / 2 = 3/8
    assert scores.n_hrr_stays == 2
    assert scores.actions_hrr_at_k == pytest.approx(3 / 8)
    assert scores.as_dict()["actions_hrr_at_k"] == pytest.approx(3 / 8)


def test_score_predictions_rejects_unknown_and_duplicate_windows():
    stray = WindowPrediction("w99", "Z", S)
    with pytest.raises(ValueError, match="not in the gold set: \\['w99'\\]"):
        score_predictions([*_predictions(), stray], _gold(), toy_match)
    with pytest.raises(ValueError, match="prediction for window 'w1' appears twice"):
        score_predictions([*_predictions(), _predictions()[0]], _gold(), toy_match)


def test_score_by_group_disease_group_and_hours_bins():
    by_group = score_by_group(_predictions(), _gold(), toy_match, "disease_group", k=2)
    assert set(by_group) == {"sepsis", "respiratory"}
    sepsis = by_group["sepsis"]
    # w1, w2: status 1/2; problems hit 1, 1; HRR: stay A only, (1/2 + 0)/2 = 1/4
    assert sepsis.n_windows == 2
    assert sepsis.status_accuracy == pytest.approx(0.5)
    assert sepsis.problems_hit_at_k == pytest.approx(1.0)
    assert sepsis.actions_hrr_at_k == pytest.approx(1 / 4)
    respiratory = by_group["respiratory"]
    # w3, w4: status only w3 (right) -> 1; problems W' = {w4} missing -> 0
    assert respiratory.status_accuracy == pytest.approx(1.0)
    assert respiratory.problems_hit_at_k == pytest.approx(0.0)
    assert respiratory.actions_hrr_at_k == pytest.approx(1 / 2)

    by_hours = score_by_group(
        _predictions(),
        _gold(),
        toy_match,
        lambda g: hours_bin(g.attributes["hours_since_admit"]),
        k=2,
    )
    assert {k: v.n_windows for k, v in by_hours.items()} == {
        "0-24h": 2,
        "24-48h": 1,
        "48-72h": 1,
    }


def test_hours_bin_labels():
    assert hours_bin(0) == "0-24h"
    assert hours_bin(23.9) == "0-24h"
    assert hours_bin(24) == "24-48h"
    assert hours_bin(200) == "168h+"
    assert hours_bin(-1) == "<0h"
    assert hours_bin(5, edges=(0, 6, 12)) == "0-6h"
