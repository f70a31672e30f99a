"""Hourly vital signs, GCS and RASS (CLINICAL_CONCEPTS.md sections 1, 2 and 9a)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.concepts.grid import HOUR, Stay

# CLIF vital_category -> (track, low, high, high inclusive); section 1 valid ranges
# (low always exclusive). Temperatures arrive in °C (the importers convert °F).
VITALS = {
    "heart_rate": ("hr", 0, 300, False),
    "sbp": ("sbp", 0, 400, False),
    "dbp": ("dbp", 0, 300, False),
    "map": ("map", 0, 300, False),
    "respiratory_rate": ("rr", 0, 70, False),
    "spo2": ("spo2", 0, 100, True),
    "temp_c": ("temp", 10, 50, False),
}


def _valid(
    frame: pd.DataFrame, low: float, high: float, high_inclusive: bool
) -> pd.DataFrame:
    v = frame["value_num"]
    upper = v <= high if high_inclusive else v < high
    return frame[(v > low) & upper]


def vital_tracks(stay: Stay) -> dict[str, np.ndarray]:
    """Hourly mean of each vital sign (CLINICAL_CONCEPTS.md section 1: valid
    ranges; values charted at one time are averaged first), plus ``map_min``,
    the lowest MAP of the hour that SOFA cardiovascular uses (section 9a).
    No carry-forward: an hour without a charting is NaN."""
    out: dict[str, np.ndarray] = {}
    vitals = stay.domain("vitals")
    for category, (track, low, high, inclusive) in VITALS.items():
        rows = _valid(vitals[vitals["cat"] == category], low, high, inclusive)
        per_time = rows.groupby("t")["value_num"].mean()
        t, v = per_time.index.to_numpy(), per_time.to_numpy()
        out[track] = stay.hourly(t, v, "mean")
        if track == "map":
            out["map_min"] = stay.hourly(t, v, "min")
    return out


def gcs_per_time(stay: Stay) -> pd.Series:
    """Total GCS at each charting time (index: ns since intime).

    A charted ``gcs_total`` (CLIF) is used as it is (3-15). Where only components
    are charted (MIMIC-IV), the total follows CLINICAL_CONCEPTS.md section 2
    (mimic-code gcs): a verbal response charted as "No Response-ETT" (or 0) counts
    as verbal 0; rule 1: verbal 0 -> 15; rule 2: verbal missing and previous verbal
    0 -> 15; rule 3: previous verbal 0 -> current components, missing ones
    normal (E4 V5 M6); rule 4: each component current, else previous, else
    normal. "Previous" is the preceding component charting, used only if less
    than 6 h earlier.
    """
    assessments = stay.domain("patient_assessments")
    totals = assessments[assessments["cat"] == "gcs_total"]
    totals = totals[(totals["value_num"] >= 3) & (totals["value_num"] <= 15)]
    total = totals.groupby("t")["value_num"].min()

    parts = assessments[assessments["cat"].isin(["gcs_eye", "gcs_verbal", "gcs_motor"])]
    if parts.empty:
        return total
    parts = parts.assign(cat=parts["cat"].astype(object))
    ett = parts["value_text"].str.contains(
        r"(?:^|[^a-z])ett(?:[^a-z]|$)", case=False, regex=True
    )
    parts.loc[(parts["cat"] == "gcs_verbal") & ett, "value_num"] = 0.0
    wide = parts.pivot_table(
        index="t", columns="cat", values="value_num", aggfunc="min"
    )
    wide = wide.reindex(columns=["gcs_eye", "gcs_verbal", "gcs_motor"])
    wide = wide[wide.notna().any(axis=1)]
    if wide.empty:
        return total
    times = wide.index.to_numpy(dtype=np.int64)
    prev = wide.shift(1)
    recent = np.r_[False, np.diff(times) < 6 * HOUR]
    prev.loc[~recent] = np.nan
    eye, verbal, motor = (wide[c] for c in ("gcs_eye", "gcs_verbal", "gcs_motor"))
    p_eye, p_verbal, p_motor = (prev[c] for c in ("gcs_eye", "gcs_verbal", "gcs_motor"))
    rule3 = motor.fillna(6) + verbal.fillna(5) + eye.fillna(4)
    rule4 = (
        motor.fillna(p_motor).fillna(6)
        + verbal.fillna(p_verbal).fillna(5)
        + eye.fillna(p_eye).fillna(4)
    )
    derived = np.select(
        [verbal.eq(0), verbal.isna() & p_verbal.eq(0), p_verbal.eq(0)],
        [15.0, 15.0, rule3],
        default=rule4,
    )
    derived = pd.Series(derived, index=wide.index)
    # A charted total wins over one derived from components at the same time.
    derived = derived[~derived.index.isin(total.index)]
    return pd.concat([total, derived]).sort_index()


def neuro_tracks(stay: Stay) -> dict[str, np.ndarray]:
    """``gcs``: lowest total GCS of the hour (section 9a; totals as in
    gcs_per_time). ``rass``: last RASS (-5..+4) charted in the hour. No
    carry-forward."""
    gcs = gcs_per_time(stay)
    rass = stay.select("patient_assessments", "rass")
    rass = rass[(rass["value_num"] >= -5) & (rass["value_num"] <= 4)]
    return {
        "gcs": stay.hourly(gcs.index.to_numpy(), gcs.to_numpy(), "min"),
        "rass": stay.hourly(rass["t"].to_numpy(), rass["value_num"].to_numpy(), "last"),
    }
