"""Vasoactive infusion rates active at each hour end and the norepinephrine-
equivalent dose (CLINICAL_CONCEPTS.md sections 0 and 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.concepts.columns import VASOACTIVE_DRUGS
from windows.concepts.grid import NO_TIME, Stay

DRUGS = VASOACTIVE_DRUGS
# MAR actions that end an infusion, and those that say nothing about its rate.
STOP_ACTIONS = {"stop", "stopped", "paused", "finishedrunning", "finished running"}
IGNORED_ACTIONS = {"not_given", "bolus", "other"}

_MASS_MCG = {"ng": 1e-3, "mcg": 1.0, "ug": 1.0, "mg": 1e3, "g": 1e6}
_UNITS = {
    "units": 1.0,
    "unit": 1.0,
    "u": 1.0,
    "milliunits": 1e-3,
    "munits": 1e-3,
    "mu": 1e-3,
}
_PER_MIN = {"min": 1.0, "minute": 1.0, "hr": 1 / 60, "hour": 1 / 60, "h": 1 / 60}


def _parse_unit(unit: str) -> tuple[str, bool, str] | None:
    """'mcg/kg/min' -> ('mcg', True, 'min'); None if not amount[/kg]/time."""
    u = unit.strip().lower().replace("µ", "u").replace("μ", "u").replace(" ", "")
    parts = u.split("/")
    if len(parts) == 2:
        return parts[0], False, parts[1]
    if len(parts) == 3 and parts[1] == "kg":
        return parts[0], True, parts[2]
    return None


def rate_factors(drug: str, units: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the factor to the standard unit and whether the rate must still be
    divided (catecholamines) or multiplied (vasopressin) by body weight.

    Standard units (section 5): mcg/kg/min, and units/hour for vasopressin. A
    rate per minute without kg is divided by weight (phenylephrine mcg/min in
    MIMIC-IV); vasopressin units/min x 60. An unknown or missing unit gives NaN.
    """
    uniques, inverse = np.unique(np.asarray(units, dtype=str), return_inverse=True)
    factors = np.full(len(uniques), np.nan)
    ops = np.zeros(len(uniques), dtype=np.int8)  # -1 divide by weight, +1 multiply
    for i, unit in enumerate(uniques):
        parsed = _parse_unit(unit)
        if parsed is None or parsed[2] not in _PER_MIN:
            continue
        amount, per_kg, per = parsed
        if drug == "vasopressin" and amount in _UNITS:
            factors[i] = _UNITS[amount] * _PER_MIN[per] * 60
            ops[i] = 1 if per_kg else 0
        elif drug != "vasopressin" and amount in _MASS_MCG:
            factors[i] = _MASS_MCG[amount] * _PER_MIN[per]
            ops[i] = 0 if per_kg else -1
    factor, weight_op = factors[inverse], ops[inverse]
    return factor, weight_op


def _no_intervals() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": np.empty(0, np.int64),
            "end": np.empty(0, np.int64),
            "rate": np.empty(0),
        }
    )


def _order_intervals(
    stay: Stay, rows: pd.DataFrame, stop: np.ndarray, rate: np.ndarray
) -> pd.DataFrame:
    """Intervals of point records, one rate state per order (see
    drug_intervals): each charting's rate holds until the next charting of the
    same order, an order's last one until ICU discharge."""
    order = (
        rows["order_id"].astype(str).str.strip().to_numpy(dtype=object)
        if "order_id" in rows
        else np.full(len(rows), "", dtype=object)
    )
    p = pd.DataFrame(
        {
            "order": order,
            "t": rows["t"].to_numpy(dtype=np.int64),
            "stop": stop,
            "rate": np.where(stop, 0.0, rate),
        }
    )
    p = p.sort_values(
        ["order", "t", "stop"], ascending=[True, True, False], kind="mergesort"
    )
    # Several chartings of one order at one time: the last one (a start after a
    # stop) wins.
    p = p.drop_duplicates(["order", "t"], keep="last")
    t = p["t"].to_numpy(dtype=np.int64)
    orders = p["order"].to_numpy()
    same_order_next = np.r_[orders[1:] == orders[:-1], False]
    end = np.where(same_order_next, np.r_[t[1:], 0], np.maximum(stay.outtime_ns, t))
    return pd.DataFrame({"start": t, "end": end, "rate": p["rate"].to_numpy()})


def drug_intervals(stay: Stay, drug: str) -> pd.DataFrame:
    """Constant-rate intervals of one drug, in the standard unit: columns start,
    end (ns since intime), rate.

    Two record styles are read (section 5 and CLIF's MAR):
    - interval records (``end_time`` set, MIMIC-IV inputevents): the rate holds
      on [time, end_time] (a record without a rate is not an infusion rate);
    - point records (CLIF medication_admin_continuous): rate state is kept per
      order (``order_id``, CLIF ``med_order_id``), as section 5 links the rate
      changes of one order. A start, dose_change or going/verify charting sets
      the order's rate from its time until that order's next charting; a stop
      (or a rate of 0) ends that order only, so a new bag started before the
      old one's stop keeps running. At one time, a stop is applied before a
      start, so a stop and a restart charted together keep the order running.
      An order's last rate holds until ICU discharge (every vasoactive order of
      the CLIF demo ends with a stop). Records without an order id share one
      state per drug, as before order ids were kept. Bolus, not_given and
      other chartings are ignored.

    Concurrent intervals (two orders running) are all returned; the hourly
    track takes the highest rate (vasoactive_tracks).
    """
    rows = stay.select("medication_admin_continuous", drug)
    if rows.empty:
        return _no_intervals()
    factor, weight_op = rate_factors(drug, rows["unit"])
    weight = stay.weight_at(rows["t"].to_numpy())
    rate = rows["value_num"].to_numpy(float) * factor
    rate = np.where(
        weight_op == -1, rate / weight, np.where(weight_op == 1, rate * weight, rate)
    )
    action = rows["value_text"].str.strip().str.lower().to_numpy()
    stop = np.isin(action, list(STOP_ACTIONS))
    # A record without a dose says nothing about the rate (a stop needs none);
    # one whose dose cannot be converted (unknown unit, no weight) makes the
    # rate unknown (NaN) while it runs.
    has_dose = ~np.isnan(rows["value_num"].to_numpy(float))
    is_interval = (rows["end"].to_numpy() != NO_TIME) & has_dose

    frames = []
    if is_interval.any():
        frames.append(
            pd.DataFrame(
                {
                    "start": rows["t"].to_numpy()[is_interval],
                    "end": rows["end"].to_numpy()[is_interval],
                    "rate": rate[is_interval],
                }
            )
        )

    point = (
        (rows["end"].to_numpy() == NO_TIME)
        & ~np.isin(action, list(IGNORED_ACTIONS))
        & (stop | has_dose)
    )
    if point.any():
        frames.append(_order_intervals(stay, rows[point], stop[point], rate[point]))

    if not frames:
        return _no_intervals()
    out = pd.concat(frames, ignore_index=True)
    running = (out["rate"] > 0) | out["rate"].isna()
    return out[running & (out["end"] > out["start"])]


def vasoactive_tracks(stay: Stay) -> dict[str, np.ndarray]:
    """Rate of each drug active at the hour end H (``start < H <= end``, section
    0), mcg/kg/min (vasopressin units/hour); concurrent records of one drug take
    the highest rate, as mimic-code's SOFA does. 0 means no infusion recorded;
    NaN an infusion whose rate cannot be converted (unknown unit, or a rate per
    minute without kg and no weight).

    ``ned``: norepinephrine-equivalent dose (section 5, Goradia 2020), mcg/kg/min,
    rounded to 4 dp: NE + epi + phenylephrine/10 + dopamine/100 +
    vasopressin(units/h) x 2.5/60; dobutamine and milrinone do not count.
    """
    out = {}
    for drug in DRUGS:
        iv = drug_intervals(stay, drug)
        rows, rates = stay.at_hour_end(
            iv["start"].to_numpy(), iv["end"].to_numpy(), iv["rate"].to_numpy()
        )
        rate = stay.reduce_rows(rows, rates, "max")
        running = stay.reduce_rows(rows, np.ones(len(rows)), "max") > 0
        out[drug] = np.where(running, rate, 0.0)
    out["ned"] = np.round(
        out["norepinephrine"]
        + out["epinephrine"]
        + out["phenylephrine"] / 10
        + out["dopamine"] / 100
        + out["vasopressin"] * 2.5 / 60,
        4,
    )
    return out
