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
estimate stays unbiased given them.

The labels so far are themselves a Gold sample, and their windows count
(``two_phase_probabilities``): the estimate weights the union of the pilot
and the active draw by that union's inclusion probabilities, and its lam
has one value per stratum of levels (``lam_strata``), the same for the
coverage benchmark, the draw and the score pages. Pure functions over numpy
arrays."""

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
# lam's strata: levels 0, 1 and 2-3 (few Gold windows fall in level 3, and a
# lam fitted on a few dozen windows makes the interval too narrow,
# evaluation.ppi.MIN_STRATUM_GOLD).
TOP_STRATUM = 2


def uncertainty_levels(disagreement, n_levels: int = N_LEVELS) -> np.ndarray:
    """Each window's level 0..n_levels - 1 from its combined disagreement in
    [0, 1] (the mean, over the other readings of the window, of a status
    mismatch and the set tasks' Jaccard distances)."""
    d = np.asarray(disagreement, dtype=float)
    if not np.all(np.isfinite(d)) or np.any((d < 0) | (d > 1)):
        raise ValueError("a disagreement must lie in [0, 1]")
    return np.floor(d * (n_levels - 1) + 0.5).astype(int)


def lam_strata(levels) -> np.ndarray:
    """Each window's stratum of lam from its uncertainty level: the levels
    0, 1, and 2 with 3 (``TOP_STRATUM``)."""
    return np.minimum(np.asarray(levels, dtype=int), TOP_STRATUM)


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


def two_phase_probabilities(pilot, active) -> np.ndarray:
    """Each window's probability of being in the union of a pilot (phase 1,
    probabilities ``pilot``: n_pilot / N each for a uniform pilot) and an
    active draw (phase 2, ``active``), so that the pilot's labels count in the
    estimate beside the active draw's.

    Derivation. Both phases are Poisson draws: phase 1 takes window i with
    probability p_i; given the pilot's labels, which set the active
    probabilities q_i, phase 2 takes it with probability q_i, independently
    of phase 1 and of the other windows. A window is outside the union only
    if both phases miss it, P(i not in U) = (1 - p_i)(1 - q_i), so

        pi_i = 1 - (1 - p_i)(1 - q_i) = p_i + q_i - p_i q_i,

    and given q the union is itself a Poisson draw with these pi_i: weights
    1 / pi_i on its windows (Horvitz-Thompson, or Hajek as evaluation.ppi
    takes them) estimate every window's mean without bias. A window both
    phases take is labelled once: the physician windows spent are |U|, in
    expectation sum(pi). q_i depends on the pilot only through the levels'
    moments, a smooth function of ~100 labels, so weighting by the q the
    pilot gave (rather than p_i + (1 - p_i) E[q_i | i not in the pilot])
    leaves a bias of second order, which benchmarks/ppi_coverage_bench.py
    measures (its "union" rows)."""
    p = np.asarray(pilot, dtype=float)
    q = np.asarray(active, dtype=float)
    if np.any((p < 0) | (p > 1)) or np.any((q < 0) | (q > 1)):
        raise ValueError("inclusion probabilities must lie in [0, 1]")
    return 1 - (1 - p) * (1 - q)
