"""The allocation of an active Gold draw (evaluation.ppi_active, issue 33):
the uncertainty's levels, each level's second moment from the labels so far,
the square-root rule with its uniform floor, and the budget page's plan of
that rule (evaluation.ppi_budget.level_factor), on numbers worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.ppi_active import (
    level_moments,
    neyman_probabilities,
    uncertainty_levels,
)
from evaluation.ppi_budget import level_factor


def test_the_disagreement_is_graded_into_four_levels_rounded_half_up():
    # Times 3: 0, 0.45, 0.6, 1.5, 2.4, 2.55, 3.
    levels = uncertainty_levels([0.0, 0.15, 0.2, 0.5, 0.8, 0.85, 1.0])
    assert levels.tolist() == [0, 0, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        uncertainty_levels([0.2, 1.5])


def test_each_level_has_its_labels_second_moment_shrunk_to_the_pooled_one():
    # Residuals 0, 0 on level 0 and 1, 0.5 on level 1: squared 0, 0, 1, 0.25,
    # pooled (1 + 0.25) / 4 = 0.3125; two windows' worth of it per level:
    # level 0 (0 + 2 * 0.3125) / (2 + 2), level 1 (1.25 + 0.625) / 4, and
    # level 2, with no label, the pooled 0.3125 raised to level 1's 0.46875:
    # a level the other readings disagree on more is no less often wrong.
    m = level_moments([0, 0, 1, 1], [0, 0, 1, 0.5], n_levels=3, prior_windows=2)
    assert m == pytest.approx([0.15625, 0.46875, 0.46875])
    # Labels on the top level only: the empty levels below keep the pooled
    # moment (here equal to it), at most the top one's.
    m = level_moments([2, 2], [0.5, 0.5], n_levels=3, prior_windows=2)
    assert m == pytest.approx([0.25, 0.25, 0.25])
    # Weights 1, 1, 3, 1 (1 / pi of the draw), scaled to mean 1: 2/3, 2/3,
    # 2, 2/3. Pooled (2 * 1 + 2/3 * 0.25) / 4 = 13/24; level 1 has mass 8/3
    # and r^2 sum 13/6: (13/6 + 2 * 13/24) / (8/3 + 2) = 39/56.
    m = level_moments(
        [0, 0, 1, 1], [0, 0, 1, 0.5], [1, 1, 3, 1], n_levels=2, prior_windows=2
    )
    assert m[1] == pytest.approx(39 / 56)
    assert m[0] == pytest.approx((2 * 13 / 24) / (4 / 3 + 2))
    with pytest.raises(ValueError, match="0..1"):
        level_moments([0, 2], [0.1, 0.2], n_levels=2)


def test_a_level_estimated_below_the_one_beneath_is_pooled_with_it():
    # Four levels, two windows each, no prior: raw moments 0.04, 0.25, 0.01,
    # 0.64. Level 2 falls below level 1: both become (0.25 + 0.01) / 2 =
    # 0.13; the fit is the weighted isotonic regression (scikit-learn's is
    # the reference).
    from sklearn.isotonic import IsotonicRegression

    levels = [0, 0, 1, 1, 2, 2, 3, 3]
    residuals = [0.2, 0.2, 0.5, 0.5, 0.1, 0.1, 0.8, 0.8]
    m = level_moments(levels, residuals, prior_windows=0)
    assert m == pytest.approx([0.04, 0.13, 0.13, 0.64])
    # Unequal weights: level 1 has three windows' worth, level 2 one.
    weights = [1, 1, 2, 1, 1, 0.5, 1, 1]
    m = level_moments(levels, residuals, weights, prior_windows=0.5)
    w = np.asarray(weights) / np.mean(weights)
    r2 = np.asarray(residuals) ** 2
    lv = np.asarray(levels)
    pooled = (w * r2).sum() / w.sum()
    mass = np.bincount(lv, weights=w) + 0.5
    raw = (np.bincount(lv, weights=w * r2) + 0.5 * pooled) / mass
    expected = IsotonicRegression().fit_transform(np.arange(4), raw, sample_weight=mass)
    assert m == pytest.approx(expected)
    assert np.all(np.diff(m) >= 0)


def test_the_draw_follows_the_root_of_each_levels_moment_above_the_floor():
    # Moments 0.01 and 0.09: roots 0.1 and 0.3, three windows of level 0 and
    # one of level 1, root sum 0.6. Budget 2, floor 0.5: pi = 2 * (0.5 / 4 +
    # 0.5 * root / 0.6) = 0.25 + root / 0.6.
    pi = neyman_probabilities([0, 0, 0, 1], [0.01, 0.09], 2, floor=0.5)
    assert pi == pytest.approx([0.25 + 1 / 6] * 3 + [0.75])
    assert pi.sum() == pytest.approx(2)
    # A level whose labels showed no error keeps the floor's share, 0.25;
    # the other window's 1.25 is capped at 1 and its excess 0.25 shared.
    pi = neyman_probabilities([0, 0, 0, 1], [0.0, 0.09], 2, floor=0.5)
    assert pi[:3] == pytest.approx([1 / 3] * 3)
    assert pi[3] == pytest.approx(1.0)


def test_the_budget_plan_reads_each_levels_error_on_the_gold_windows():
    # Fifty windows of level 0 the Oracle got right, fifty of level 1 it got
    # wholly wrong: pooled moment 0.5; ten windows' worth of it per level:
    # m0 = 5 / 60, m1 = 55 / 60. With floor f each level's N q is f + (1 - f)
    # sqrt(m) / mean sqrt(m); the plan is mean(m / N q) / mean(m).
    levels = [0] * 50 + [1] * 50
    residuals = [0.0] * 50 + [1.0] * 50
    m0, m1 = 5 / 60, 55 / 60
    root = (math.sqrt(m0) + math.sqrt(m1)) / 2
    for floor in (0.2, 0.7):
        nq0 = floor + (1 - floor) * math.sqrt(m0) / root
        nq1 = floor + (1 - floor) * math.sqrt(m1) / root
        expected = (m0 / nq0 + m1 / nq1) / (m0 + m1)
        factor = level_factor(levels, residuals, np.ones(100), floor=floor)
        assert factor == pytest.approx(expected)
    # The smaller floor spends more where the errors are: fewer windows.
    assert level_factor(levels, residuals, np.ones(100), floor=0.2) < level_factor(
        levels, residuals, np.ones(100), floor=0.7
    )
