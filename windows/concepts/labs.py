"""Hourly laboratory tracks: the latest value carried forward for a bounded time,
and the per-hour worst values SOFA reads (CLINICAL_CONCEPTS.md sections 7, 8, 9a)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.concepts.grid import HOUR, Stay

# track -> (CLIF lab_category, valid (low, high] , carry-forward hours).
# Validity filters follow sections 7-8 (creatinine 0 < v <= 150, platelets > 0,
# lactate <= 10000); the others only need a positive value. Blood-gas values
# (lactate, pH) are carried 12 h, the daily chemistry, blood count and
# coagulation labs 24 h: beyond that the last value no longer describes the hour.
LABS = {
    "lactate": ("lactate", (0, 10000), 12),
    "ph": ("ph_arterial", (0, 14), 12),
    "creatinine": ("creatinine", (0, 150), 24),
    "platelets": ("platelet_count", (0, np.inf), 24),
    "bilirubin": ("bilirubin_total", (0, np.inf), 24),
    "inr": ("inr", (0, np.inf), 24),
}


def lab_values(stay: Stay, category: str, valid: tuple[float, float]) -> pd.Series:
    """Valid values of one CLIF lab category, averaged per result time (index:
    ns since intime)."""
    rows = stay.select("labs", category)
    low, high = valid
    v = rows["value_num"]
    rows = rows[(v > low) & (v <= high)]
    return rows.groupby("t")["value_num"].mean()


def lab_tracks(stay: Stay) -> dict[str, np.ndarray]:
    """For each lab, the latest value at or before the hour end, if no older than
    its carry-forward window (12 h for lactate and arterial pH, 24 h for
    creatinine, platelets, total bilirubin and INR); NaN otherwise."""
    out = {}
    for track, (category, valid, hours) in LABS.items():
        values = lab_values(stay, category, valid)
        out[track] = stay.latest(
            values.index.to_numpy(), values.to_numpy(), hours * HOUR
        )
    return out


def lab_hourly(stay: Stay, track: str, how: str) -> np.ndarray:
    """One lab aggregated within each hour (no carry-forward), for SOFA."""
    category, valid, _ = LABS[track]
    values = lab_values(stay, category, valid)
    return stay.hourly(values.index.to_numpy(), values.to_numpy(), how)
