"""Prediction-powered confidence intervals for scores measured against Oracle
labels (PPI, Angelopoulos et al. 2023; PPI++ power tuning, Angelopoulos, Duchi
and Zrnic 2023), with inverse-probability weights for Gold windows drawn with
unequal inclusion probabilities (active statistical inference, Zrnic and
Candès 2024). Pure functions over numpy arrays: they know nothing of releases.

A score is a smooth function ``g`` of the mean of a per-window vector: a mean
for Hit@k, Recall@k and HRR@k (a ratio of two means when only some windows
count), the 3x4 cells of the status confusion matrix for macro-F1. Every window
has the vector against the Oracle's labels (``f``); the rectifier set (windows
with a physician consensus too) has it against the truth (``y``). The estimate

    theta = lam * mean_N(f) + Hajek_w(y - lam * f)

uses the Hajek mean of the rectifier over the Gold windows, weighted by
``1 / pi``; with equal inclusion probabilities it is exactly ppi-python's
``ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled=f of every window, lam)``.
Its standard error is that of its linearization (the delta method through
``g``), and ``lam`` is the PPI++ choice that minimizes it, clipped to [0, 1]. The
interval takes Student's t quantile with the effective degrees of freedom of
that variance estimate (``effective_df``): near the normal one when many
windows carry the variance, wider when a few Gold windows do.
The per-window vectors of each benchmark metric are ``evaluation.ppi_vectors``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

from evaluation.ppi_vectors import CELLS_SHAPE, N_STATUS

ALPHA = 0.05
# The share of a Gold budget an active draw spreads uniformly, so every window
# keeps a chance to be drawn (and no weight 1 / pi grows without bound). An
# uncertainty is seldom a calibrated error rate: windows every reading agrees
# on are still wrong a few percent of the time, and with a small floor those
# windows are drawn too rarely (benchmarks/ppi_coverage_bench.py: at 0.3 the
# active draw was no better than a uniform one and its intervals undercovered;
# at 0.4 and 0.55 it needed more Gold windows than at 0.7, which is within 1 %
# of the best allocation over the bench's uncertainty levels). A draw whose
# levels' error is estimated from labels takes evaluation.ppi_active's floor.
DEFAULT_FLOOR = 0.7


# ---------------------------------------------------------------------------
# Functionals: the score as a function of the mean vector, with its gradient
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Functional:
    """A score ``value(theta)`` of a mean vector of dimension ``dim`` and its
    gradient ``grad(theta)``."""

    name: str
    dim: int
    value: Callable[[np.ndarray], float]
    grad: Callable[[np.ndarray], np.ndarray]


MEAN = Functional(
    name="mean",
    dim=1,
    value=lambda t: float(t[0]),
    grad=lambda t: np.ones(1),
)


def _ratio_value(t: np.ndarray) -> float:
    return float(t[0] / t[1]) if t[1] > 0 else math.nan


def _ratio_grad(t: np.ndarray) -> np.ndarray:
    if t[1] <= 0:
        return np.zeros(2)
    return np.array([1.0 / t[1], -t[0] / t[1] ** 2])


# (value on a counted window, 1 if the window counts): Hit@k and Recall@k over
# the windows with a non-empty reference set, status accuracy over the windows
# with a reference status.
RATIO = Functional(name="ratio", dim=2, value=_ratio_value, grad=_ratio_grad)


def _f1_parts(t: np.ndarray):
    cells = t.reshape(CELLS_SHAPE)
    tp = np.diag(cells[:, :N_STATUS])
    rows = cells.sum(axis=1)  # reference c: tp + fn
    cols = cells[:, :N_STATUS].sum(axis=0)  # predicted c: tp + fp
    return cells, tp, rows + cols


def _macro_f1_value(t: np.ndarray) -> float:
    _, tp, denom = _f1_parts(t)
    if not (t.reshape(CELLS_SHAPE).sum() > 0):
        return math.nan
    f1 = np.where(tp > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
    return float(f1.mean())


def _macro_f1_grad(t: np.ndarray) -> np.ndarray:
    _, tp, denom = _f1_parts(t)
    grad = np.zeros(CELLS_SHAPE)
    for c in range(N_STATUS):
        if denom[c] <= 0:
            continue
        # F1_c = 2 tp / (row_c + col_c): every cell of row c and column c is in
        # the denominator, tp twice.
        common = -2 * tp[c] / denom[c] ** 2
        grad[c, :] += common
        grad[:, c] += common
        grad[c, c] += 2 / denom[c]
    return (grad / N_STATUS).ravel()


MACRO_F1 = Functional(
    name="macro_f1",
    dim=N_STATUS * (N_STATUS + 1),
    value=_macro_f1_value,
    grad=_macro_f1_grad,
)


# ---------------------------------------------------------------------------
# Estimates
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A score with its two-sided (1 - alpha) confidence interval."""

    estimate: float
    lower: float
    upper: float
    se: float
    n_gold: int
    n_windows: int
    lam: float | list[float] | None = None

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def covers(self, value: float) -> bool:
        return bool(self.lower <= value <= self.upper)

    def as_dict(self) -> dict:
        return asdict(self)


def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), not {alpha!r}")
    return NormalDist().inv_cdf(1 - alpha / 2)


def _t(alpha: float, df: float) -> float:
    """Student's t quantile 1 - alpha / 2 with ``df`` degrees of freedom (the
    Cornish-Fisher series in 1 / df, Abramowitz and Stegun 26.7.5: within 0.04
    of the exact value at 2 degrees of freedom, 0.004 from 3 on); the normal
    one for an infinite ``df``."""
    z = _z(alpha)
    if not math.isfinite(df):
        return z
    v = max(df, 2.0)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / v ** (i + 1) for i, term in enumerate(terms))


def effective_df(psi: np.ndarray) -> float:
    """The degrees of freedom of the variance estimate ``var(psi)``
    (Satterthwaite's 2 E[S]^2 / var(S) for the sum S of the squared
    deviations, their variance read from their own spread): the number of
    terms for normal ones, about twice the number of windows that carry the
    variance when a few do (rare Oracle errors, heavy weights), and then the
    interval takes the wider t quantile of that many."""
    a = (psi - psi.mean()) ** 2
    spread = (a**2).sum() - a.sum() ** 2 / a.size
    return float(2 * a.sum() ** 2 / spread) if spread > 0 else math.inf


def _estimate(d: Design, value, se, *, alpha, lam=None, df=math.inf) -> Estimate:
    """The estimate ``value`` with standard error ``se`` and its interval,
    with the design's counts of Gold windows and windows."""
    n_gold, n_windows = d.n_gold, d.n_windows
    if not (math.isfinite(value) and math.isfinite(se)):
        return Estimate(math.nan, math.nan, math.nan, math.nan, n_gold, n_windows, lam)
    half = _t(alpha, df) * se
    return Estimate(
        float(value),
        float(value - half),
        float(value + half),
        float(se),
        n_gold,
        n_windows,
        lam,
    )


@dataclass(frozen=True)
class Design:
    """The windows of a score and how its Gold windows were drawn: ``f`` (N x
    d) the per-window vectors against the Oracle, ``y`` (N x d) against the
    truth (read only where ``labelled``), ``pi`` each window's inclusion
    probability in the Gold draw."""

    f: np.ndarray
    y: np.ndarray
    labelled: np.ndarray
    pi: np.ndarray
    strata: np.ndarray

    @classmethod
    def of(cls, f, y, labelled, pi=None, strata=None) -> Design:
        f = np.asarray(f, dtype=float)
        y = np.asarray(y, dtype=float)
        if f.ndim == 1:
            f = f[:, None]
        if y.ndim == 1:
            y = y[:, None]
        labelled = np.asarray(labelled, dtype=bool)
        n_windows = f.shape[0]
        if y.shape != f.shape or labelled.shape != (n_windows,):
            raise ValueError(
                f"f {f.shape}, y {y.shape} and labelled {labelled.shape} must "
                "describe the same windows"
            )
        if pi is None:
            # Equal inclusion probabilities: the Gold windows as a uniform draw.
            pi = np.full(n_windows, max(labelled.sum(), 1) / max(n_windows, 1))
        pi = np.asarray(pi, dtype=float)
        if pi.shape != (n_windows,):
            raise ValueError(f"pi has shape {pi.shape}, expected ({n_windows},)")
        if np.any(labelled & ~((pi > 0) & (pi <= 1))):
            raise ValueError(
                "every Gold window needs an inclusion probability in (0, 1]"
            )
        y = np.where(labelled[:, None], y, 0.0)
        if not np.all(np.isfinite(f)) or not np.all(np.isfinite(y)):
            raise ValueError("per-window values must be finite numbers")
        return cls(f=f, y=y, labelled=labelled, pi=pi, strata=_strata(strata, labelled))

    @property
    def weights(self) -> np.ndarray:
        """1 / pi on the Gold windows, 0 elsewhere."""
        return np.where(self.labelled, 1.0 / np.where(self.labelled, self.pi, 1.0), 0.0)

    @property
    def n_gold(self) -> int:
        return int(self.labelled.sum())

    @property
    def n_windows(self) -> int:
        return int(self.f.shape[0])

    @property
    def n_strata(self) -> int:
        return int(self.strata.max()) + 1 if self.strata.size else 1


# A stratum with fewer Gold windows than this shares its lam with the others:
# a lam fitted on a handful of windows would make the interval too narrow.
MIN_STRATUM_GOLD = 30


def _strata(strata, labelled: np.ndarray) -> np.ndarray:
    """Strata as 0..S-1, with strata of fewer than ``MIN_STRATUM_GOLD`` Gold
    windows merged into one."""
    n = labelled.size
    if strata is None:
        return np.zeros(n, dtype=int)
    keys = np.asarray(strata)
    if keys.shape != (n,):
        raise ValueError(f"strata has shape {keys.shape}, expected ({n},)")
    values, codes = np.unique(keys, return_inverse=True)
    gold = np.bincount(codes[labelled], minlength=values.size)
    big = np.flatnonzero(gold >= MIN_STRATUM_GOLD)
    remap = np.full(values.size, big.size if big.size < values.size else 0)
    remap[big] = np.arange(big.size)
    if big.size == values.size or big.size == 0:
        remap = np.zeros(values.size, dtype=int) if big.size == 0 else remap
    return remap[codes]


def _hajek(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (w[:, None] * values).sum(axis=0) / w.sum()


def _lam_per_window(d: Design, lam) -> np.ndarray:
    """``lam`` (one value, or one per stratum of ``d.strata``) per window."""
    lam = np.atleast_1d(np.asarray(lam, dtype=float))
    if lam.size == 1:
        return np.full(d.n_windows, lam[0])
    return lam[d.strata]


def _ppi_theta(d: Design, lam) -> np.ndarray:
    lw = _lam_per_window(d, lam)[:, None]
    return (lw * d.f).mean(axis=0) + _hajek(d.y - lw * d.f, d.weights)


def _ppi_parts(d: Design, grad: np.ndarray):
    """The linearization of the PPI estimate of ``g`` is ``B + D @ lam`` per
    window (mean zero): ``B`` the Gold windows' truth, ``D`` one column per
    stratum, what its ``lam`` multiplies."""
    w = d.weights
    scale = np.where(d.labelled, w / w.mean(), 0.0)
    fs = d.f @ grad
    ys = d.y @ grad
    b = scale * (ys - (w * ys).sum() / w.sum())
    columns = []
    for s in range(d.n_strata):
        fk = np.where(d.strata == s, fs, 0.0)
        columns.append((fk - fk.mean()) - scale * (fk - (w * fk).sum() / w.sum()))
    return b, np.column_stack(columns)


def power_tuned_lambda(d: Design, grad: np.ndarray) -> np.ndarray:
    """PPI++'s lam for the score's linearization, one per stratum: the values
    that minimize the estimated variance of the estimate (least squares of
    ``-B`` on ``D``, ``_ppi_parts``), clipped to [0, 1]. With one stratum and
    equal weights this is ppi-python's ``_calc_lam_glm`` up to the O(1/N)
    covariance of the Gold windows' two roles (their Oracle values are in the
    mean over every window too)."""
    b, dd = _ppi_parts(d, grad)
    bc = b - b.mean()
    dc = dd - dd.mean(axis=0)
    gram = dc.T @ dc
    lam = np.ones(d.n_strata)
    usable = np.diag(gram) > 0
    if usable.any():
        g = gram[np.ix_(usable, usable)]
        lam[usable] = np.linalg.lstsq(g, -dc[:, usable].T @ bc, rcond=None)[0]
    return np.clip(lam, 0.0, 1.0)


def ppi_estimate(
    design: Design,
    functional: Functional = MEAN,
    *,
    alpha: float = ALPHA,
    lam=None,
) -> Estimate:
    """The prediction-powered estimate of ``functional`` with its interval.
    ``lam=None`` tunes it (PPI++), per stratum when the design has strata;
    ``lam=1`` is plain PPI."""
    d = design
    if d.n_gold == 0:
        return _estimate(d, math.nan, math.nan, alpha=alpha)
    if lam is None:
        lam = power_tuned_lambda(d, functional.grad(_ppi_theta(d, 1.0)))
    lam = np.broadcast_to(np.asarray(lam, dtype=float), (d.n_strata,))
    theta = _ppi_theta(d, lam)
    b, dd = _ppi_parts(d, functional.grad(theta))
    psi = b + dd @ lam
    se = math.sqrt(psi.var(ddof=1) / d.n_windows) if d.n_windows > 1 else math.nan
    return _estimate(
        d,
        functional.value(theta),
        se,
        alpha=alpha,
        lam=float(lam[0]) if lam.size == 1 else [float(x) for x in lam],
        df=effective_df(psi),
    )


def gold_only_estimate(
    design: Design, functional: Functional = MEAN, *, alpha: float = ALPHA
) -> Estimate:
    """The classical estimate from the Gold windows alone (Hajek-weighted by
    1 / pi; with equal weights the sample mean and its CLT interval, with the
    t quantile of ``effective_df`` as the PPI one)."""
    d = design
    lab = d.labelled
    n = d.n_gold
    if n < 2:
        return _estimate(d, math.nan, math.nan, alpha=alpha)
    w = d.weights[lab]
    y = d.y[lab]
    theta = _hajek(y, w)
    grad = functional.grad(theta)
    ys = y @ grad
    y_bar = (w * ys).sum() / w.sum()
    psi = (w / w.mean()) * (ys - y_bar)
    se = math.sqrt(psi.var(ddof=1) / n)
    return _estimate(
        d,
        functional.value(theta),
        se,
        alpha=alpha,
        df=effective_df(psi),
    )


def oracle_only_estimate(
    design: Design, functional: Functional = MEAN, *, alpha: float = ALPHA
) -> Estimate:
    """The score against the Oracle's labels, every window, as if they were the
    truth: its interval says nothing of the Oracle's own errors."""
    d = design
    theta = d.f.mean(axis=0)
    grad = functional.grad(theta)
    fs = d.f @ grad
    se = math.sqrt(fs.var(ddof=1) / d.n_windows) if d.n_windows > 1 else math.nan
    return _estimate(d, functional.value(theta), se, alpha=alpha)


def effective_gold(ppi: Estimate, gold_only: Estimate) -> float:
    """The Gold windows a Gold-only interval would need to be as narrow as the
    PPI one: n_gold * (se_gold / se_ppi)^2."""
    if not (ppi.se > 0 and math.isfinite(gold_only.se)):
        return math.nan
    return ppi.n_gold * (gold_only.se / ppi.se) ** 2


@dataclass(frozen=True)
class ScoreInterval:
    """What a score page shows for one figure: the PPI estimate, the
    Oracle-only and Gold-only figures beside it, and the effective Gold
    windows."""

    ppi: Estimate
    oracle_only: Estimate
    gold_only: Estimate
    effective_gold: float

    def as_dict(self) -> dict:
        return {
            "estimate": self.ppi.estimate,
            "lower": self.ppi.lower,
            "upper": self.ppi.upper,
            "se": self.ppi.se,
            "lam": self.ppi.lam,
            "n_gold": self.ppi.n_gold,
            "n_windows": self.ppi.n_windows,
            "effective_gold": self.effective_gold,
            "oracle_only": self.oracle_only.estimate,
            "oracle_only_lower": self.oracle_only.lower,
            "oracle_only_upper": self.oracle_only.upper,
            "gold_only": self.gold_only.estimate,
            "gold_only_lower": self.gold_only.lower,
            "gold_only_upper": self.gold_only.upper,
        }


def score_interval(
    design: Design, functional: Functional = MEAN, *, alpha: float = ALPHA
) -> ScoreInterval:
    ppi = ppi_estimate(design, functional, alpha=alpha)
    gold = gold_only_estimate(design, functional, alpha=alpha)
    return ScoreInterval(
        ppi=ppi,
        oracle_only=oracle_only_estimate(design, functional, alpha=alpha),
        gold_only=gold,
        effective_gold=effective_gold(ppi, gold),
    )


# ---------------------------------------------------------------------------
# Drawing Gold windows
# ---------------------------------------------------------------------------


def inclusion_probabilities(
    uncertainty, budget: float, *, floor: float = DEFAULT_FLOOR, counts=None
) -> np.ndarray:
    """Each window's probability of a Gold draw with ``budget`` expected
    windows: a ``floor`` share of the budget spread uniformly, the rest in
    proportion to the square root of ``uncertainty`` (>= 0, read as the
    chance that the Oracle is wrong on the window: the variance-minimizing
    rule of active inference is pi proportional to the root of the expected
    squared error, Zrnic and Candès 2024), capped at 1 with the excess handed
    to the others. Their sum is the budget (or every window, if fewer).
    With ``counts``, each entry stands for that many windows of the same
    uncertainty (a probability per group, the sums counted per window)."""
    u = np.asarray(uncertainty, dtype=float)
    c = np.ones(u.size) if counts is None else np.asarray(counts, dtype=float)
    n = c.sum()
    if u.size == 0:
        return u
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ValueError("uncertainty must be finite and not negative")
    if not 0 <= floor <= 1:
        raise ValueError(f"floor must lie in [0, 1], not {floor!r}")
    if budget <= 0:
        raise ValueError(f"the Gold budget must be positive, not {budget!r}")
    if budget >= n:
        return np.ones(u.size)
    root = np.sqrt(u)
    mass = (c * root).sum()
    share = root / mass if mass > 0 else np.full(u.size, 1.0 / n)
    p = budget * (floor / n + (1 - floor) * share)
    # Cap at 1 and give the excess to the uncapped windows, in proportion.
    for _ in range(u.size):
        over = p > 1
        if not over.any():
            break
        excess = (c[over] * (p[over] - 1)).sum()
        p[over] = 1.0
        free = p < 1
        p[free] += excess * p[free] / (c[free] * p[free]).sum()
    return np.minimum(p, 1.0)


def poisson_draw(pi, rng: np.random.Generator) -> np.ndarray:
    """A Poisson (independent Bernoulli) draw: window i with probability pi[i]."""
    pi = np.asarray(pi, dtype=float)
    return rng.random(pi.size) < pi
