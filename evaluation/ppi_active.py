"""The allocation of an active Gold draw (issue 33): which windows physicians
label, from the Oracle's uncertainty graded into levels and the labels so far.

For a prediction-powered estimate the variance of the rectifier's inverse-
probability-weighted mean is smallest when each window's inclusion
probability is proportional to the root of the rectifier's second moment
given what is known of the window before the draw (Zrnic and Candès 2024,
"Active statistical inference", the Neyman-like rule pi_i ∝ sqrt(E[(Y - lam
f)^2 | u_i])). The Oracle's uncertainty ``u`` is not that moment: a window
every reading agrees on is still wrong now and then, and how much more often
an uncertain one is wrong is an empirical matter. So the uncertainty is
graded into a few levels (``uncertainty_levels``), the second moment of each
level is estimated from the windows already labelled by physicians
(``level_moments``, Hajek-weighted, shrunk towards the pooled moment so a
level with few labels does not swing the draw), and the draw is that
moment's square-root rule mixed with a uniform floor
(``neyman_probabilities``). The probabilities depend on the labels so far
only, not on the windows they draw, so the inverse-probability-weighted
estimate stays unbiased given them. Pure functions over numpy arrays."""

from __future__ import annotations

import numpy as np

from evaluation.ppi import inclusion_probabilities

# Levels of the combined disagreement in [0, 1]: 0 below 1/6, 1 from 1/6 to
# below 1/2, 2 from 1/2 to below 5/6, 3 from 5/6 (the disagreement times 3,
# rounded half up).
N_LEVELS = 4
# Labelled windows' worth of the pooled second moment added to each level's
# own: a level with a handful of labels stays near the pooled moment.
PRIOR_WINDOWS = 10.0
# Below this many labelled windows the labels so far say too little: the
# moments are the levels' own uncertainty (the plain square-root rule).
MIN_LABELLED = 20
# The uniform share of an active draw's budget. With the levels' moments
# estimated, a level the uncertainty calls safe keeps its own error rate's
# share; the floor guards against the estimate (benchmarks/ppi_coverage_bench.py).
NEYMAN_FLOOR = 0.2


def uncertainty_levels(disagreement, n_levels: int = N_LEVELS) -> np.ndarray:
    """Each window's level 0..n_levels - 1 from its combined disagreement in
    [0, 1] (the mean, over the other readings of the window, of a status
    mismatch and the set tasks' Jaccard distances)."""
    d = np.asarray(disagreement, dtype=float)
    if not np.all(np.isfinite(d)) or np.any((d < 0) | (d > 1)):
        raise ValueError("a disagreement must lie in [0, 1]")
    return np.floor(d * (n_levels - 1) + 0.5).astype(int)


def level_moments(
    levels,
    residuals,
    weights=None,
    *,
    n_levels: int = N_LEVELS,
    prior_windows: float = PRIOR_WINDOWS,
) -> np.ndarray:
    """Per level, the second moment of the labelled windows' ``residuals``
    (the rectifier, or the Oracle's distance from the physicians): the
    Hajek mean of r^2 with ``weights`` (1 / pi of the draw that took them;
    equal by default, scaled to mean 1), plus ``prior_windows`` windows'
    worth of the pooled moment. A level with no labelled window gets the
    pooled moment."""
    lv = np.asarray(levels, dtype=int)
    r2 = np.asarray(residuals, dtype=float) ** 2
    w = np.ones(lv.size) if weights is None else np.asarray(weights, dtype=float)
    if not (lv.shape == r2.shape == w.shape):
        raise ValueError("levels, residuals and weights must describe the same windows")
    if lv.size == 0 or not (w.sum() > 0):
        raise ValueError("the moments need at least one labelled window")
    if np.any((lv < 0) | (lv >= n_levels)):
        raise ValueError(f"levels must lie in 0..{n_levels - 1}")
    w = w / w.mean()
    pooled = (w * r2).sum() / w.sum()
    mass = np.bincount(lv, weights=w, minlength=n_levels)
    total = np.bincount(lv, weights=w * r2, minlength=n_levels)
    return (total + prior_windows * pooled) / (mass + prior_windows)


def neyman_probabilities(
    levels, moments, budget: float, *, floor: float = NEYMAN_FLOOR
) -> np.ndarray:
    """Each window's inclusion probability for ``budget`` expected Gold
    windows: ``floor`` of the budget uniform, the rest in proportion to the
    root of its level's second moment, capped at 1
    (``evaluation.ppi.inclusion_probabilities`` with the moment as the
    uncertainty)."""
    m = np.asarray(moments, dtype=float)
    return inclusion_probabilities(
        m[np.asarray(levels, dtype=int)], budget, floor=floor
    )
