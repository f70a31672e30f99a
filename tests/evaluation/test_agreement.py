"""Agreement statistics against hand computations and the `krippendorff` package."""

import math

import numpy as np
import pytest

from evaluation.agreement import (
    STATUS_ORDER,
    ConfidenceInterval,
    bootstrap_ci,
    cohens_kappa,
    encode_ratings,
    fleiss_kappa,
    krippendorff_alpha,
    percent_agreement,
    status_agreement,
)
from evaluation.setmatch import match_sets, pairwise_semantic_f1
from tests.evaluation.toy_matcher import toy_match

I, S, D = STATUS_ORDER  # improving, stable, deteriorating

# Four windows, three raters, one missing rating (window 3).
STATUS_TABLE = [
    [I, I, S],
    [S, S, S],
    [D, D, None],
    [I, S, D],
]


# --- percent agreement --------------------------------------------------------


def test_percent_agreement_is_mean_share_of_agreeing_rater_pairs():
    # P_i = sum_c n_ic (n_ic - 1) / (m_i (m_i - 1)):
    # w1: I=2, S=1 -> 2*1 / (3*2) = 1/3;  w2: S=3 -> 6/6 = 1
    # w3: D=2 (m=2) -> 2/2 = 1;           w4: one each -> 0
    # mean = (1/3 + 1 + 1 + 0) / 4 = 7/12
    assert percent_agreement(STATUS_TABLE) == pytest.approx(7 / 12)


def test_percent_agreement_with_two_raters_is_share_of_items_rated_alike():
    assert percent_agreement([[I, I], [S, D], [S, S], [D, None]]) == pytest.approx(
        2 / 3
    )


def test_percent_agreement_without_a_pairable_item_is_nan():
    assert math.isnan(percent_agreement([[I, None], [None, S]]))


# --- Cohen's kappa ------------------------------------------------------------


def test_cohens_kappa_binary_by_hand():
    # yes/yes 4, yes/no 2, no/yes 1, no/no 3 -> p_o = 7/10
    # rater 1 yes 6/10, rater 2 yes 5/10 -> p_e = .6*.5 + .4*.5 = .5
    # kappa = (.7 - .5) / (1 - .5) = .4
    r1 = ["y"] * 4 + ["y"] * 2 + ["n"] * 1 + ["n"] * 3
    r2 = ["y"] * 4 + ["n"] * 2 + ["y"] * 1 + ["n"] * 3
    assert cohens_kappa(r1, r2) == pytest.approx(0.4)


def test_cohens_kappa_status_by_hand():
    # pairs: II IS SS SS SS DD DS SS II SD -> 7 agree, p_o = .7
    # rater 1: I 3, S 5, D 2; rater 2: I 2, S 6, D 2
    # p_e = (3*2 + 5*6 + 2*2) / 100 = .4 -> kappa = (.7 - .4) / .6 = .5
    r1 = [I, I, S, S, S, D, D, S, I, S]
    r2 = [I, S, S, S, S, D, S, S, I, D]
    assert cohens_kappa(r1, r2) == pytest.approx(0.5)
    assert cohens_kappa(r2, r1) == pytest.approx(0.5)


def test_cohens_kappa_drops_items_either_rater_left_missing():
    r1 = [I, I, S, S, S, D, D, S, I, S, None, D]
    r2 = [I, S, S, S, S, D, S, S, I, D, S, None]
    assert cohens_kappa(r1, r2) == pytest.approx(0.5)
    assert cohens_kappa([1, 2, None, 3], [1, 2, 2, 3]) == pytest.approx(1.0)


def test_cohens_kappa_is_nan_when_only_one_category_is_used():
    # p_o = p_e = 1: kappa is 0/0, reported as nan (documented convention).
    assert math.isnan(cohens_kappa([S, S, S], [S, S, S]))


def test_cohens_kappa_rejects_raters_of_different_lengths():
    with pytest.raises(ValueError, match="different numbers of items"):
        cohens_kappa([I, S], [I])


def test_cohens_kappa_rejects_a_value_outside_the_categories():
    with pytest.raises(ValueError, match="'worse' is not one of the categories"):
        cohens_kappa([I, "worse"], [I, S], categories=STATUS_ORDER)


# --- Fleiss' kappa ------------------------------------------------------------


def test_fleiss_kappa_small_table_by_hand():
    # P_i: [3,0] -> 1, [2,1] -> 2/6, [1,2] -> 2/6, [0,3] -> 1; P_a = 2/3
    # p_j = (6/12, 6/12) -> P_e = .5; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert fleiss_kappa([[3, 0], [2, 1], [1, 2], [0, 3]]) == pytest.approx(1 / 3)


def test_fleiss_kappa_reproduces_the_fleiss_1971_style_worked_example():
    # 10 subjects, 14 raters, 5 categories (the worked example on the Fleiss'
    # kappa Wikipedia page): P_bar = 0.378, P_e = 0.213, kappa = 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_kappa_with_varying_raters_per_item_by_hand():
    # counts [2,0], [1,1], [3,0], [0,1] (last item rated once), [0,0] (unrated)
    # P_a over items with m >= 2: (1 + 0 + 1) / 3 = 2/3
    # pi over rated items: ((1 + .5 + 1 + 0)/4, (0 + .5 + 0 + 1)/4) = (.625, .375)
    # P_e = .390625 + .140625 = 17/32
    # kappa = (2/3 - 17/32) / (15/32) = (13/96) / (15/32) = 13/45
    table = [[2, 0], [1, 1], [3, 0], [0, 1], [0, 0]]
    assert fleiss_kappa(table) == pytest.approx(13 / 45)


def test_fleiss_kappa_degenerate_and_bad_tables():
    assert math.isnan(fleiss_kappa([[3, 0], [3, 0]]))
    assert math.isnan(fleiss_kappa([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="negative"):
        fleiss_kappa([[3, -1]])


# --- Krippendorff's alpha -----------------------------------------------------


def test_alpha_nominal_two_categories_by_hand():
    # units (a,a) (a,b) (b,b) (a,-): the last is not pairable.
    # o_aa = 2, o_ab = o_ba = 1, o_bb = 2; n_a = n_b = 3, n = 6
    # alpha = 1 - (n-1) * (o_ab + o_ba) / (n_a n_b + n_b n_a) = 1 - 5*2/18 = 4/9
    ratings = [["a", "a"], ["a", "b"], ["b", "b"], ["a", None]]
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(4 / 9)


def test_alpha_status_table_by_hand_for_each_level():
    # Coincidences o_ck = sum_u pairs / (m_u - 1), order I < S < D:
    #   w1 (I,I,S) m=3: II 2/2, IS 2/2, SI 2/2
    #   w2 (S,S,S) m=3: SS 6/2
    #   w3 (D,D)   m=2: DD 2/1
    #   w4 (I,S,D) m=3: every off-diagonal pair 1/2
    # o = [[1, 1.5, .5], [1.5, 3, .5], [.5, .5, 2]]; n_I = 3, n_S = 5, n_D = 3, n = 11
    # nominal: observed = 5, expected = 2(15 + 9 + 15) = 78 -> 1 - 10*5/78 = 28/78
    # ordinal: delta2_IS = ((3+5) - (3+5)/2)^2 = 16, delta2_SD = 16,
    #   delta2_ID = (11 - 3)^2 = 64; observed = 2(1.5*16 + .5*64 + .5*16) = 128,
    #   expected = 2(15*16 + 9*64 + 15*16) = 2112 -> 1 - 10*128/2112 = 13/33
    # interval (ranks 0,1,2): observed = 2(1.5 + .5*4 + .5) = 8,
    #   expected = 2(15 + 9*4 + 15) = 132 -> 1 - 10*8/132 = 13/33
    assert krippendorff_alpha(STATUS_TABLE, "nominal") == pytest.approx(28 / 78)
    assert krippendorff_alpha(STATUS_TABLE, "ordinal") == pytest.approx(13 / 33)
    assert krippendorff_alpha(STATUS_TABLE, "interval") == pytest.approx(13 / 33)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example
# with missing data: 4 observers x 12 units, values 1-5. Items x raters here.
K2011 = np.array(
    [
        [1, 1, np.nan, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [np.nan, 5, 5, 5],
        [np.nan, np.nan, 1, 1],
        [np.nan, 3, np.nan, np.nan],
    ]
)


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)],
)
def test_alpha_reproduces_krippendorff_2011_example(level, published):
    assert krippendorff_alpha(K2011, level) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_agrees_with_the_krippendorff_package(level):
    krippendorff = pytest.importorskip("krippendorff")
    # The package takes raters x units.
    assert krippendorff_alpha(K2011, level) == pytest.approx(
        krippendorff.alpha(reliability_data=K2011.T, level_of_measurement=level)
    )
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 3, size=60)
    noisy = np.where(
        rng.random((60, 3)) < 0.75, truth[:, None], rng.integers(0, 3, (60, 3))
    )
    data = noisy.astype(float)
    data[rng.random((60, 3)) < 0.15] = np.nan
    labels = np.array(STATUS_ORDER, dtype=object)[np.nan_to_num(data).astype(int)]
    labels[np.isnan(data)] = None
    expected = krippendorff.alpha(
        reliability_data=data.T, level_of_measurement=level, value_domain=[0, 1, 2]
    )
    assert krippendorff_alpha(data, level) == pytest.approx(expected)
    # Status labels are ordered improving < stable < deteriorating.
    assert krippendorff_alpha(labels, level) == pytest.approx(expected)


def test_alpha_ordinal_needs_an_order_for_arbitrary_labels():
    with pytest.raises(ValueError, match="needs the category order"):
        krippendorff_alpha([["low", "high"], ["high", "high"]], "ordinal")
    ordered = krippendorff_alpha(
        [["low", "mid"], ["high", "high"], ["low", "low"]],
        "ordinal",
        categories=["low", "mid", "high"],
    )
    assert ordered == pytest.approx(
        krippendorff_alpha([[0, 1], [2, 2], [0, 0]], "ordinal")
    )


def test_alpha_is_nan_when_every_rating_is_the_same():
    assert math.isnan(krippendorff_alpha([[S, S], [S, S], [S, None]], "ordinal"))


def test_alpha_rejects_an_unknown_level():
    with pytest.raises(ValueError, match="nominal, ordinal or interval"):
        krippendorff_alpha(STATUS_TABLE, "ratio")  # type: ignore[arg-type]


def test_encode_ratings_pads_ragged_rows():
    codes, cats = encode_ratings([[I, S, D], [S]])
    assert cats == STATUS_ORDER
    np.testing.assert_array_equal(codes, [[0, 1, 2], [1, -1, -1]])


# --- bootstrap ----------------------------------------------------------------


def _two_rater_status(n: int = 200, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    first = rng.choice(STATUS_ORDER, size=n, p=[0.3, 0.5, 0.2])
    second = np.where(rng.random(n) < 0.85, first, rng.choice(STATUS_ORDER, size=n))
    return np.stack([first, second], axis=1).astype(object)


def test_bootstrap_ci_is_reproducible_by_seed_and_contains_the_estimate():
    ratings = _two_rater_status()

    def stat(x):
        return cohens_kappa(x[:, 0], x[:, 1])

    first = bootstrap_ci(stat, ratings, n_boot=300, seed=11)
    again = bootstrap_ci(stat, ratings, n_boot=300, seed=11)
    other = bootstrap_ci(stat, ratings, n_boot=300, seed=12)
    assert isinstance(first, ConfidenceInterval)
    assert first == again
    assert first != other
    estimate, low, high = first
    assert estimate == pytest.approx(stat(ratings))
    assert low < estimate < high


def test_bootstrap_ci_resamples_plain_lists_too():
    values = [0.0, 1.0, 0.5, 0.25, 0.75, 1.0, 0.0, 0.5]
    estimate, low, high = bootstrap_ci(np.mean, values, n_boot=500, seed=0)
    assert estimate == pytest.approx(np.mean(values))
    assert 0.0 <= low < estimate < high <= 1.0


def test_bootstrap_ci_leaves_out_undefined_replicates():
    # Nine agreeing 'stable' windows and one disagreement: many resamples hold
    # only 'stable', where kappa is nan; those do not enter the percentiles.
    ratings = np.array([[S, S]] * 9 + [[S, D]], dtype=object)
    estimate, low, high = bootstrap_ci(
        lambda x: cohens_kappa(x[:, 0], x[:, 1]), ratings, n_boot=200, seed=1
    )
    assert estimate == pytest.approx(0.0)
    assert not math.isnan(low) and not math.isnan(high)


def test_bootstrap_ci_all_undefined_gives_nan_bounds():
    ratings = np.array([[S, S]] * 5, dtype=object)
    estimate, low, high = bootstrap_ci(
        lambda x: cohens_kappa(x[:, 0], x[:, 1]), ratings, n_boot=50, seed=1
    )
    assert math.isnan(estimate) and math.isnan(low) and math.isnan(high)


def test_bootstrap_ci_rejects_bad_parameters():
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(np.mean, [1.0, 2.0], alpha=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci(np.mean, [1.0, 2.0], n_boot=0)


def test_status_agreement_two_raters_uses_cohen_and_matches_point_statistics():
    ratings = _two_rater_status()
    report = status_agreement(ratings, n_boot=200, seed=5)
    assert report.kappa_name == "cohen"
    assert report.n_raters == 2
    assert report.kappa.estimate == pytest.approx(
        cohens_kappa(ratings[:, 0], ratings[:, 1])
    )
    assert report.percent_agreement.estimate == pytest.approx(
        percent_agreement(ratings)
    )
    assert report.alpha_ordinal.estimate == pytest.approx(
        krippendorff_alpha(ratings, "ordinal")
    )
    for ci in (report.percent_agreement, report.kappa, report.alpha_ordinal):
        assert ci.low <= ci.estimate <= ci.high
    assert status_agreement(ratings, n_boot=200, seed=5) == report


def test_status_agreement_more_raters_uses_fleiss():
    report = status_agreement(STATUS_TABLE, n_boot=50, seed=0)
    assert report.kappa_name == "fleiss"
    # STATUS_TABLE counted per item: improving, stable, deteriorating.
    counts = [[2, 1, 0], [0, 3, 0], [0, 0, 2], [1, 1, 1]]
    assert report.kappa.estimate == pytest.approx(fleiss_kappa(counts))
    assert report.alpha_ordinal.estimate == pytest.approx(13 / 33)


# --- semantic set matching ----------------------------------------------------


def test_match_sets_finds_the_maximum_matching_where_greedy_order_would_not():
    # x matches p and q, y matches only p. Greedy by order pairs x-p and strands
    # y; the augmenting path moves x to q so both are matched.
    edges = {("x", "p"), ("x", "q"), ("y", "p")}

    def match(a, b):
        return (a, b) in edges

    assert match_sets(["x", "y"], ["p", "q"], match) == [(0, 1), (1, 0)]


def test_match_sets_with_similarity_prefers_most_similar_pairs():
    sim = np.array([[0.6, 0.9], [0.1, 0.2]])
    assert match_sets(["a", "b"], ["c", "d"], similarity=sim, tau=0.5) == [(0, 1)]
    # Greedy would take (0,0) at 0.9 and strand row 1; maximum cardinality wins.
    sim = np.array([[0.9, 0.6], [0.8, 0.1]])
    assert match_sets(["a", "b"], ["c", "d"], similarity=sim, tau=0.5) == [
        (0, 1),
        (1, 0),
    ]
    assert match_sets(["a"], ["c"], similarity=np.array([[True]])) == [(0, 0)]


def test_match_sets_keeps_duplicate_texts_apart():
    pairs = match_sets(["AKI", "AKI"], ["acute kidney injury"], toy_match)
    assert pairs == [(0, 0)]


def test_match_sets_input_errors():
    with pytest.raises(ValueError, match="needs its threshold tau"):
        match_sets(["a"], ["b"], similarity=np.array([[0.7]]))
    with pytest.raises(ValueError, match="expected"):
        match_sets(["a"], ["b", "c"], similarity=np.array([[0.7]]), tau=0.5)
    with pytest.raises(ValueError, match="either a match function"):
        match_sets(["a"], ["b"])


def test_pairwise_semantic_f1_by_hand():
    # a: AKI, sepsis, fever; b: acute kidney injury, sepsis -> 2 matched pairs
    # P = 2/3, R = 2/2, F1 = 2 * (2/3) / (2/3 + 1) = 0.8
    result = pairwise_semantic_f1(
        ["AKI", "Sepsis", "fever"], ["acute kidney injury", "sepsis"], toy_match
    )
    assert result.precision == pytest.approx(2 / 3)
    assert result.recall == pytest.approx(1.0)
    assert result.f1 == pytest.approx(0.8)
    swapped = pairwise_semantic_f1(
        ["acute kidney injury", "sepsis"], ["AKI", "Sepsis", "fever"], toy_match
    )
    assert (swapped.precision, swapped.recall) == pytest.approx((1.0, 2 / 3))
    assert swapped.f1 == pytest.approx(result.f1)


def test_pairwise_semantic_f1_empty_set_conventions():
    assert tuple(pairwise_semantic_f1([], [], toy_match)) == (1.0, 1.0, 1.0)
    assert tuple(pairwise_semantic_f1(["AKI"], [], toy_match)) == (0.0, 0.0, 0.0)
    assert tuple(pairwise_semantic_f1([], ["AKI"], toy_match)) == (0.0, 0.0, 0.0)
    assert tuple(pairwise_semantic_f1(["fever"], ["AKI"], toy_match)) == (0.0, 0.0, 0.0)


def test_pairwise_semantic_f1_is_many_to_many_by_default_as_the_spec_says():
    # One 'AKI' against two gold items that both mean AKI: the spec's any-match
    # lets it cover both (R = 1, F1 = 1); one-to-one matches one of them
    # (R = 1/2, F1 = 2/3).
    a, b = ["AKI"], ["acute kidney injury", "aki"]
    anym = pairwise_semantic_f1(a, b, toy_match)
    one = pairwise_semantic_f1(a, b, toy_match, one_to_one=True)
    assert tuple(one) == pytest.approx((1.0, 0.5, 2 / 3))
    assert tuple(anym) == pytest.approx((1.0, 1.0, 1.0))


def test_batch_matcher_is_used_when_offered():
    class Batch:
        def __init__(self):
            self.pair_calls = 0
            self.matrix_calls = 0

        def __call__(self, a, b):
            self.pair_calls += 1
            return toy_match(a, b)

        def matrix(self, a, b):
            self.matrix_calls += 1
            return [[toy_match(x, y) for y in b] for x in a]

    matcher = Batch()
    result = pairwise_semantic_f1(["AKI", "fever"], ["acute kidney injury"], matcher)
    assert result.f1 == pytest.approx(2 / 3)
    assert (matcher.matrix_calls, matcher.pair_calls) == (1, 0)
