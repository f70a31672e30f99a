"""Prediction-powered intervals (evaluation.ppi) against ppi-python, the
method's reference package, and against the benchmark metrics they rectify."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from ppi_py import ppi_mean_ci as reference_ci
from ppi_py import ppi_mean_pointestimate as reference_point

from evaluation.metrics import hit_at_k, hrr_at_k, status_accuracy, status_macro_f1
from evaluation.ppi import (
    MACRO_F1,
    MEAN,
    RATIO,
    Design,
    gold_only_estimate,
    inclusion_probabilities,
    oracle_only_estimate,
    ppi_estimate,
    score_interval,
)
from evaluation.ppi_vectors import (
    status_cells,
    status_code,
    status_hits,
    stay_weighted_values,
    window_values,
)


def fixed_data(seed=7, n_all=4000, n_gold=250):
    """A truth, an Oracle agreeing with it on about 85 % of windows (its
    errors leaning towards 1), and a uniform Gold draw, from a fixed seed."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n_all) < 0.62).astype(float)
    wrong = rng.random(n_all) < 0.15
    f = np.where(wrong, (rng.random(n_all) < 0.8).astype(float), y)
    labelled = np.zeros(n_all, dtype=bool)
    labelled[rng.choice(n_all, n_gold, replace=False)] = True
    return y, f, labelled


def test_equal_weights_give_ppi_pythons_point_estimate_and_nearly_its_width():
    y, f, labelled = fixed_data()
    design = Design.of(f, y, labelled)
    for lam in (1.0, 0.6):
        ours = ppi_estimate(design, MEAN, lam=lam)
        # With equal inclusion probabilities the estimate is PPI's, the Oracle's
        # mean taken over every window (the Gold ones included).
        point = reference_point(y[labelled], f[labelled], f, lam=lam)
        assert ours.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-12)
        lower, upper = reference_ci(y[labelled], f[labelled], f, alpha=0.05, lam=lam)
        # ppi-python's variance, lam^2 var(f)/N + var(y - lam f)/n, is for a
        # Gold set apart from the rest; here the Gold windows' Oracle values
        # are in the mean over every window too, which adds their covariance
        # 2 lam cov(f, y - lam f)/N. Written out (sums, then N - 1):
        n_all, n = f.size, labelled.sum()
        r = y[labelled] - lam * f[labelled]
        fc = f - f.mean()
        variance = (
            lam**2 * (fc**2).sum()
            + (n_all / n) ** 2 * ((r - r.mean()) ** 2).sum()
            + 2 * lam * (n_all / n) * (fc[labelled] * (r - r.mean())).sum()
        ) / ((n_all - 1) * n_all)
        assert ours.se == pytest.approx(math.sqrt(variance), rel=1e-9)
        # ppi-python takes the normal quantile; ours is Student's t of the
        # variance estimate's effective degrees of freedom, a little wider.
        assert _normal_width(ours) == pytest.approx(
            float(np.squeeze(upper - lower)), rel=0.05
        )
        assert 1 < ours.width / _normal_width(ours) < 1.05
    tuned = ppi_estimate(design, MEAN)
    lower, upper = reference_ci(y[labelled], f[labelled], f, alpha=0.05)
    assert _normal_width(tuned) == pytest.approx(
        float(np.squeeze(upper - lower)), rel=0.05
    )
    assert 0 < tuned.lam < 1


def _normal_width(estimate) -> float:
    return 2 * NormalDist().inv_cdf(0.975) * estimate.se


def test_unequal_inclusion_probabilities_follow_the_paper_formula():
    # theta = lam mean_N(f) + sum_i w_i (y_i - lam f_i) / sum_i w_i, w = 1/pi
    # on the Gold windows, written out by hand on five windows.
    f = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    y = np.array([1.0, 1.0, 0.0, 1.0, 0.0])
    labelled = np.array([True, True, False, True, False])
    pi = np.array([0.5, 0.25, 0.5, 1.0, 0.1])
    lam = 0.5
    w = np.array([2.0, 4.0, 1.0])
    expected = lam * f.mean() + (w * (y[labelled] - lam * f[labelled])).sum() / w.sum()
    got = ppi_estimate(Design.of(f, y, labelled, pi), MEAN, lam=lam)
    assert got.estimate == pytest.approx(expected, abs=1e-12)
    assert got.lower < got.estimate < got.upper


def test_a_perfect_oracle_gives_the_true_mean_and_ppi_beats_gold_alone():
    y, _, labelled = fixed_data()
    design = Design.of(y, y, labelled)
    score = score_interval(design, MEAN)
    assert score.ppi.estimate == pytest.approx(y.mean(), abs=1e-12)
    assert score.oracle_only.estimate == pytest.approx(y.mean(), abs=1e-12)
    assert score.ppi.width < 0.5 * score.gold_only.width
    assert score.effective_gold > 4 * labelled.sum()


def test_a_biased_oracle_is_corrected_and_its_own_interval_misses():
    y, f, labelled = fixed_data()
    design = Design.of(f, y, labelled)
    truth = y.mean()
    oracle = oracle_only_estimate(design, MEAN)
    assert not oracle.covers(truth)
    assert ppi_estimate(design, MEAN).covers(truth)
    gold = gold_only_estimate(design, MEAN)
    assert gold.estimate == pytest.approx(y[labelled].mean(), abs=1e-12)
    assert gold.se == pytest.approx(y[labelled].std(ddof=1) / math.sqrt(250), rel=1e-9)


STATUSES = ["improving", "stable", "deteriorating", None]


def test_confusion_cells_give_the_metrics_macro_f1_and_accuracy():
    rng = np.random.default_rng(3)
    ref = list(rng.choice(STATUSES, 300, p=[0.3, 0.4, 0.25, 0.05]))
    pred = list(rng.choice(STATUSES, 300, p=[0.3, 0.4, 0.2, 0.1]))
    codes_ref = [status_code(s) for s in ref]
    codes_pred = [status_code(s) for s in pred]
    cells = status_cells(codes_ref, codes_pred)
    assert MACRO_F1.value(cells.mean(axis=0)) == pytest.approx(
        status_macro_f1(ref, pred), abs=1e-12
    )
    hits = status_hits(codes_ref, codes_pred)
    assert RATIO.value(hits.mean(axis=0)) == pytest.approx(
        status_accuracy(ref, pred), abs=1e-12
    )


def test_macro_f1_gradient_matches_finite_differences():
    t = np.random.default_rng(4).random(12)
    step = 1e-6
    numeric = [
        (MACRO_F1.value(t + step * e) - MACRO_F1.value(t - step * e)) / (2 * step)
        for e in np.eye(12)
    ]
    assert np.allclose(MACRO_F1.grad(t), numeric, atol=1e-7)


def exact(a, b):
    return a == b


def test_window_values_give_hit_at_k_and_stay_weights_give_hrr():
    windows = [
        (["aki", "sepsis"], {"aki"}),
        (["shock"], {"aki", "ards"}),
        (["ards"], set()),
        (["ards", "aki"], {"ards"}),
    ]
    per_window = [
        float(any(a in g for a in ranked)) if g else None for ranked, g in windows
    ]
    values = window_values(per_window)
    assert RATIO.value(values.mean(axis=0)) == pytest.approx(
        hit_at_k(windows, exact, k=5)
    )
    harm = [
        (1, ["wean vasopressors"], {"Do not wean vasopressors"}),
        (1, ["give fluids"], set()),
        (2, [], {"Do not wean vasopressors"}),
        (2, ["wean vasopressors", "give fluids"], {"Do not wean vasopressors"}),
        (3, ["give fluids"], set()),
    ]
    fractions = [1.0, 0.0, None, 0.5, 0.0]
    weighted = stay_weighted_values([s for s, _, _ in harm], fractions)
    assert weighted.mean() == pytest.approx(hrr_at_k(harm, exact, k=5))
    assert weighted.mean() == pytest.approx((0.5 + 0.5 + 0.0) / 3)


def test_inclusion_probabilities_spend_the_budget_and_keep_a_floor():
    u = np.array([0.0] * 90 + [1.0] * 10)
    pi = inclusion_probabilities(u, 10, floor=0.5)
    assert pi.sum() == pytest.approx(10)
    assert pi[:90].min() == pytest.approx(0.5 * 10 / 100)
    assert pi[90:].min() > pi[:90].max()
    capped = inclusion_probabilities(u, 60, floor=0.2)
    assert capped.max() == pytest.approx(1.0)
    assert capped.sum() == pytest.approx(60)
    assert inclusion_probabilities(u, 500).tolist() == [1.0] * 100


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"uncertainty": [0.1, -1.0], "budget": 1}, "not negative"),
        ({"uncertainty": [0.1, math.nan], "budget": 1}, "finite"),
        ({"uncertainty": [0.1, 0.2], "budget": 0}, "positive"),
        ({"uncertainty": [0.1, 0.2], "budget": 1, "floor": 1.5}, "floor"),
    ],
)
def test_bad_draw_settings_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        inclusion_probabilities(**kwargs)


def test_bad_designs_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="same windows"):
        Design.of([1.0, 0.0], [1.0], [True, False])
    with pytest.raises(ValueError, match="inclusion probability"):
        Design.of([1.0, 0.0], [1.0, 0.0], [True, False], pi=[0.0, 0.5])
