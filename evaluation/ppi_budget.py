"""How many more physician (Gold) windows a prediction-powered interval needs
to reach a target width (issue 33), under a uniform draw and under an active
one, from a figure's interval as scoring stored it. The variance of a PPI++
estimate with ``n`` Gold windows among ``N`` is

    se^2 = lam^2 var(f) / N + var(y - lam f) / n

(Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient prediction-powered
inference", eq. 6); an active draw with probabilities pi_i = n q_i divides
the second term's per-window variance by N q_i (Zrnic and Candès 2024,
"Active statistical inference", the inverse-probability-weighted rectifier).
Pure functions: they know nothing of releases."""

from __future__ import annotations

import math

import numpy as np

from evaluation.ppi import ALPHA, DEFAULT_FLOOR, _z
from evaluation.ppi_active import level_moments


def active_factor(uncertainty, weights, *, floor: float = DEFAULT_FLOOR) -> float:
    """The share of a uniform draw's Gold windows an active draw needs for the
    same variance: E[u / (N q)] / E[u], with N q = floor + (1 - floor)
    sqrt(u) / E[sqrt(u)] the draw of ``evaluation.ppi.inclusion_probabilities``
    (uncapped), means over every window estimated from the Gold windows'
    uncertainties ``u`` with Hajek ``weights`` (1 / pi). It assumes a window's
    squared residual grows in proportion to the Oracle's uncertainty on it,
    the assumption behind the square-root rule of active inference. 1 when the
    uncertainty is flat; below 1 when it is concentrated."""
    u = np.asarray(uncertainty, dtype=float)
    w = np.asarray(weights, dtype=float)
    if u.size == 0 or not (w.sum() > 0):
        return math.nan
    root = (w * np.sqrt(u)).sum() / w.sum()
    spread = (w * u).sum()
    if not (root > 0 and spread > 0):
        return 1.0
    nq = floor + (1 - floor) * np.sqrt(u) / root
    return float((w * u / nq).sum() / spread)


def level_factor(levels, residuals, weights, *, floor: float) -> float:
    """``active_factor`` of the draw ``evaluation.ppi_active`` makes: each
    Gold window's uncertainty level stands for its level's second moment of
    ``residuals`` (the Oracle's distance from the physicians on the Gold
    windows, Hajek ``weights``), so the plan reads the error each level
    showed instead of assuming it grows with the uncertainty."""
    lv = np.asarray(levels, dtype=int)
    if lv.size == 0:
        return math.nan
    moments = level_moments(lv, residuals, weights)
    return active_factor(moments[lv], weights, floor=floor)


def _windows_needed(variance: float, room: float) -> int | None:
    if not (room > 0) or not math.isfinite(variance):
        return None
    # Rounding noise must not ask for one window more than the width needs.
    return max(1, math.ceil(variance / room - 1e-9))


def gold_budget(
    interval: dict,
    *,
    target_width: float,
    active: float | None = None,
    current: float = 1.0,
    alpha: float = ALPHA,
) -> dict:
    """Gold windows for a (1 - alpha) interval of ``target_width`` on one
    figure, from its stored ``interval`` (``ScoreInterval.as_dict``): in all
    and more than now, under a uniform draw and, when ``active`` (the
    ``active_factor`` of the Oracle's uncertainty) is given, an active one.
    ``current`` is the factor of the draw the Gold windows so far came from
    (1: uniform). Assumptions: the variances are those estimated from the
    labels so far; the number N of windows (the Oracle term lam^2 var(f) / N)
    and lam stay fixed (a re-tuned lam can only narrow the interval); var(f)
    is read from the Oracle-only interval. A target narrower than the Oracle
    term alone allows is unreachable (None)."""
    if not (math.isfinite(target_width) and 0 < target_width < 1):
        raise ValueError(
            f"the target width must lie between 0 and 1, not {target_width!r}"
        )
    z = _z(alpha)
    # Stored scores hold a NaN as None (JSON).
    se, lower, upper, o_lower, o_upper = (
        math.nan if interval.get(key) is None else float(interval[key])
        for key in ("se", "lower", "upper", "oracle_only_lower", "oracle_only_upper")
    )
    lam = interval.get("lam")
    lam = float(np.max(lam)) if lam is not None else math.nan
    n_now = int(interval.get("n_gold") or 0)
    oracle_se = (o_upper - o_lower) / (2 * z)
    oracle_term = lam**2 * oracle_se**2
    # The interval's own quantile (Student's t of its effective degrees of
    # freedom, evaluation.ppi), kept for the target.
    q = (upper - lower) / (2 * se) if se > 0 else z
    q = q if math.isfinite(q) else z
    # The Gold term's variance of one window of a uniform draw.
    per_window = n_now * max(se**2 - oracle_term, 0.0) / current
    room = (target_width / (2 * q)) ** 2 - oracle_term
    uniform = _windows_needed(per_window, room)
    active_n = (
        _windows_needed(active * per_window, room)
        if active is not None and math.isfinite(active)
        else None
    )
    return {
        "target_width": target_width,
        "width_now": upper - lower,
        "n_gold": n_now,
        "n_windows": interval.get("n_windows"),
        "effective_gold": interval.get("effective_gold"),
        "narrowest_width": 2 * q * math.sqrt(oracle_term),
        "uniform": uniform,
        "more_uniform": None if uniform is None else max(0, uniform - n_now),
        "active": active_n,
        "more_active": None if active_n is None else max(0, active_n - n_now),
        "active_factor": active,
    }
