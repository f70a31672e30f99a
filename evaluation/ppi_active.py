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
(``level_moments``, Hajek-weighted, held non-decreasing across the levels
and barely shrunk towards the pooled moment), and the draw is that
moment's square-root rule mixed with a uniform floor
(``neyman_probabilities``). The probabilities depend on the labels so far
only, not on the windows they draw, so the inverse-probability-weighted
estimate stays unbiased given them.

The labels so far are themselves a Gold sample, and their windows count
(``two_phase_probabilities``): the estimate weights the union of the pilot
and the active draw by that union's inclusion probabilities. The active
draw tops the pilot up (``top_up_probabilities``): it is drawn so that the
union, not the active draw alone, follows the square-root rule. Its lam
has one value per stratum of levels (``lam_strata``), the same for the
coverage benchmark, the draw and the score pages. Pure functions over numpy
arrays."""

from __future__ import annotations

import numpy as np

from evaluation.ppi import DEFAULT_FLOOR, inclusion_probabilities

# Levels of the combined disagreement in [0, 1]: 0 below 1/6, 1 from 1/6 to
# below 1/2, 2 from 1/2 to below 5/6, 3 from 5/6 (the disagreement times 3,
# rounded half up).
N_LEVELS = 4
# Labelled windows' worth of the pooled second moment added to each level's
# own: a level with a handful of labels stays near the pooled moment. With
# each pilot window weighted by the draw its own label did not set
# (``union_probabilities``), a lighter prior (one window's worth) let single
# labels move their level's moment and so their own weights: the union's
# intervals came out 1-4 % wider at the same cost
# (benchmarks/ppi_coverage_bench.py).
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
    worth of the pooled moment, then made non-decreasing across the levels
    by the weighted isotonic fit (pool-adjacent-violators,
    ``_non_decreasing``) over the levels that have labels. A level with no
    labelled window gets the pooled moment, raised to the fitted moment of
    the levels below it or lowered to that of the levels above. The order
    is the levels' meaning: a window on which more of the other readings
    disagree with the Oracle is no less likely to be wrong,
    so a level estimated below the one beneath it is sampling noise, which
    the fit pools with its neighbour instead of shrinking every level
    towards the pooled moment."""
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
    raw = (total + prior_windows * pooled) / (mass + prior_windows)
    has = mass > 0
    fitted = np.empty(n_levels)
    fitted[has] = _non_decreasing(raw[has], mass[has] + prior_windows)
    # A level with no label: the pooled moment, kept between its neighbours.
    for level in np.flatnonzero(~has):
        below, above = fitted[:level][has[:level]], fitted[level:][has[level:]]
        fitted[level] = min(
            max(pooled, below.max(initial=-np.inf)), above.min(initial=np.inf)
        )
    return fitted


def _non_decreasing(values, weights) -> np.ndarray:
    """The weighted least-squares non-decreasing fit of ``values``: adjacent
    blocks that fall are merged into their weighted mean until none does
    (pool-adjacent-violators). scipy's ``isotonic_regression`` does the
    same from 1.12; this keeps the allocation to numpy, for four levels."""
    blocks = []  # [mean, weight, count]
    for value, weight in zip(values.tolist(), weights.tolist()):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, w1, c1), (m2, w2, c2) = blocks[-2], blocks.pop()
            blocks[-1] = [(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2]
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


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
    expectation sum(pi). q depends on the pilot's labels through the
    levels' moments, so for a pilot window the q that counts is the one the
    draw would have made without its own label: ``union_probabilities``
    computes it, where reading q as the pilot gave it biases the estimate
    (tests/evaluation/test_ppi_active.py)."""
    p = np.asarray(pilot, dtype=float)
    q = np.asarray(active, dtype=float)
    if np.any((p < 0) | (p > 1)) or np.any((q < 0) | (q > 1)):
        raise ValueError("inclusion probabilities must lie in [0, 1]")
    return 1 - (1 - p) * (1 - q)


def top_up_probabilities(
    pilot, levels, moments, new_budget: float, *, floor: float = NEYMAN_FLOOR
) -> np.ndarray:
    """The active draw's probabilities q that top a pilot up: the union of
    the pilot (probabilities ``pilot``) and the active draw follows the
    square-root rule of the levels' ``moments`` (``neyman_probabilities``),
    except where the pilot already drew a window more likely than that, and
    the active draw takes ``new_budget`` windows the pilot did not, in
    expectation over both phases: sum (1 - p) q.

    Derivation. The union's probability is 1 - (1 - p)(1 - q)
    (``two_phase_probabilities``). For a target union probability pi_i >=
    p_i, q_i = (pi_i - p_i) / (1 - p_i); where the square-root rule asks for
    less than the pilot gave, pi_i = p_i and q_i = 0. The target is the
    rule's probabilities for a total budget B, and B is found by bisection
    so that sum (1 - p) q is ``new_budget`` (capped: every window drawn). A
    draw independent of the pilot, with its own square-root rule, piles a
    second phase onto the windows the pilot already favoured; topping up
    spends the new windows where the union falls short. The union keeps the
    floor's share of every window, so every window can be drawn; q depends
    on the pilot through its probabilities and the levels' moments, not on
    which windows it took (``union_probabilities`` relies on that). Windows
    with the same level and pilot probability share their q, so the work is
    done once per such group."""
    p = np.asarray(pilot, dtype=float)
    lv = np.asarray(levels, dtype=int)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("inclusion probabilities must lie in [0, 1]")
    if p.shape != lv.shape:
        raise ValueError("pilot and levels must describe the same windows")
    if new_budget <= 0:
        raise ValueError(f"the Gold budget must be positive, not {new_budget!r}")
    groups, inverse, counts = np.unique(
        np.column_stack([lv, p]), axis=0, return_inverse=True, return_counts=True
    )
    g_moment = np.asarray(moments, dtype=float)[groups[:, 0].astype(int)]
    g_p = groups[:, 1]

    def q_for(total: float) -> np.ndarray:
        rule = inclusion_probabilities(g_moment, total, floor=floor, counts=counts)
        target = np.maximum(rule, g_p)
        return np.where(g_p < 1, (target - g_p) / np.where(g_p < 1, 1 - g_p, 1), 0.0)

    def new_windows(q) -> float:
        return float((counts * (1 - g_p) * q).sum())

    low, high = 0.0, float(p.size)
    if new_windows(q_for(high)) > new_budget:
        for _ in range(50):
            middle = (low + high) / 2
            if new_windows(q_for(middle)) < new_budget:
                low = middle
            else:
                high = middle
    return q_for(high)[inverse.ravel()]


def union_probabilities(
    pilot, labelled, levels, residuals, new_budget: float, *, floor=None
):
    """The second phase of a Gold draw and the union's inclusion
    probabilities, exactly: (q, pi, moments, floor).

    The labels so far (``labelled``, drawn with probabilities ``pilot``;
    their ``residuals``, the Oracle's distance from the physicians, read only
    where labelled) give each level's second moment (``level_moments``,
    Hajek-weighted by 1 / p; with fewer than ``MIN_LABELLED`` labels the
    levels' own uncertainty stands in, and the floor defaults to
    ``evaluation.ppi.DEFAULT_FLOOR`` instead of ``NEYMAN_FLOOR``), and q tops
    the pilot up (``top_up_probabilities``).

    A window's probability of being in the union, given the pilot's other
    windows, is p_i + (1 - p_i) q_i^(-i), where q^(-i) is the q the draw
    would have made had window i not been in the pilot: the same rule on the
    labels without window i's. For a window outside the pilot that is q
    itself; for a pilot window it is the q of the labels without its own.
    Weighting a pilot window by 1 - (1 - p)(1 - q), with q read partly from
    its own residual, gives it less weight exactly where its error raised
    its level's moment: a bias of a sixth of a standard error at 100 pilot
    windows (tests/evaluation/test_ppi_active.py), more with a lighter
    prior. Leaving each pilot window's own label out removes it. Pilot
    windows with the same level, residual and p share their q^(-i), so the
    rule runs once per such group."""
    p = np.asarray(pilot, dtype=float)
    took = np.asarray(labelled, dtype=bool)
    lv = np.asarray(levels, dtype=int)
    r = np.where(took, np.asarray(residuals, dtype=float), 0.0)
    if not (p.shape == took.shape == lv.shape == r.shape):
        raise ValueError(
            "pilot, labelled, levels and residuals must describe the same windows"
        )

    def phase_two(mask):
        if mask.sum() < MIN_LABELLED:
            moments = np.arange(N_LEVELS) / (N_LEVELS - 1)
            used = DEFAULT_FLOOR if floor is None else floor
        else:
            moments = level_moments(lv[mask], r[mask], 1 / p[mask])
            used = NEYMAN_FLOOR if floor is None else floor
        return top_up_probabilities(p, lv, moments, new_budget, floor=used), (
            moments,
            used,
        )

    q, (moments, used) = phase_two(took)
    pi = two_phase_probabilities(p, q)
    pilot_ids = np.flatnonzero(took)
    keys = np.column_stack([lv[pilot_ids], r[pilot_ids], p[pilot_ids]])
    _, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    for g, one in enumerate(first):
        without = took.copy()
        without[pilot_ids[one]] = False
        q_without, _ = phase_two(without)
        ids = pilot_ids[group.ravel() == g]
        pi[ids] = 1 - (1 - p[ids]) * (1 - q_without[ids])
    return q, pi, moments, used
