"""The percentile the benchmarks print (p50, p95): the nearest-rank value of
the sorted sample, so a figure is always one that was measured."""

from __future__ import annotations


def percentile(values, q: float):
    """The value at rank ``q`` (0..1) of ``values``; ``nan`` for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
