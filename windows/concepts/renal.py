"""Urine output, CRRT and KDIGO acute kidney injury staging
(CLINICAL_CONCEPTS.md sections 3, 4 and 11)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.concepts.grid import HOUR, NO_TIME, Stay

# CLIF output categories of output_group "urine" (mcide clif_output_categories.csv),
# and "urine" for sources that only say that.
URINE_CATEGORIES = {
    "urine",
    "external_urinary_catheter",
    "indwelling_urinary_catheter",
    "nephrostomy",
    "suprapubic_catheter",
    "urethral",
    "urostomy",
    "urinary_other",
}
# GU irrigant volume in (MIMIC 227488), netted out of urine output (section 3).
IRRIGANT_IN = "flush_irrigation_urine"
# Renal replacement procedures recorded as intervals (MIMIC procedureevents,
# section 11b) that are continuous therapies.
CRRT_PROCEDURES = {"crrt", "cvvh", "cvvhd", "cvvhdf", "scuf"}
# Circuit flows and volumes (CLIF crrt_therapy columns; MIMIC-IV 224144,
# 224154, 228005, 228006, 224153, 226457, 224191, which section 11b counts as
# RRT active): a positive value is a circuit running in that hour (blood
# pumped, dialysate or replacement given, ultrafiltrate removed); a blood flow
# of 0 is a stopped circuit.
CRRT_FLOWS = {
    "blood_flow_rate",
    "dialysate_flow_rate",
    "pre_filter_replacement_fluid_rate",
    "post_filter_replacement_fluid_rate",
    "crrt_replacement_rate",
    "ultrafiltration_out",
    "crrt_fluid_removal",
}
# MIMIC-IV System Integrity (224146) text, section 11a: system_active 1 / 0.
SYSTEM_ACTIVE = {"active", "initiated", "reinitiated", "new filter"}
SYSTEM_STOPPED = {"recirculating", "discontinued"}
# Section 11a: the CRRT tables hold point chartings only, no durations. CRRT is
# charted hourly for the fluid balance (in the CLIF demo 98 % of consecutive
# CRRT chartings are at most 1 h apart), so a running charting is carried until
# the next charting or for 6 h, whichever comes first: a missed charting or a
# filter change stays on CRRT, and a longer silence (the demo's pauses last
# 21-44 h) is taken as the circuit being off 6 h after its last charting, not
# at that charting (issue 30: 12:00 -> 22:00 in hid 22987108 ran on both
# sides). 6 h is also the window over which section 4d smooths the KDIGO stage.
CRRT_MAX_GAP = 6 * HOUR
DAY = 24 * HOUR


def urine_per_time(stay: Stay) -> pd.Series:
    """Net urine volume (mL) per charting time: urine output categories summed,
    irrigant in subtracted (section 3). Each volume is output since the previous
    charting."""
    out = stay.select("output", URINE_CATEGORIES)
    irrigant = stay.select("input", IRRIGANT_IN)
    volume = pd.concat(
        [
            out[["t", "value_num"]],
            irrigant[["t"]].assign(value_num=-irrigant["value_num"].abs()),
        ]
    ).dropna()
    return volume.groupby("t")["value_num"].sum()


def urine_rates(stay: Stay) -> pd.DataFrame:
    """Per urine charting, the kdigo_uo table (section 3b): trailing windows
    [t - X, t], X = 6, 12, 24 h, with summed volume ``vol_X`` and covered hours
    ``tm_X`` (each row covers the time since the previous one, the first row
    1 h), rates ``rate_X`` in mL/kg/h valid only if 6 <= tm_6 < 12, tm_12 >= 12,
    tm_24 >= 24; and the KDIGO urine stage (section 4c)."""
    urine = urine_per_time(stay)
    t = urine.index.to_numpy(dtype=np.int64)
    frame = pd.DataFrame({"t": t, "vol": urine.to_numpy(dtype=float)})
    if frame.empty:
        return frame.assign(stage=[], uo_24h_sofa=[])
    frame["tm"] = np.r_[1.0, np.diff(t) / HOUR]
    indexed = frame.set_index(pd.to_datetime(t, unit="ns"))[["vol", "tm"]]
    weight = stay.weight_at(t)
    for x in (6, 12, 24):
        sums = indexed.rolling(f"{x}h", closed="both").sum()
        frame[f"vol_{x}"] = sums["vol"].to_numpy()
        frame[f"tm_{x}"] = sums["tm"].to_numpy()
        frame[f"rate_{x}"] = frame[f"vol_{x}"] / weight / frame[f"tm_{x}"]
    tm6, tm12, tm24 = frame["tm_6"], frame["tm_12"], frame["tm_24"]
    frame["rate_6"] = frame["rate_6"].where((tm6 >= 6) & (tm6 < 12))
    frame["rate_12"] = frame["rate_12"].where(tm12 >= 12)
    frame["rate_24"] = frame["rate_24"].where(tm24 >= 24)
    r6, r12, r24 = frame["rate_6"], frame["rate_12"], frame["rate_24"]
    stage = np.select(
        [
            r6.isna(),
            frame["t"] <= 6 * HOUR,
            (tm24 >= 24) & (r24 < 0.3),
            (tm12 >= 12) & (r12 == 0),
            (tm12 >= 12) & (r12 < 0.5),
            (tm6 >= 6) & (r6 < 0.5),
        ],
        [np.nan, 0, 3, 3, 2, 1],
        default=0,
    )
    frame["stage"] = stage
    # SOFA renal (section 9a): 24-h volume scaled to 24 h when 22-30 h are covered.
    frame["uo_24h_sofa"] = (frame["vol_24"] / tm24 * 24).where(
        (tm24 >= 22) & (tm24 <= 30)
    )
    return frame


def creatinine_stages(stay: Stay) -> pd.DataFrame:
    """KDIGO creatinine stage at each creatinine time (sections 4a-4b).

    Creatinine 0 < v <= 150 mg/dL, mean per time, from intime - 7 days to
    outtime. Baselines: lowest value in [t - 48 h, t) and in [t - 7 d, t). Stage:
    3 if >= 3 x low_7d, or >= 4.0 and (low_48h <= 3.7 or >= 1.5 x low_7d); 2 if
    >= 2 x low_7d; 1 if >= low_48h + 0.3 or >= 1.5 x low_7d; else 0. A missing
    baseline matches nothing.

    The comparisons are made on values rounded to integer hundredths of mg/dL
    (creatinine is reported to 0.01 at most), so that a threshold met exactly
    counts: in floating point 1.1 + 0.3 > 1.4 and 3 x 1.1 > 3.3, which lost
    seven exact 0.3 rises of the CLIF demo.
    """
    rows = stay.select("labs", "creatinine")
    v = rows["value_num"]
    rows = rows[
        (v > 0) & (v <= 150) & (rows["t"] >= -7 * DAY) & (rows["t"] <= stay.outtime_ns)
    ]
    creat = rows.groupby("t")["value_num"].mean()
    t = creat.index.to_numpy(dtype=np.int64)
    series = pd.Series(creat.to_numpy(dtype=float), index=pd.to_datetime(t, unit="ns"))
    low48 = series.rolling("48h", closed="left").min().to_numpy()
    low7 = series.rolling("7D", closed="left").min().to_numpy()
    c = series.to_numpy()
    # Hundredths of mg/dL: whole numbers held exactly in floats (NaN stays NaN).
    c_h, l48_h, l7_h = (np.round(x * 100) for x in (c, low48, low7))
    with np.errstate(invalid="ignore"):
        stage = np.select(
            [
                c_h >= 3 * l7_h,
                (c_h >= 400) & ((l48_h <= 370) | (2 * c_h >= 3 * l7_h)),
                c_h >= 2 * l7_h,
                c_h >= l48_h + 30,
                2 * c_h >= 3 * l7_h,
            ],
            [3, 3, 2, 1, 1],
            default=0,
        )
    return pd.DataFrame(
        {
            "t": t,
            "creat": c,
            "low_48h": low48,
            "low_7d": low7,
            "stage": stage.astype(float),
        }
    )


def crrt_chartings(stay: Stay) -> pd.DataFrame:
    """CRRT point chartings that tell whether the circuit runs (section 11a):
    columns ``t`` and ``running``, one row per time.

    Running: a CRRT mode (CLIF ``crrt:<mode>``; MIMIC-IV ``crrt_mode_name``
    with the mode as text), a positive circuit flow or volume (CRRT_FLOWS), or
    a System Integrity of Active, Initiated, Reinitiated or New Filter
    (section 11, 11b's "RRT active"). Stopped: a System Integrity of
    Recirculating or Discontinued, or a blood flow of 0; a stop charted at the
    same time as a running charting wins. Other readings (pressures, fluid
    names, heparin) say nothing either way."""
    if "crrt_chartings" in stay._cache:  # renal_tracks and crrt_periods read it
        return stay._cache["crrt_chartings"]
    crrt = stay.domain("crrt_therapy")
    crrt = crrt[crrt["end"] == NO_TIME]
    if crrt.empty:
        stay._cache["crrt_chartings"] = pd.DataFrame(
            {"t": np.empty(0, dtype=np.int64), "running": np.empty(0, dtype=bool)}
        )
        return stay._cache["crrt_chartings"]
    cat = crrt["cat"]
    text = crrt["value_text"].str.strip().str.lower()
    value = crrt["value_num"]
    integrity = cat == "crrt_system_integrity"
    running = (
        (cat.str.startswith("crrt:") & (cat.str.len() > 5))
        | ((cat == "crrt_mode_name") & (text != ""))
        | (cat.isin(CRRT_FLOWS) & (value > 0))
        | (integrity & text.isin(SYSTEM_ACTIVE))
    )
    stopped = (integrity & text.isin(SYSTEM_STOPPED)) | (
        (cat == "blood_flow_rate") & (value == 0)
    )
    rows = pd.DataFrame(
        {
            "t": crrt["t"].to_numpy(dtype=np.int64),
            "running": running.to_numpy(dtype=bool),
            "stopped": stopped.to_numpy(dtype=bool),
        }
    )
    rows = rows[rows["running"] | rows["stopped"]]
    per_time = rows.groupby("t").agg(
        running=("running", "max"), stopped=("stopped", "max")
    )
    stay._cache["crrt_chartings"] = pd.DataFrame(
        {
            "t": per_time.index.to_numpy(dtype=np.int64),
            "running": (per_time["running"] & ~per_time["stopped"]).to_numpy(bool),
        }
    )
    return stay._cache["crrt_chartings"]


def crrt_periods(stay: Stay) -> pd.DataFrame:
    """Periods on CRRT, columns ``t`` (start) and ``end`` (ns since intime):
    each running charting lasts until the next charting (running or stopped),
    the last one until ICU discharge, or for CRRT_MAX_GAP if that comes first;
    plus the CRRT intervals (crrt_intervals). A stop ends CRRT at the stop's
    time."""
    chartings = crrt_chartings(stay)
    t = chartings["t"].to_numpy(dtype=np.int64)
    # The last charting runs to ICU discharge as to a next charting.
    gap = np.r_[np.diff(t), stay.outtime_ns - t[-1:]]
    gap[gap <= 0] = np.iinfo(np.int64).max
    end = t + np.minimum(gap, CRRT_MAX_GAP)
    running = chartings["running"].to_numpy(dtype=bool)
    points = pd.DataFrame({"t": t[running], "end": end[running]})
    return pd.concat([points, crrt_intervals(stay)], ignore_index=True)


def crrt_intervals(stay: Stay) -> pd.DataFrame:
    """CRRT recorded as intervals (``end_time`` set): MIMIC-IV dialysis procedures
    CRRT, CVVH(D)(F), SCUF (section 11b), or a CRRT mode with an end."""
    crrt = stay.domain("crrt_therapy")
    if crrt.empty:
        return crrt[["t", "end"]]
    interval = crrt["end"] != NO_TIME
    kind = crrt["cat"].isin(CRRT_PROCEDURES) | crrt["cat"].str.startswith("crrt:")
    rows = crrt[interval & kind]
    return rows[rows["end"] >= rows["t"]][["t", "end"]]


def renal_tracks(stay: Stay) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Hourly urine, CRRT and KDIGO tracks; also returns the urine rate table for
    SOFA.

    - ``urine_ml``: net urine charted in the hour (mL).
    - ``urine_ml_kg_h``: urine charted in (H - 6 h, H] / weight / 6 h; NaN without
      weight, without a charting in that window, or before 6 h of charting exist
      (the first charting is taken to cover the hour before it).
    - ``crrt_active``: 1 if a CRRT period (crrt_periods: from a running charting
      to the next charting at most 6 h later, or a CRRT interval) overlaps the
      hour, else 0.
    - ``aki_stage_creat`` / ``aki_stage_uo``: highest creatinine / urine stage
      (sections 4b, 4c) among chartings in the hour; NaN without one.
    - ``aki_stage``: section 4d, max(creatinine, urine, CRRT stage) at each time
      of any of them (a missing stage counts 0; a running CRRT charting = 3),
      highest in the hour; 3 whenever ``crrt_active``, so the stage does not
      fall back between CRRT chartings. NaN when the hour has no such time and
      no CRRT.
    - ``aki_stage_smoothed``: highest ``aki_stage`` over (H - 6 h, H], the 6 h
      trailing maximum of section 4d seen at the hour end.
    """
    out: dict[str, np.ndarray] = {}
    urine = urine_rates(stay)
    t_u = urine["t"].to_numpy(dtype=np.int64)
    out["urine_ml"] = stay.hourly(t_u, urine["vol"].to_numpy(), "sum")

    ml = pd.Series(np.nan_to_num(out["urine_ml"], nan=0.0))
    charted = pd.Series(~np.isnan(out["urine_ml"]))
    vol6 = ml.rolling(6, min_periods=1).sum().to_numpy()
    any6 = charted.rolling(6, min_periods=1).max().to_numpy().astype(bool)
    rate6 = vol6 / stay.weight_at(stay.ends_ns) / 6
    covered = np.zeros(stay.n, dtype=bool)
    if len(t_u):
        covered = stay.ends_ns - 6 * HOUR >= t_u[0] - HOUR
    out["urine_ml_kg_h"] = np.where(any6 & covered, rate6, np.nan)

    chartings = crrt_chartings(stay)
    modes = chartings.loc[chartings["running"], "t"].to_numpy(dtype=np.int64)
    periods = crrt_periods(stay)
    rows, ones = stay.overlapping(
        periods["t"].to_numpy(), periods["end"].to_numpy(), np.ones(len(periods))
    )
    out["crrt_active"] = np.nan_to_num(stay.reduce_rows(rows, ones, "max"), nan=0.0)

    creat = creatinine_stages(stay)
    out["aki_stage_creat"] = stay.hourly(
        creat["t"].to_numpy(), creat["stage"].to_numpy(), "max"
    )
    out["aki_stage_uo"] = stay.hourly(t_u, urine["stage"].to_numpy(dtype=float), "max")
    times = np.concatenate(
        [creat["t"].to_numpy(dtype=np.int64), t_u, modes.astype(np.int64)]
    )
    stages = np.concatenate(
        [
            creat["stage"].to_numpy(dtype=float),
            np.nan_to_num(urine["stage"].to_numpy(dtype=float), nan=0.0),
            np.full(len(modes), 3.0),
        ]
    )
    event_stage = pd.Series(stages).groupby(times).max()
    aki = stay.hourly(event_stage.index.to_numpy(), event_stage.to_numpy(), "max")
    aki = np.where(out["crrt_active"] > 0, 3.0, aki)
    out["aki_stage"] = aki
    out["aki_stage_smoothed"] = (
        pd.Series(aki).rolling(6, min_periods=1).max().to_numpy()
    )
    return out, urine
