"""Per-window vectors of the benchmark metrics (REALICU_SPEC section 6), the
inputs of the prediction-powered intervals (``evaluation.ppi``): a score is a
function of the mean of these vectors, against the Oracle's labels and, on the
Gold windows, against the physicians' consensus."""

from __future__ import annotations

import math

import numpy as np

# Status confusion cells: reference status (rows: the three statuses) by
# predicted status (columns: the three statuses, then "no prediction").
N_STATUS = 3
CELLS_SHAPE = (N_STATUS, N_STATUS + 1)

STATUS_CODES = {"improving": 0, "stable": 1, "deteriorating": 2}


def status_code(value: str | None) -> int:
    """A status as a cell index: 0-2, or -1 for none."""
    return STATUS_CODES.get(value, -1) if value is not None else -1


def status_cells(reference, predicted) -> np.ndarray:
    """(N x 12) one-hot confusion cells of each window (``MACRO_F1``): row the
    reference status, column the predicted one or "no prediction"; all zero
    where the reference has no status. Statuses as ``status_code``s."""
    ref = np.asarray(reference, dtype=int)
    pred = np.asarray(predicted, dtype=int)
    out = np.zeros((ref.size, *CELLS_SHAPE))
    has = ref >= 0
    col = np.where(pred >= 0, pred, N_STATUS)
    out[np.flatnonzero(has), ref[has], col[has]] = 1.0
    return out.reshape(ref.size, -1)


def status_hits(reference, predicted) -> np.ndarray:
    """(N x 2) for status accuracy (``RATIO``): [prediction right, counted]."""
    ref = np.asarray(reference, dtype=int)
    pred = np.asarray(predicted, dtype=int)
    counted = ref >= 0
    return np.column_stack([(counted & (ref == pred)).astype(float), counted])


def window_values(values) -> np.ndarray:
    """(N x 2) for a per-window metric averaged over the windows where it is
    defined (``RATIO``; Hit@k, Recall@k): [value or 0, counted] from values
    that are ``None`` (or NaN) where the window does not count."""
    v = np.array([math.nan if x is None else x for x in values], dtype=float)
    counted = np.isfinite(v)
    return np.column_stack([np.where(counted, v, 0.0), counted.astype(float)])


def stay_weighted_values(stay_ids, values) -> np.ndarray:
    """(N x 1) for HRR@k (``MEAN``): each window's value times N / (|P'| |W_p'|),
    so the plain mean is the mean over stays of each stay's mean; ``None``
    values (no recommendation in the window) count 0 and weigh nothing. Which
    windows count depends on the prediction only, so the Oracle's and the
    truth's vectors share the weights."""
    v = np.array([math.nan if x is None else x for x in values], dtype=float)
    stays = np.asarray(stay_ids)
    counted = np.isfinite(v)
    out = np.zeros(v.size)
    kept = np.unique(stays[counted])
    for stay in kept:
        rows = counted & (stays == stay)
        out[rows] = v[rows] * v.size / (len(kept) * rows.sum())
    return out[:, None]
