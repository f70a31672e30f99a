"""A MIMIC-IV folder in its own shape (hosp/ and icu/, csv.gz) for scale_bench:
patients, admissions, icustays, d_items, d_labitems, chartevents and
labevents, generated with the items the platform maps (and 500 it does not)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

# Charted items the platform maps (windows.importers.mimic_mapping), with a
# plausible mean, spread and share of the charted rows.
VITALS = [
    (220045, "Heart Rate", "bpm", 88, 18, 0.16),
    (220179, "Non Invasive Blood Pressure systolic", "mmHg", 118, 20, 0.08),
    (220180, "Non Invasive Blood Pressure diastolic", "mmHg", 62, 12, 0.08),
    (220181, "Non Invasive Blood Pressure mean", "mmHg", 78, 13, 0.08),
    (220052, "Arterial Blood Pressure mean", "mmHg", 76, 12, 0.05),
    (220210, "Respiratory Rate", "insp/min", 19, 5, 0.12),
    (220277, "O2 saturation pulseoxymetry", "%", 96, 2.5, 0.12),
    (223762, "Temperature Celsius", "°C", 37.1, 0.7, 0.02),
]
TEXT_ITEMS = [
    (220739, "GCS - Eye Opening", ["Spontaneously", "To Speech", "To Pain", "None"]),
    (
        223900,
        "GCS - Verbal Response",
        ["Oriented", "Confused", "Inappropriate Words", "No Response-ETT"],
    ),
    (
        223901,
        "GCS - Motor Response",
        ["Obeys Commands", "Localizes Pain", "Flex-withdraws"],
    ),
    (223758, "Code Status", ["Full code", "DNR / DNI", "Comfort measures only"]),
]
TEXT_SHARE = 0.09
UNMAPPED_ITEMS = 500
UNMAPPED_FIRST = 226000  # d_items ids no mapping names (checked at generation)
UNMAPPED_SHARE = 0.20
UNMAPPED_WORDS = [
    "Intact",
    "Clean/dry",
    "Reddened",
    "Repositioned",
    "Left side",
    "Right side",
    "Supine",
    "Done",
    "Yes",
    "No",
]
LABS = [
    (50912, "Creatinine", "mg/dL", 1.3, 0.8),
    (50971, "Potassium", "mEq/L", 4.1, 0.6),
    (50983, "Sodium", "mEq/L", 139, 4),
    (50813, "Lactate", "mmol/L", 2.0, 1.2),
    (50931, "Glucose", "mg/dL", 140, 45),
    (50882, "Bicarbonate", "mEq/L", 23, 4),
    (50902, "Chloride", "mEq/L", 104, 5),
    (50960, "Magnesium", "mg/dL", 2.0, 0.3),
    (50820, "pH", "units", 7.38, 0.07),
    (50818, "pCO2", "mm Hg", 41, 8),
    (50821, "pO2", "mm Hg", 95, 30),
    (50885, "Bilirubin, Total", "mg/dL", 1.2, 1.0),
    (51265, "Platelet Count", "K/uL", 190, 80),
    (51301, "White Blood Cells", "K/uL", 11, 5),
    (51222, "Hemoglobin", "g/dL", 9.8, 1.8),
]
LAB_SHARE = 0.12  # of all events
STAYS_PER_CHUNK = 250


# --- the generated folder ---------------------------------------------------------


def _stays(n: int, rng):
    import numpy as np
    import pandas as pd

    hours = np.clip(rng.gamma(2.0, 36.0, n), 12, 400)
    base = pd.Timestamp("2150-01-01")
    admit = base + pd.to_timedelta(rng.integers(0, 3650 * 24, n), unit="h")
    intime = admit + pd.to_timedelta(rng.uniform(1, 48, n), unit="h").round("min")
    outtime = intime + pd.to_timedelta(hours, unit="h").round("min")
    died = rng.random(n) < 0.11
    discharge = outtime + pd.to_timedelta(rng.uniform(2, 200, n), unit="h").round("min")
    return {
        "subject": np.arange(10_000_000, 10_000_000 + n),
        "hadm": np.arange(20_000_000, 20_000_000 + n),
        "stay": np.arange(30_000_000, 30_000_000 + n),
        "hours": hours,
        "admit": admit,
        "intime": intime,
        "outtime": outtime,
        "discharge": discharge,
        "died": died,
    }


def _write(frame, path: Path, first: bool) -> None:
    """Append ``frame`` to a csv.gz file as one gzip member (readers take the
    members as one stream), times to the second as MIMIC-IV writes them.
    pyarrow's writer: pandas' to_csv formats about 20,000 rows a second here."""
    import gzip

    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.Table.from_pandas(frame, preserve_index=False)
    for index, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            table = table.set_column(
                index, field.name, table.column(index).cast(pa.timestamp("s"))
            )
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=first))
    with open(path, "wb" if first else "ab") as out:
        out.write(gzip.compress(sink.getvalue().to_pybytes(), compresslevel=1))


def mimic_write(folder: Path, stays: int, events: int, seed: int = 0) -> dict:
    """The generated folder (written once; a marker file names what it holds)."""
    import django
    import numpy as np
    import pandas as pd

    django.setup()
    from windows.importers.mimic_mapping import chartevents as charted

    marker = folder / ".complete"
    if marker.exists():
        return {"seconds": 0.0, "reused": True}
    started = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "hosp").mkdir(parents=True)
    (folder / "icu").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    s = _stays(stays, rng)
    n = stays
    pd.DataFrame(
        {
            "subject_id": s["subject"],
            "gender": rng.choice(["F", "M"], n),
            "anchor_age": rng.integers(18, 91, n),
            "anchor_year": s["admit"].year,
            "anchor_year_group": "2017 - 2019",
            "dod": pd.Series(s["discharge"]).where(s["died"]).dt.date,
        }
    ).to_csv(folder / "hosp" / "patients.csv.gz", index=False)
    pd.DataFrame(
        {
            "subject_id": s["subject"],
            "hadm_id": s["hadm"],
            "admittime": s["admit"],
            "dischtime": s["discharge"],
            "deathtime": pd.Series(s["discharge"]).where(s["died"]),
            "admission_type": "EW EMER.",
            "discharge_location": np.where(s["died"], "DIED", "HOME"),
            "hospital_expire_flag": s["died"].astype(int),
        }
    ).to_csv(
        folder / "hosp" / "admissions.csv.gz",
        index=False,
        date_format="%Y-%m-%d %H:%M:%S",
    )
    units = [
        "Medical Intensive Care Unit (MICU)",
        "Surgical Intensive Care Unit (SICU)",
    ]
    unit = rng.choice(units, n)
    pd.DataFrame(
        {
            "subject_id": s["subject"],
            "hadm_id": s["hadm"],
            "stay_id": s["stay"],
            "first_careunit": unit,
            "last_careunit": unit,
            "intime": s["intime"],
            "outtime": s["outtime"],
            "los": (s["hours"] / 24).round(4),
        }
    ).to_csv(
        folder / "icu" / "icustays.csv.gz",
        index=False,
        date_format="%Y-%m-%d %H:%M:%S",
    )
    mapped = {
        key
        for table in vars(charted).values()
        if isinstance(table, dict)
        for key in table
        if isinstance(key, int)
    }
    unmapped = [
        i
        for i in range(UNMAPPED_FIRST, UNMAPPED_FIRST + 2 * UNMAPPED_ITEMS)
        if i not in mapped
    ][:UNMAPPED_ITEMS]
    items = (
        [(i, label, "Routine Vital Signs") for i, label, *_ in VITALS]
        + [(i, label, "Neurological") for i, label, _ in TEXT_ITEMS]
        + [(i, f"Bench unmapped item {i}", "Bench") for i in unmapped]
    )
    pd.DataFrame(items, columns=["itemid", "label", "category"]).assign(
        param_type=lambda f: np.where(
            f.itemid.isin([i for i, _, _ in TEXT_ITEMS]), "Text", "Numeric"
        )
    ).to_csv(folder / "icu" / "d_items.csv.gz", index=False)
    pd.DataFrame(
        [(i, label, "Blood") for i, label, *_ in LABS],
        columns=["itemid", "label", "fluid"],
    ).to_csv(folder / "hosp" / "d_labitems.csv.gz", index=False)

    per_stay = events / stays
    lab_id = 1
    written = {"chartevents": 0, "labevents": 0}
    for start in range(0, n, STAYS_PER_CHUNK):
        idx = np.arange(start, min(n, start + STAYS_PER_CHUNK))
        # Events in proportion to the stay's length, per_stay on average.
        weights = s["hours"][idx] / s["hours"].mean()
        counts = rng.poisson(per_stay * weights)
        who = np.repeat(idx, counts)
        m = len(who)
        offset = rng.random(m) * s["hours"][who]
        when = pd.DatetimeIndex(s["intime"][who]) + pd.to_timedelta(
            offset * 3600, unit="s"
        ).round("min")
        is_lab = rng.random(m) < LAB_SHARE
        # labevents
        lw = who[is_lab]
        lab = rng.integers(0, len(LABS), len(lw))
        mean = np.array([x[3] for x in LABS])[lab]
        sd = np.array([x[4] for x in LABS])[lab]
        value = np.abs(rng.normal(mean, sd)).round(2)
        lab_frame = pd.DataFrame(
            {
                "labevent_id": np.arange(lab_id, lab_id + len(lw)),
                "subject_id": s["subject"][lw],
                "hadm_id": s["hadm"][lw],
                "specimen_id": rng.integers(1, 10**8, len(lw)),
                "itemid": np.array([x[0] for x in LABS])[lab],
                "charttime": when[is_lab],
                "storetime": when[is_lab] + pd.Timedelta(minutes=45),
                "value": value.astype(str),
                "valuenum": value,
                "valueuom": np.array([x[2] for x in LABS])[lab],
            }
        )
        lab_id += len(lw)
        _write(lab_frame, folder / "hosp" / "labevents.csv.gz", start == 0)
        written["labevents"] += len(lab_frame)
        # chartevents: vitals, text items and unmapped items
        cw = who[~is_lab]
        k = len(cw)
        kind = rng.random(k)
        is_text = kind < TEXT_SHARE
        is_unmapped = (kind >= TEXT_SHARE) & (kind < TEXT_SHARE + UNMAPPED_SHARE)
        shares = np.array([v[5] for v in VITALS])
        vital = rng.choice(len(VITALS), k, p=shares / shares.sum())
        itemid = np.array([v[0] for v in VITALS])[vital]
        valuenum = np.abs(
            rng.normal(
                np.array([v[3] for v in VITALS])[vital],
                np.array([v[4] for v in VITALS])[vital],
            )
        ).round(1)
        unit = np.array([v[2] for v in VITALS], dtype=object)[vital]
        text_item = rng.integers(0, len(TEXT_ITEMS), k)
        text_choice = rng.integers(0, 4, k)
        texts = np.array(
            [
                TEXT_ITEMS[t][2][c % len(TEXT_ITEMS[t][2])]
                for t, c in zip(text_item[is_text], text_choice[is_text])
            ],
            dtype=object,
        )
        unmapped_item = np.array(unmapped)[rng.integers(0, len(unmapped), k)]
        unmapped_text = unmapped_item % 2 == 0
        itemid = np.where(
            is_text, np.array([t[0] for t in TEXT_ITEMS])[text_item], itemid
        )
        itemid = np.where(is_unmapped, unmapped_item, itemid)
        value = valuenum.astype(str).astype(object)
        valuenum = valuenum.astype(float)
        value[is_text] = texts
        valuenum[is_text] = np.nan
        unit[is_text] = ""
        words = np.array(UNMAPPED_WORDS, dtype=object)[rng.integers(0, 10, k)]
        text_rows = is_unmapped & unmapped_text
        value[text_rows] = words[text_rows]
        valuenum[text_rows] = np.nan
        unit[is_unmapped] = ""
        numeric_rows = is_unmapped & ~unmapped_text
        number = rng.integers(0, 300, k).astype(float)
        value[numeric_rows] = number[numeric_rows].astype(str)
        valuenum[numeric_rows] = number[numeric_rows]
        chart_when = when[~is_lab]
        chart = pd.DataFrame(
            {
                "subject_id": s["subject"][cw],
                "hadm_id": s["hadm"][cw],
                "stay_id": s["stay"][cw],
                "caregiver_id": rng.integers(1, 3000, k),
                "charttime": chart_when,
                "storetime": chart_when + pd.Timedelta(minutes=5),
                "itemid": itemid,
                "value": value,
                "valuenum": valuenum,
                "valueuom": unit,
                "warning": 0,
            }
        )
        _write(chart, folder / "icu" / "chartevents.csv.gz", start == 0)
        written["chartevents"] += len(chart)
        print(
            f"\rgenerating: {idx[-1] + 1:,}/{n:,} stays, "
            f"{sum(written.values()):,} events",
            end="",
            flush=True,
        )
    print()
    marker.write_text(f"{stays} {events} {seed}\n")
    return {"seconds": time.perf_counter() - started, "reused": False, **written}
