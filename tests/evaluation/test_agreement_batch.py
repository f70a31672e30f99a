"""The batched bootstrap statistics (every resample of a block at once) give
the replicates the per-resample functions give, undefined ones included, and
status_agreement's intervals are those of the per-resample bootstrap."""

import math

import numpy as np
import pytest

from evaluation.agreement import (
    STATUS_ORDER,
    _alpha_batch,
    _alpha_from_counts,
    _category_values,
    _cohens_kappa_batch,
    _cohens_kappa_codes,
    _fleiss_kappa_batch,
    _item_counts,
    _percent_agreement_batch,
    _percent_agreement_counts,
    bootstrap_ci,
    encode_ratings,
    fleiss_kappa,
    status_agreement,
)


def _ratings(rng, n_items: int, n_raters: int, missing: float, categories=3):
    ratings = []
    for _ in range(n_items):
        row = [STATUS_ORDER[rng.integers(0, categories)] for _ in range(n_raters)]
        for r in range(n_raters):
            if rng.random() < missing:
                row[r] = None
        ratings.append(row)
    return ratings


def _same(batched, looped):
    batched = np.asarray(batched, dtype=float)
    looped = np.asarray(looped, dtype=float)
    assert np.array_equal(np.isnan(batched), np.isnan(looped))
    ok = ~np.isnan(looped)
    assert np.allclose(batched[ok], looped[ok], rtol=1e-12, atol=1e-12)


CASES = [
    # items, raters, share missing, categories used
    (40, 2, 0.0, 3),
    (40, 2, 0.2, 3),
    (60, 3, 0.0, 3),
    (60, 3, 0.3, 2),
    (8, 3, 0.5, 3),  # small: some resamples have nothing pairable
    (30, 3, 0.0, 1),  # one category: every chance-corrected figure undefined
]


@pytest.mark.parametrize(("n_items", "n_raters", "missing", "used"), CASES)
def test_batched_statistics_equal_the_per_resample_ones(
    n_items, n_raters, missing, used
):
    rng = np.random.default_rng(n_items * 10 + n_raters)
    codes, cats = encode_ratings(
        _ratings(rng, n_items, n_raters, missing, used), STATUS_ORDER
    )
    q = len(cats)
    counts = _item_counts(codes, q)
    values = _category_values(cats)
    idx = rng.integers(0, n_items, size=(50, n_items))
    _same(
        _percent_agreement_batch(counts[idx]),
        [_percent_agreement_counts(counts[i]) for i in idx],
    )
    _same(_fleiss_kappa_batch(counts[idx]), [fleiss_kappa(counts[i]) for i in idx])
    for level in ("nominal", "ordinal", "interval"):
        _same(
            _alpha_batch(counts[idx], level, values),
            [_alpha_from_counts(counts[i], level, values) for i in idx],
        )
    if n_raters == 2:
        _same(
            _cohens_kappa_batch(codes[idx], q),
            [_cohens_kappa_codes(codes[i], q) for i in idx],
        )


@pytest.mark.parametrize("n_raters", [2, 3])
def test_status_agreement_intervals_are_the_per_resample_bootstrap(n_raters):
    rng = np.random.default_rng(n_raters)
    ratings = _ratings(rng, 80, n_raters, 0.1)
    report = status_agreement(ratings, n_boot=300, seed=3)
    codes, cats = encode_ratings(ratings, STATUS_ORDER)
    counts = _item_counts(codes, len(cats))
    values = _category_values(cats)
    idx = np.arange(len(ratings))

    def kappa(i):
        if n_raters == 2:
            return _cohens_kappa_codes(codes[i], len(cats))
        return fleiss_kappa(counts[i])

    expected = {
        "percent_agreement": bootstrap_ci(
            lambda i: _percent_agreement_counts(counts[i]), idx, n_boot=300, seed=3
        ),
        "kappa": bootstrap_ci(kappa, idx, n_boot=300, seed=3),
        "alpha_ordinal": bootstrap_ci(
            lambda i: _alpha_from_counts(counts[i], "ordinal", values),
            idx,
            n_boot=300,
            seed=3,
        ),
    }
    for name, ci in expected.items():
        got = getattr(report, name)
        assert got.estimate == ci.estimate
        assert math.isclose(got.low, ci.low, rel_tol=1e-12, abs_tol=1e-12), name
        assert math.isclose(got.high, ci.high, rel_tol=1e-12, abs_tol=1e-12), name


def test_the_set_tasks_batched_mean_skips_missing_values_as_the_per_resample_one():
    from annotation.selectors.irr import _nanmean, _nanmean_batch

    rng = np.random.default_rng(4)
    values = rng.random(50)
    values[rng.random(50) < 0.3] = np.nan
    values[:3] = np.nan
    idx = rng.integers(0, 50, size=(200, 50))
    idx[0] = 0  # a resample of missing values only: undefined
    _same(_nanmean_batch(values[idx]), [_nanmean(values[i]) for i in idx])
    looped = bootstrap_ci(_nanmean, values, n_boot=300, seed=2)
    batched = bootstrap_ci(_nanmean, values, n_boot=300, seed=2, batch=_nanmean_batch)
    assert batched.estimate == looped.estimate
    assert math.isclose(batched.low, looped.low, rel_tol=1e-12)
    assert math.isclose(batched.high, looped.high, rel_tol=1e-12)


@pytest.mark.parametrize(("n_raters", "n_items"), [(2, 150), (3, 150), (3, 1388)])
def test_status_agreement_shares_resamples_yet_gives_each_statistics_own_interval(
    n_raters, n_items
):
    # status_agreement draws the resamples once for its three statistics and
    # reuses a block's percent agreement in Fleiss' kappa: its intervals must
    # be, to the last bit, those of bootstrap_ci run per statistic with the
    # batched statistics (as it was computed before).
    rng = np.random.default_rng(n_items + n_raters)
    ratings = _ratings(rng, n_items, n_raters, 0.1)
    report = status_agreement(ratings, n_boot=1000, seed=5)
    codes, cats = encode_ratings(ratings, STATUS_ORDER)
    q = len(cats)
    counts = _item_counts(codes, q)
    values = _category_values(cats)
    idx = np.arange(len(ratings))

    def kappa(i):
        if n_raters == 2:
            return _cohens_kappa_codes(codes[i], q)
        return fleiss_kappa(counts[i])

    def kappa_batch(i):
        if n_raters == 2:
            return _cohens_kappa_batch(codes[i], q)
        return _fleiss_kappa_batch(counts[i])

    expected = {
        "percent_agreement": bootstrap_ci(
            lambda i: _percent_agreement_counts(counts[i]),
            idx,
            n_boot=1000,
            seed=5,
            batch=lambda i: _percent_agreement_batch(counts[i]),
        ),
        "kappa": bootstrap_ci(kappa, idx, n_boot=1000, seed=5, batch=kappa_batch),
        "alpha_ordinal": bootstrap_ci(
            lambda i: _alpha_from_counts(counts[i], "ordinal", values),
            idx,
            n_boot=1000,
            seed=5,
            batch=lambda i: _alpha_batch(counts[i], "ordinal", values),
        ),
    }
    for name, ci in expected.items():
        assert getattr(report, name) == ci, name
