"""Threshold calibration of the semantic matcher (REALICU_SPEC section 5, the
paper's Table 8): human same/different judgments of item pairs against the
matcher's decision cos >= tau, swept over tau. Pure functions on cosines and
booleans; where the pairs come from is the caller's business."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

# The paper's sweep: tau from 0.3 to 0.9.
TAU_MIN = 0.3
TAU_MAX = 0.9
TAU_STEP = 0.05


def sweep_taus(
    low: float = TAU_MIN, high: float = TAU_MAX, step: float = TAU_STEP
) -> list[float]:
    """``low, low + step, ..., high``, rounded so 0.3 + 0.05 * 4 is 0.5."""
    count = int(round((high - low) / step))
    return [round(low + step * k, 4) for k in range(count + 1)]


@dataclass(frozen=True)
class SweepRow:
    """The matcher's decision at one tau against the judgments.

    A pair judged the same is a positive; the matcher predicts positive when
    cos >= tau. accuracy = (tp + tn) / n; precision = tp / (tp + fp) (nan with
    no predicted positive); recall = tp / (tp + fn) (nan with no positive);
    F1 = 2 tp / (2 tp + fp + fn), their harmonic mean where both are defined,
    0 when nothing is matched right (nan with no positive and no prediction).
    """

    tau: float
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float
    precision: float
    recall: float
    f1: float

    def as_dict(self) -> dict:
        return asdict(self)


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def tau_sweep(
    cosines: Sequence[float], same: Sequence[bool], taus: Sequence[float] | None = None
) -> list[SweepRow]:
    """One ``SweepRow`` per tau, for pairs with the given cosines and judgments."""
    if len(cosines) != len(same):
        raise ValueError(
            f"{len(cosines)} cosines but {len(same)} judgments: one of each per pair"
        )
    taus = sweep_taus() if taus is None else list(taus)
    rows = []
    n = len(cosines)
    for tau in taus:
        tp = fp = fn = tn = 0
        for cosine, truth in zip(cosines, same):
            predicted = cosine >= tau
            if predicted and truth:
                tp += 1
            elif predicted:
                fp += 1
            elif truth:
                fn += 1
            else:
                tn += 1
        rows.append(
            SweepRow(
                tau=float(tau),
                tp=tp,
                fp=fp,
                fn=fn,
                tn=tn,
                accuracy=_ratio(tp + tn, n),
                precision=_ratio(tp, tp + fp),
                recall=_ratio(tp, tp + fn),
                f1=_ratio(2 * tp, 2 * tp + fp + fn),
            )
        )
    return rows


def best_row(rows: Sequence[SweepRow]) -> SweepRow | None:
    """The row of highest F1; ties go to the higher accuracy, then the lower tau
    (the more lenient of equally good thresholds). None if no F1 is defined."""
    defined = [r for r in rows if not math.isnan(r.f1)]
    if not defined:
        return None
    return max(
        defined,
        key=lambda r: (r.f1, -1 if math.isnan(r.accuracy) else r.accuracy, -r.tau),
    )


def majority(judgments: Sequence[bool]) -> bool | None:
    """The pair's judgment: what most judges said; None on a tie or none."""
    yes = sum(1 for j in judgments if j)
    no = len(judgments) - yes
    if yes == no:
        return None
    return yes > no
