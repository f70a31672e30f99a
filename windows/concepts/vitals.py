"""Hourly vital signs, GCS and RASS (CLINICAL_CONCEPTS.md sections 1, 2 and 9a)."""

from __future__ import annotations

import re

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


# A verbal response that cannot be tested in an intubated or tracheostomised
# patient: MIMIC-IV "No Response-ETT" (section 2), and the bedside "T" written
# for it ("T", "1T", "VT"), or words saying the patient is intubated.
_UNTESTABLE_VERBAL = re.compile(
    r"(?:^|[^a-z])(?:ett|t|vt|intubated|trach[a-z]*)(?:[^a-z]|$)", re.IGNORECASE
)
_PARTS = ["gcs_eye", "gcs_verbal", "gcs_motor"]


def gcs_chartings(stay: Stay) -> pd.DataFrame:
    """GCS at each charting time (index: ns since intime), CLINICAL_CONCEPTS.md
    section 2 (mimic-code gcs). Columns ``total``, ``eye``, ``verbal``,
    ``motor`` and ``unable``.

    A verbal response that cannot be tested (intubated: "No Response-ETT", the
    bedside "T", or a verbal charted as 0) is verbal 0 with ``unable`` = 1.
    Totals: rule 1, verbal 0 -> 15 (sedated or intubated patients assumed
    normal, as SAPS II does); rule 2, verbal missing and previous verbal 0 ->
    15, also ``unable``; rule 3, previous verbal 0 -> current components,
    missing ones normal (E4 V5 M6); rule 4, each component current, else
    previous, else normal. "Previous" is the preceding component charting,
    used only if less than 6 h earlier. Component columns: current, else
    previous, not defaulted (section 2). A charted ``gcs_total`` (CLIF, 3-15)
    wins over the sum, except where the verbal is untestable (rules 1 and 2):
    there the total is 15 whether the source charted 15 or the eye and motor
    sum ("2T"), as a total derived from MIMIC-IV's components would be.
    ``unable`` is 0 for a testable verbal and NaN for a total charted without
    components.
    """
    assessments = stay.domain("patient_assessments")
    totals = assessments[assessments["cat"] == "gcs_total"]
    totals = totals[(totals["value_num"] >= 3) & (totals["value_num"] <= 15)]
    charted = totals.groupby("t")["value_num"].min()

    parts = assessments[assessments["cat"].isin(_PARTS)]
    parts = parts.assign(cat=parts["cat"].astype(object))
    untestable = (
        parts["value_text"]
        .astype(object)
        .map(lambda text: bool(_UNTESTABLE_VERBAL.search(text)))
    )
    parts.loc[(parts["cat"] == "gcs_verbal") & untestable, "value_num"] = 0.0
    # The lowest value of each component at each time (pivot_table's, a few
    # times faster): all-missing components and times are dropped next.
    wide = (
        parts.groupby(["t", "cat"])["value_num"].min().unstack("cat")
        if len(parts)
        else pd.DataFrame(index=pd.Index([], dtype=np.int64, name="t"))
    ).reindex(columns=_PARTS)
    wide.columns.name = "cat"
    wide = wide[wide.notna().any(axis=1)]
    columns = ["total", "eye", "verbal", "motor", "unable"]
    if wide.empty:
        out = pd.DataFrame(index=charted.index, columns=columns, dtype=float)
        out["total"] = charted
        return out
    times = wide.index.to_numpy(dtype=np.int64)
    prev = wide.shift(1)
    recent = np.r_[False, np.diff(times) < 6 * HOUR]
    prev.loc[~recent] = np.nan
    eye, verbal, motor = (wide[c] for c in _PARTS)
    p_eye, p_verbal, p_motor = (prev[c] for c in _PARTS)
    rule3 = motor.fillna(6) + verbal.fillna(5) + eye.fillna(4)
    rule4 = (
        motor.fillna(p_motor).fillna(6)
        + verbal.fillna(p_verbal).fillna(5)
        + eye.fillna(p_eye).fillna(4)
    )
    unable = verbal.eq(0) | (verbal.isna() & p_verbal.eq(0))
    total = np.select(
        [unable, p_verbal.eq(0)],
        [15.0, rule3],
        default=rule4,
    )
    derived = pd.DataFrame(
        {
            "total": total,
            "eye": eye.fillna(p_eye),
            "verbal": verbal.fillna(p_verbal),
            "motor": motor.fillna(p_motor),
            "unable": unable.astype(float),
        },
        index=wide.index,
    )
    # A charted total wins over one derived from components at the same time,
    # unless the verbal could not be tested (rules 1 and 2 give 15).
    both = derived.index.intersection(charted.index)
    keep_charted = both[derived.loc[both, "unable"].to_numpy() == 0]
    derived.loc[keep_charted, "total"] = charted[keep_charted]
    only_charted = charted[~charted.index.isin(derived.index)]
    alone = pd.DataFrame(index=only_charted.index, columns=columns, dtype=float)
    alone["total"] = only_charted
    return pd.concat([derived, alone]).sort_index()


def neuro_tracks(stay: Stay) -> dict[str, np.ndarray]:
    """``gcs``: lowest total GCS of the hour (section 9a; totals as in
    gcs_chartings). The charting that gives it (at equal totals, one with a
    testable verbal first) also gives ``gcs_eye``, ``gcs_verbal`` (0 when
    untestable), ``gcs_motor`` and ``gcs_unable``: 1 when that 15 is section
    2's convention for an untestable verbal (intubated, "VT"), not an observed
    15; 0 when the verbal was tested; NaN without components. ``rass``: last
    RASS (-5..+4) charted in the hour. No carry-forward."""
    chartings = gcs_chartings(stay)
    rows = stay.rows_of(chartings.index.to_numpy(dtype=np.int64))
    inside = (rows >= 0) & (rows < stay.n) & chartings["total"].notna().to_numpy()
    # Lowest total first; at equal totals a tested verbal (0) before an
    # untestable one (1), and a total without components (NaN) last.
    chosen = (
        chartings[inside]
        .assign(row=rows[inside], order=chartings["unable"][inside].fillna(2))
        .sort_values(["row", "total", "order"], kind="mergesort")
        .drop_duplicates("row")
    )
    out = {}
    for track, column in [
        ("gcs", "total"),
        ("gcs_eye", "eye"),
        ("gcs_verbal", "verbal"),
        ("gcs_motor", "motor"),
        ("gcs_unable", "unable"),
    ]:
        values = stay.empty()
        values[chosen["row"].to_numpy()] = chosen[column].to_numpy(dtype=float)
        out[track] = values
    rass = stay.select("patient_assessments", "rass")
    rass = rass[(rass["value_num"] >= -5) & (rass["value_num"] <= 4)]
    out["rass"] = stay.hourly(
        rass["t"].to_numpy(), rass["value_num"].to_numpy(), "last"
    )
    return out
