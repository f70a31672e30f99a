"""A synthetic long ICU stay in the normalized event vocabulary, for speed
measurements of compute_stay_tracks (``python -m windows.concepts.synthetic``
prints the figures) and for tests that need volume rather than hand-checked
values."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from windows.concepts.grid import EVENT_COLUMNS


def event(
    hours: float,
    domain: str,
    category: str,
    value: float | None = None,
    *,
    unit: str = "",
    text: str = "",
    end_hours: float | None = None,
    kind: str = "",
    order_id: str = "",
    name: str | None = None,
) -> dict:
    """One event ``hours`` after ICU admission (see events_frame); ``order_id``
    names the medication order a MAR record belongs to ('' for none); ``name``
    is the source's name, the category when None."""
    return {
        "hours": hours,
        "domain": domain,
        "category": category,
        "value_num": np.nan if value is None else float(value),
        "unit": unit,
        "value_text": text,
        "end_hours": end_hours,
        "kind": kind,
        "order_id": order_id,
        "name": name,
    }


def events_frame(intime: pd.Timestamp, rows: list[dict]) -> pd.DataFrame:
    """An events frame in compute_stay_tracks' input shape from event() rows,
    times given in hours since ``intime``."""
    columns = list(EVENT_COLUMNS)
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    frame["time"] = intime + pd.to_timedelta(frame.pop("hours"), unit="h")
    end = frame.pop("end_hours").astype(float)
    frame["end_time"] = intime + pd.to_timedelta(end, unit="h")
    frame["name"] = frame["name"].fillna(frame["category"])
    return frame[columns]


def synthetic_stay(
    hours: int = 1800, events_per_hour: int = 100, seed: int = 0
) -> tuple[pd.DataFrame, pd.Timestamp, pd.Timestamp]:
    """(events, intime, outtime) of a stay of ``hours`` hours with about
    ``events_per_hour`` events an hour: vitals every few minutes, GCS and RASS
    every 2 h, a lab panel every 6 h, a norepinephrine titration (CLIF point
    style) and a vasopressin infusion (interval style), ventilator device, mode
    and FiO2 hourly, hourly urine, CRRT chartings, antibiotics every 8 h and a
    daily culture."""
    rng = np.random.default_rng(seed)
    intime = pd.Timestamp("2150-01-01 08:17", tz="UTC")
    outtime = intime + pd.Timedelta(hours=hours)
    start = intime - pd.Timedelta(hours=30)
    span = (outtime - start).total_seconds()
    frames = []

    def add(n, domain, category, values, *, unit="", text="", times=None, end=None):
        if times is None:
            times = np.sort(rng.uniform(0, span, n))
        frames.append(
            pd.DataFrame(
                {
                    "time": start + pd.to_timedelta(times, unit="s"),
                    "end_time": end if end is not None else pd.NaT,
                    "kind": "observation",
                    "domain": domain,
                    "category": category,
                    "name": category,
                    "value_num": values,
                    "unit": unit,
                    "value_text": text,
                }
            )
        )

    total_hours = span / 3600

    def every(hours: float, offset_seconds: float):
        """(count, times) of a charting every ``hours`` over the whole span."""
        n = int(total_hours / hours)
        return n, np.arange(n) * hours * 3600.0 + offset_seconds

    # Vitals: about 70 an hour in all.
    for category, mean, sd, per_hour in [
        ("heart_rate", 95, 15, 15),
        ("sbp", 110, 20, 10),
        ("dbp", 60, 10, 10),
        ("map", 72, 12, 12),
        ("respiratory_rate", 20, 5, 10),
        ("spo2", 95, 3, 10),
        ("temp_c", 37.2, 0.8, 3),
    ]:
        n = int(total_hours * per_hour * events_per_hour / 100)
        add(n, "vitals", category, rng.normal(mean, sd, n))
    add(3, "vitals", "weight_kg", np.array([80.0, 81.0, 79.0]))
    # Assessments every 2 h.
    n, times = every(2, 600)
    for category, low, high in [
        ("gcs_eye", 1, 5),
        ("gcs_verbal", 0, 6),
        ("gcs_motor", 1, 7),
        ("gcs_total", 3, 16),
        ("RASS", -5, 5),
    ]:
        add(
            n,
            "patient_assessments",
            category,
            rng.integers(low, high, n).astype(float),
            times=times,
        )
    # Labs every 6 h.
    n, times = every(6, 1200)
    for category, mean, sd in [
        ("creatinine", 1.8, 0.8),
        ("lactate", 2.5, 1.5),
        ("ph_arterial", 7.33, 0.08),
        ("po2_arterial", 90, 30),
        ("pco2_arterial", 42, 8),
        ("platelet_count", 140, 60),
        ("bilirubin_total", 1.5, 1.0),
        ("inr", 1.4, 0.3),
        ("wbc", 12, 5),
        ("sodium", 140, 4),
        ("potassium", 4.1, 0.5),
        ("bicarbonate", 22, 4),
    ]:
        add(n, "labs", category, np.abs(rng.normal(mean, sd, n)), times=times)
    # Norepinephrine titration, CLIF style: start, dose changes, stop.
    n = int(total_hours * 2)
    times = np.sort(rng.uniform(0, span, n))
    actions = np.where(
        np.arange(n) % 20 == 0,
        "start",
        np.where(np.arange(n) % 20 == 19, "stop", "dose_change"),
    )
    add(
        n,
        "medication_admin_continuous",
        "norepinephrine",
        np.where(actions == "stop", 0.0, rng.uniform(0.02, 0.4, n)),
        unit="mcg/kg/min",
        text=actions,
        times=times,
    )
    # Vasopressin, MIMIC style intervals of 4 h every 12 h.
    n, times = every(12, 3000)
    add(
        n,
        "medication_admin_continuous",
        "vasopressin",
        np.full(n, 0.04),
        unit="units/min",
        times=times,
        end=start + pd.to_timedelta(times + 4 * 3600, unit="s"),
    )
    # Respiratory support hourly.
    n, times = every(1, 900)
    devices = np.where((np.arange(n) // 200) % 3 == 2, "Nasal Cannula", "IMV")
    add(n, "respiratory_support", devices, np.nan, times=times)
    add(
        n,
        "respiratory_support",
        "mode:Assist Control-Volume Control",
        np.nan,
        times=times,
    )
    add(
        n,
        "respiratory_support",
        "fio2_set",
        rng.choice([0.3, 0.4, 0.5, 0.6], n),
        times=times,
    )
    add(
        n,
        "respiratory_support",
        "peep_set",
        rng.choice([5.0, 8.0, 10.0], n),
        times=times,
    )
    # Urine hourly, CRRT chartings every 4 h.
    add(
        n,
        "output",
        "indwelling_urinary_catheter",
        rng.uniform(0, 120, n),
        unit="mL",
        times=times + 1500,
    )
    m = n // 4
    add(m, "crrt_therapy", "crrt:cvvhdf", np.nan, times=np.arange(m) * 14400.0 + 100)
    add(
        m,
        "crrt_therapy",
        "blood_flow_rate",
        np.full(m, 200.0),
        times=np.arange(m) * 14400.0 + 100,
    )
    # Antibiotics every 8 h, cultures daily.
    m = int(total_hours / 8)
    add(
        m,
        "medication_admin_intermittent",
        "vancomycin",
        np.full(m, 1000.0),
        unit="mg",
        text="given",
        times=np.arange(m) * 28800.0 + 5000,
    )
    m = int(total_hours / 24)
    add(
        m,
        "microbiology_culture",
        "blood culture",
        np.nan,
        times=np.arange(m) * 86400.0 + 4000,
    )

    events = pd.concat(frames, ignore_index=True)
    events.loc[events["domain"] != "vitals", "kind"] = np.where(
        events.loc[events["domain"] != "vitals", "domain"].str.startswith("medication"),
        "action",
        "observation",
    )
    return events, intime, outtime


def main() -> None:
    from windows.concepts import compute_stay_tracks

    for hours in (48, 400, 1800):
        events, intime, outtime = synthetic_stay(hours)
        compute_stay_tracks(events, intime=intime, outtime=outtime)
        runs = []
        for _ in range(3):
            began = time.perf_counter()
            tracks = compute_stay_tracks(events, intime=intime, outtime=outtime)
            runs.append(time.perf_counter() - began)
        print(
            f"{hours:>5} h stay, {len(events):>7} events -> {len(tracks)} rows: "
            f"best {min(runs) * 1000:.0f} ms, median {sorted(runs)[1] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
