"""Inter-rater reliability for the annotation protocol (REALICU_SPEC section 4).

Status agreement (percent agreement, Cohen's and Fleiss' kappa, Krippendorff's
alpha) and percentile bootstrap confidence intervals over windows, as pure
functions; the semantic set matching behind the set tasks' pairwise F1 is
``evaluation.setmatch``. Cohen's kappa is scikit-learn's and Fleiss' kappa
statsmodels' where they apply, computed here as they compute them (the tests
compare the two) so that no process imports either library for a kappa; what
they do not offer is computed here too: Fleiss' kappa with varying raters per
window, Krippendorff's alpha on the coincidence matrix, and the bootstrap that
drops undefined replicates and computes a block of resamples at once.

Conventions shared by every statistic here:

- ``ratings`` is items (windows) x raters. A rating is missing when it is ``None``
  or a float NaN; a ragged list of lists is padded with missing ratings.
- A chance-corrected coefficient is undefined when the expected disagreement is
  zero (every rating falls in one category): it is then ``nan``, never 1, so a
  degenerate bootstrap replicate cannot masquerade as perfect reliability.
  ``bootstrap_ci`` leaves such replicates out of its percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

# Ordinal order of the Patient Status task (spec section 3).
STATUS_ORDER: tuple[str, ...] = ("improving", "stable", "deteriorating")

Level = Literal["nominal", "ordinal", "interval"]


class ConfidenceInterval(NamedTuple):
    """A point estimate on the full sample and its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float


# ---------------------------------------------------------------------------
# Encoding ratings
# ---------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return False


def _as_matrix(ratings: Any) -> np.ndarray:
    """Items x raters as an array; ragged rows are padded with missing ratings."""
    if isinstance(ratings, np.ndarray):
        if ratings.ndim != 2:
            raise ValueError(
                f"ratings must be items x raters (2-D), got shape {ratings.shape}"
            )
        return ratings
    rows = [list(row) for row in ratings]
    width = max((len(row) for row in rows), default=0)
    matrix = np.empty((len(rows), width), dtype=object)
    matrix[:] = None
    for i, row in enumerate(rows):
        matrix[i, : len(row)] = row
    return matrix


def encode_ratings(
    ratings: Any, categories: Sequence[Hashable] | None = None
) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    """Integer codes (items x raters, -1 = missing) and the category order.

    Without ``categories``: the status labels in ``STATUS_ORDER`` when every value
    is one, otherwise the sorted distinct values. A value outside explicit
    ``categories`` is a ``ValueError``.
    """
    matrix = _as_matrix(ratings)
    if matrix.dtype.kind in "biuf":
        values = matrix.astype(float)
        present = ~np.isnan(values)
        observed = values[present]
        if categories is None:
            cats: tuple[Hashable, ...] = tuple(np.unique(observed).tolist())
        else:
            cats = tuple(categories)
        codes = np.full(values.shape, -1, dtype=np.int64)
        if observed.size:
            lookup = np.asarray(cats, dtype=float)
            sorter = np.argsort(lookup, kind="stable")
            pos = np.searchsorted(lookup, observed, sorter=sorter)
            pos = sorter[np.minimum(pos, max(len(cats) - 1, 0))] if cats else pos
            found = lookup[pos] == observed if cats else np.zeros(observed.size, bool)
            if not found.all():
                bad = float(observed[~found][0])
                raise ValueError(f"rating {bad!r} is not one of the categories {cats}")
            codes[present] = pos
        return codes, cats

    flat = matrix.ravel().tolist()
    if categories is None:
        observed_set = {v for v in flat if not _is_missing(v)}
        if observed_set <= set(STATUS_ORDER):
            cats = STATUS_ORDER
        else:
            try:
                cats = tuple(sorted(observed_set))  # type: ignore[type-var]
            except TypeError:
                cats = tuple(sorted(observed_set, key=repr))
    else:
        cats = tuple(categories)
    index: dict[Any, int] = {c: i for i, c in enumerate(cats)}
    codes_list = [-1 if _is_missing(v) else index.get(v, -2) for v in flat]
    codes_flat = np.asarray(codes_list, dtype=np.int64)
    if (codes_flat == -2).any():
        bad = flat[int(np.argmax(codes_flat == -2))]
        raise ValueError(f"rating {bad!r} is not one of the categories {cats}")
    return codes_flat.reshape(matrix.shape), cats


def _item_counts(codes: np.ndarray, q: int) -> np.ndarray:
    """n_ic: how many raters put item i in category c (items x categories)."""
    counts = np.zeros((codes.shape[0], q), dtype=float)
    rows, cols = np.nonzero(codes >= 0)
    np.add.at(counts, (rows, codes[rows, cols]), 1.0)
    return counts


# ---------------------------------------------------------------------------
# Status statistics
# ---------------------------------------------------------------------------


def percent_agreement(ratings: Any) -> float:
    """Mean over items of the share of agreeing rater pairs.

    For item i with m_i >= 2 ratings, P_i = sum_c n_ic (n_ic - 1) / (m_i (m_i - 1))
    (ordered pairs of distinct raters, as in Fleiss 1971); the result is the mean
    of P_i over items with at least two ratings. With two raters this is the share
    of items both rated alike. ``nan`` when no item has two ratings.
    """
    codes, cats = encode_ratings(ratings)
    return _percent_agreement_counts(_item_counts(codes, len(cats)))


def _percent_agreement_counts(counts: np.ndarray) -> float:
    m = counts.sum(axis=1)
    pairable = m >= 2
    if not pairable.any():
        return math.nan
    c = counts[pairable]
    mp = m[pairable]
    return float(np.mean((c * (c - 1)).sum(axis=1) / (mp * (mp - 1))))


def cohens_kappa(
    r1: Sequence[Any],
    r2: Sequence[Any],
    categories: Sequence[Hashable] | None = None,
) -> float:
    """Cohen's (1960) kappa for two raters on a nominal scale, as scikit-learn's
    ``cohen_kappa_score`` computes it.

    kappa = (p_o - p_e) / (1 - p_e), with p_o the share of items rated alike and
    p_e = sum_c p_1c p_2c from each rater's own marginal distribution. Items that
    either rater left missing are dropped. ``nan`` when p_e = 1 (both raters used
    one and the same category throughout) or no item has both ratings.
    """
    if len(r1) != len(r2):
        raise ValueError(
            f"the two raters rated different numbers of items: {len(r1)} and {len(r2)}"
        )
    matrix = np.empty((len(r1), 2), dtype=object)
    matrix[:, 0] = list(r1)
    matrix[:, 1] = list(r2)
    codes, cats = encode_ratings(matrix, categories)
    return _cohens_kappa_codes(codes, len(cats))


def _cohens_kappa_codes(codes: np.ndarray, q: int) -> float:
    """scikit-learn's ``cohen_kappa_score`` of the items both raters rated; the
    undefined cases (no such item, p_e = 1) are ``nan`` here, never a
    division by zero."""
    both = (codes[:, 0] >= 0) & (codes[:, 1] >= 0)
    a = codes[both, 0]
    b = codes[both, 1]
    n = a.size
    if n == 0:
        return math.nan
    p1 = np.bincount(a, minlength=q) / n
    p2 = np.bincount(b, minlength=q) / n
    if math.isclose(float(p1 @ p2), 1.0):
        return math.nan
    # scikit-learn's cohen_kappa_score, operation for operation (so the figure
    # is bit for bit its own), without its second-long import in every
    # process that builds a release.
    confusion = np.bincount(a * q + b, minlength=q * q).reshape(q, q).astype(np.float64)
    sum0 = np.sum(confusion, axis=0)
    sum1 = np.sum(confusion, axis=1)
    expected = np.outer(sum0, sum1) / np.sum(sum0)
    disagree = np.ones((q, q), dtype=np.float64)
    disagree.flat[:: q + 1] = 0
    return float(1 - np.sum(disagree * confusion) / np.sum(disagree * expected))


def fleiss_kappa(counts: npt.ArrayLike) -> float:
    """Fleiss' (1971) kappa from an items x categories table of rating counts.

    When every rated item has the same number m >= 2 of ratings this is
    statsmodels' ``fleiss_kappa``. Rows may have different totals, which
    statsmodels refuses: that case is computed here, as the generalization for
    incomplete designs in Gwet (2014, Handbook of Inter-Rater Reliability, 4th
    ed.; the irrCAC ``fleiss.kappa.raw``), which is exactly Fleiss (1971) when
    every item has the same number of ratings:

    - P_i = sum_c n_ic (n_ic - 1) / (m_i (m_i - 1)); P_a = mean of P_i over items
      with m_i >= 2 (an item rated once says nothing about agreement);
    - pi_c = mean over items with m_i >= 1 of n_ic / m_i; P_e = sum_c pi_c^2;
    - kappa = (P_a - P_e) / (1 - P_e).

    Items with no rating are ignored. ``nan`` when P_e = 1 or no item is rated
    twice.
    """
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2:
        raise ValueError(f"counts must be items x categories, got shape {table.shape}")
    if (table < 0).any():
        raise ValueError("counts must not be negative")
    m = table.sum(axis=1)
    rated = m >= 1
    pairable = m >= 2
    if not pairable.any():
        return math.nan
    pi = (table[rated] / m[rated, None]).mean(axis=0)
    p_e = float(pi @ pi)
    if math.isclose(p_e, 1.0):
        return math.nan
    if np.all(m[rated] == m[rated][0]) and m[rated][0] >= 2:
        return _fleiss_kappa_complete(table[rated])
    p_a = _percent_agreement_counts(table)
    return (p_a - p_e) / (1.0 - p_e)


def _fleiss_kappa_complete(table: np.ndarray) -> float:
    """statsmodels' ``fleiss_kappa(table, method="fleiss")`` for a table whose
    rows all hold the same number of ratings, operation for operation (so the
    figure is bit for bit its own), without importing statsmodels and scipy."""
    n_rat = table.sum(1).max()
    p_cat = table.sum(0) / table.sum()
    p_mean = (((table * table).sum(1) - n_rat) / (n_rat * (n_rat - 1.0))).mean()
    p_mean_exp = (p_cat * p_cat).sum()
    return float((p_mean - p_mean_exp) / (1 - p_mean_exp))


def _category_values(cats: tuple[Hashable, ...]) -> np.ndarray:
    """Interval values of the categories: numbers as they are, labels by rank."""
    if all(isinstance(c, (int, float, np.number)) for c in cats):
        return np.asarray(cats, dtype=float)
    return np.arange(len(cats), dtype=float)


def _coincidences(counts: np.ndarray) -> np.ndarray:
    """o_ck = sum_u (ordered c-k pairs of distinct raters in u) / (m_u - 1).

    Krippendorff (2011), section "C. Coincidence matrix"; units with fewer than two
    values are not pairable and drop out.
    """
    m = counts.sum(axis=1)
    pairable = m >= 2
    c = counts[pairable]
    weighted = c / (m[pairable] - 1.0)[:, None]
    return weighted.T @ c - np.diag(weighted.sum(axis=0))


def _delta2(level: Level, n_c: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The squared difference function delta^2_ck of Krippendorff (2011)."""
    q = n_c.size
    if level == "nominal":
        return 1.0 - np.eye(q)
    if level == "ordinal":
        # delta^2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2, categories in rank
        # order; the sum runs over the categories between c and k inclusive.
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        lo = np.minimum.outer(np.arange(q), np.arange(q))
        hi = np.maximum.outer(np.arange(q), np.arange(q))
        between = cum[hi + 1] - cum[lo]
        return (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
    raise ValueError(f"level must be nominal, ordinal or interval, not {level!r}")


def _alpha_from_counts(counts: np.ndarray, level: Level, values: np.ndarray) -> float:
    o = _coincidences(counts)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n <= 1:
        return math.nan
    d2 = _delta2(level, n_c, values)
    expected = float(n_c @ d2 @ n_c)
    if math.isclose(expected, 0.0, abs_tol=1e-12):
        return math.nan
    observed = float((o * d2).sum())
    return 1.0 - (n - 1.0) * observed / expected


def krippendorff_alpha(
    ratings: Any,
    level: Level = "nominal",
    categories: Sequence[Hashable] | None = None,
) -> float:
    """Krippendorff's alpha with missing ratings, coincidence-matrix formulation.

    Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability":
    alpha = 1 - D_o / D_e = 1 - (n - 1) sum_ck o_ck delta^2_ck
    / sum_ck n_c n_k delta^2_ck, where o is the coincidence matrix over pairable
    units (at least two ratings), n_c its margins and n the number of pairable
    values. delta^2 is 1[c != k] (nominal), the ordinal metric
    (sum_{g=c..k} n_g - (n_c + n_k)/2)^2, or (c - k)^2 (interval).

    Ordinal and interval need an order: status labels use ``STATUS_ORDER``
    (improving < stable < deteriorating), numbers their value; other labels need
    ``categories`` listed in order (interval then uses their ranks 0, 1, ...).
    ``nan`` when D_e = 0 (a single value overall) or nothing is pairable.
    """
    codes, cats = encode_ratings(ratings, categories)
    if level != "nominal" and categories is None:
        numeric = all(isinstance(c, (int, float, np.number)) for c in cats)
        if not numeric and cats != STATUS_ORDER:
            raise ValueError(
                f"{level} alpha needs the category order: pass categories=[...]"
            )
    return _alpha_from_counts(
        _item_counts(codes, len(cats)), level, _category_values(cats)
    )


# ---------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------


# Resamples a batched statistic takes at once: bounds its arrays (resamples x
# windows x categories) to a few MB for a campaign of a thousand windows.
BOOTSTRAP_BLOCK = 100

# The statistics of a block of resamples at once, as arrays: scikit-learn and
# statsmodels score one table per call, which for a thousand resamples of a
# campaign would take seconds instead of milliseconds.


def _percent_agreement_batch(counts: np.ndarray) -> np.ndarray:
    """``_percent_agreement_counts`` of each resample in ``counts`` (resamples x
    items x categories)."""
    m = counts.sum(axis=2)
    pairable = m >= 2
    k = pairable.sum(axis=1)
    pairs = np.where(pairable, m * (m - 1), 1.0)
    share = np.where(pairable, (counts * (counts - 1)).sum(axis=2) / pairs, 0.0)
    return np.where(k > 0, share.sum(axis=1) / np.maximum(k, 1), np.nan)


def _fleiss_kappa_batch(
    counts: np.ndarray, p_a: np.ndarray | None = None
) -> np.ndarray:
    """``fleiss_kappa`` of each resample in ``counts`` (resamples x items x
    categories); ``p_a``, when given, is their ``_percent_agreement_batch``."""
    m = counts.sum(axis=2)
    rated = m >= 1
    if p_a is None:
        p_a = _percent_agreement_batch(counts)
    share = np.where(rated[..., None], counts / np.where(rated, m, 1.0)[..., None], 0)
    pi = share.sum(axis=1) / np.maximum(rated.sum(axis=1), 1)[:, None]
    p_e = (pi * pi).sum(axis=1)
    undefined = np.isnan(p_a) | np.isclose(p_e, 1.0, rtol=1e-9, atol=0.0)
    safe = np.where(undefined, 0.0, 1.0 - p_e)
    return np.where(undefined, np.nan, (p_a - p_e) / np.where(undefined, 1.0, safe))


def _cohens_kappa_batch(codes: np.ndarray, q: int) -> np.ndarray:
    """``_cohens_kappa_codes`` of each resample in ``codes`` (resamples x items
    x 2 raters)."""
    a, b = codes[..., 0], codes[..., 1]
    both = (a >= 0) & (b >= 0)
    n = both.sum(axis=1)
    size = np.maximum(n, 1)
    p_o = ((a == b) & both).sum(axis=1) / size
    p1 = np.stack([((a == c) & both).sum(axis=1) for c in range(q)], axis=1)
    p2 = np.stack([((b == c) & both).sum(axis=1) for c in range(q)], axis=1)
    p_e = (p1 / size[:, None] * (p2 / size[:, None])).sum(axis=1)
    undefined = (n == 0) | np.isclose(p_e, 1.0, rtol=1e-9, atol=0.0)
    return np.where(
        undefined, np.nan, (p_o - p_e) / np.where(undefined, 1.0, 1.0 - p_e)
    )


def _alpha_batch(counts: np.ndarray, level: Level, values: np.ndarray) -> np.ndarray:
    """``_alpha_from_counts`` of each resample in ``counts`` (resamples x items
    x categories)."""
    m = counts.sum(axis=2)
    pairable = (m >= 2)[..., None]
    c = np.where(pairable, counts, 0.0)
    weighted = np.where(pairable, counts / np.where(pairable, m[..., None] - 1, 1), 0)
    q = counts.shape[2]
    o = np.matmul(weighted.transpose(0, 2, 1), c)
    o[:, np.arange(q), np.arange(q)] -= weighted.sum(axis=1)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    if level == "nominal":
        d2 = np.broadcast_to(1.0 - np.eye(q), o.shape)
    elif level == "ordinal":
        cum = np.concatenate([np.zeros((len(n_c), 1)), np.cumsum(n_c, axis=1)], 1)
        lo = np.minimum.outer(np.arange(q), np.arange(q))
        hi = np.maximum.outer(np.arange(q), np.arange(q))
        between = cum[:, hi + 1] - cum[:, lo]
        d2 = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2.0) ** 2
    elif level == "interval":
        d2 = np.broadcast_to(np.subtract.outer(values, values) ** 2, o.shape)
    else:
        raise ValueError(f"level must be nominal, ordinal or interval, not {level!r}")
    expected = (n_c[:, :, None] * d2 * n_c[:, None, :]).sum(axis=(1, 2))
    observed = (o * d2).sum(axis=(1, 2))
    undefined = (n <= 1) | np.isclose(expected, 0.0, rtol=0.0, atol=1e-12)
    safe = np.where(undefined, 1.0, expected)
    return np.where(undefined, np.nan, 1.0 - (n - 1.0) * observed / safe)


def bootstrap_ci(
    statistic: Callable[[Any], float],
    items: Any,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = None,
    alpha: float = 0.05,
    batch: Callable[[np.ndarray], np.ndarray] | None = None,
) -> ConfidenceInterval:
    """Percentile bootstrap CI, resampling items (windows) with replacement.

    ``statistic`` receives a resample of ``items`` (rows of an array, or a list of
    items) of the original size. Returns (estimate, low, high): the statistic on
    the full sample and the alpha/2 and 1 - alpha/2 percentiles of the ``n_boot``
    replicates (Efron and Tibshirani 1993, ch. 13). Replicates where the
    statistic is undefined (``nan``, e.g. kappa on a resample with one category)
    are left out; if every one is, the bounds are ``nan``. The same ``seed`` gives
    the same interval. Our own rather than ``scipy.stats.bootstrap``, which
    neither leaves undefined replicates out nor takes a statistic of a block of
    resamples at once.

    ``batch``, when given, computes the statistic of many resamples at once: it
    receives rows of resampled indices into ``items`` (an index array), a block
    of ``BOOTSTRAP_BLOCK`` at a time, and returns one value per row, as
    ``statistic`` would for each (the same replicates, to rounding).
    """
    _bootstrap_check(n_boot, alpha)
    estimate = float(statistic(items))
    n = len(items)
    if n == 0:
        return ConfidenceInterval(estimate, math.nan, math.nan)
    indices = _resamples(n, n_boot, seed)
    if batch is not None:
        items = np.asarray(items)
        replicates = np.concatenate(
            [
                np.asarray(batch(items[indices[start : start + BOOTSTRAP_BLOCK]]))
                for start in range(0, n_boot, BOOTSTRAP_BLOCK)
            ]
        ).astype(float)
    elif isinstance(items, np.ndarray):
        replicates = np.fromiter(
            (statistic(items[idx]) for idx in indices), float, count=n_boot
        )
    else:
        seq = list(items)
        replicates = np.fromiter(
            (statistic([seq[i] for i in idx]) for idx in indices), float, count=n_boot
        )
    return _percentile_ci(estimate, replicates, alpha)


def _bootstrap_check(n_boot: int, alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, not {n_boot}")


def _resamples(n: int, n_boot: int, seed) -> np.ndarray:
    """``n_boot`` rows of ``n`` indices drawn with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def _percentile_ci(
    estimate: float, replicates: np.ndarray, alpha: float
) -> ConfidenceInterval:
    """The percentile interval of the defined (not nan) replicates."""
    replicates = replicates[~np.isnan(replicates)]
    if replicates.size == 0:
        return ConfidenceInterval(estimate, math.nan, math.nan)
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return ConfidenceInterval(estimate, float(low), float(high))


@dataclass(frozen=True)
class StatusAgreement:
    """The status IRR figures of spec section 4, each with its bootstrap CI.

    ``kappa`` is Cohen's with exactly two raters per window, else Fleiss'
    (generalized to varying raters per window); ``kappa_name`` says which.
    """

    n_raters: int
    percent_agreement: ConfidenceInterval
    kappa: ConfidenceInterval
    kappa_name: Literal["cohen", "fleiss"]
    alpha_ordinal: ConfidenceInterval


def status_agreement(
    ratings: Any,
    *,
    n_boot: int = 1000,
    seed: int | None = 0,
    alpha: float = 0.05,
    categories: Sequence[Hashable] = STATUS_ORDER,
) -> StatusAgreement:
    """Percent agreement, Cohen's or Fleiss' kappa and ordinal alpha, with CIs.

    Ratings are encoded once and every statistic is bootstrapped over the same
    window resamples, which keeps 930 windows x 1000 replicates well under a
    second.
    """
    codes, cats = encode_ratings(ratings, categories)
    q = len(cats)
    values = _category_values(cats)
    two_raters = codes.shape[1] == 2
    counts = _item_counts(codes, q)

    _bootstrap_check(n_boot, alpha)
    n = codes.shape[0]
    estimates = {
        "pa": _percent_agreement_counts(counts),
        "kappa": _cohens_kappa_codes(codes, q) if two_raters else fleiss_kappa(counts),
        "alpha": _alpha_from_counts(counts, "ordinal", values),
    }
    replicates: dict[str, list[np.ndarray]] = {name: [] for name in estimates}
    if n:
        # The three statistics over the same resamples (the same seed draws
        # the same ones for each), a block at a time: each block's counts are
        # gathered once and its percent agreement serves Fleiss' kappa too.
        # The figures are those of bootstrap_ci with the batched statistics.
        indices = _resamples(n, n_boot, seed)
        for start in range(0, n_boot, BOOTSTRAP_BLOCK):
            idx = indices[start : start + BOOTSTRAP_BLOCK]
            block = counts[idx]
            pa = _percent_agreement_batch(block)
            replicates["pa"].append(pa)
            replicates["kappa"].append(
                _cohens_kappa_batch(codes[idx], q)
                if two_raters
                else _fleiss_kappa_batch(block, p_a=pa)
            )
            replicates["alpha"].append(_alpha_batch(block, "ordinal", values))
    results = {
        name: _percentile_ci(
            float(estimate),
            np.concatenate(replicates[name]).astype(float),
            alpha,
        )
        if n
        else ConfidenceInterval(float(estimate), math.nan, math.nan)
        for name, estimate in estimates.items()
    }
    return StatusAgreement(
        n_raters=int(codes.shape[1]),
        percent_agreement=results["pa"],
        kappa=results["kappa"],
        kappa_name="cohen" if two_raters else "fleiss",
        alpha_ordinal=results["alpha"],
    )
