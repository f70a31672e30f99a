"""A MIMIC-IV-shaped folder generated from the CLIF demo by inverting the CLIF
consortium's MIMIC-IV -> CLIF conversion, so that the same real patients can be
imported by both importers and compared (tests/windows/test_mimic_clif_roundtrip.py).

The demo is the MIMIC-IV demo converted by the consortium's pipeline; the
consortium's mapping tables (``../shared/clif-mimic-mappings``) say which itemid,
label, source unit and multiplier each CLIF category came from; the facts read
from them are kept in tests/windows/clif_mimic_facts.py, so the round trip runs
wherever the repository does (``python -m tests.windows.mimic_roundtrip``
writes that file again from the tables). Where a CLIF
category has several source items, the one whose label is the CLIF ``*_name`` is
used, else the first. Times are written as the CLIF demo's UTC times without an
offset (MIMIC-IV's are naive; the importer reads them as UTC).

What the inversion cannot give back is listed by the round-trip test.
"""

from __future__ import annotations

import ast
import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd

MAPPINGS = (
    Path(
        os.environ.get(
            "CLIF_MIMIC_MAPPINGS",
            Path(__file__).resolve().parents[3] / "shared" / "clif-mimic-mappings",
        )
    )
    / "mappings"
)

# One MIMIC-IV itemid per CLIF column or category where the consortium's tables
# name several (respiratory_support.csv, dialysis.csv) or none (assessments,
# position and code status come from chartevents items the tables do not list).
RESPIRATORY_ITEMS = {
    "fio2_set": (223835, "Inspired O2 Fraction", ""),
    "lpm_set": (223834, "O2 Flow", "L/min"),
    "tidal_volume_set": (224684, "Tidal Volume (set)", "mL"),
    "resp_rate_set": (224688, "Respiratory Rate (Set)", "insp/min"),
    "pressure_control_set": (224702, "PCV Level", "cmH2O"),
    "pressure_support_set": (224701, "PSV Level", "cmH2O"),
    "flow_rate_set": (224691, "Flow Rate (L/min)", "L/min"),
    "peak_inspiratory_pressure_set": (227580, "BiPap IPAP", "cmH2O"),
    "inspiratory_time_set": (224738, "Inspiratory Time", "sec"),
    "peep_set": (220339, "PEEP set", "cmH2O"),
    "tidal_volume_obs": (224685, "Tidal Volume (observed)", "mL"),
    "resp_rate_obs": (224690, "Respiratory Rate (Total)", "insp/min"),
    "plateau_pressure_obs": (224696, "Plateau Pressure", "cmH2O"),
    "peak_inspiratory_pressure_obs": (224695, "Peak Insp. Pressure", "cmH2O"),
    "peep_obs": (224700, "Total PEEP Level", "cmH2O"),
    "minute_vent_obs": (224687, "Minute Volume", "L/min"),
    "mean_airway_pressure_obs": (224697, "Mean Airway Pressure", "cmH2O"),
}
DEVICE_ITEM = (226732, "O2 Delivery Device(s)")
VENT_BRAND_ITEM = (223848, "Ventilator Type")
MODE_ITEMS = {
    223849: "Ventilator Mode",
    229314: "Ventilator Mode (Hamilton)",
    227577: "BiPap Mode",
}
# CRRT (dialysis.csv): column -> (itemid, label, source unit, CLIF value per source unit)
CRRT_ITEMS = {
    "blood_flow_rate": (224144, "Blood Flow (ml/min)", "ml/min", 60.0),
    "pre_filter_replacement_fluid_rate": (
        228005,
        "PBP (Prefilter) Replacement Rate",
        "ml/hr",
        1.0,
    ),
    "post_filter_replacement_fluid_rate": (
        228006,
        "Post Filter Replacement Rate",
        "ml/hr",
        1.0,
    ),
    "dialysate_flow_rate": (224154, "Dialysate Rate", "ml/hr", 1.0),
    "ultrafiltration_out": (226457, "Ultrafiltrate Output", "mL", 1.0),
}
CRRT_MODE_ITEM = (227290, "CRRT mode")
# CLIF assessment_name (as the demo spells it) -> (itemid, label, param_type)
ASSESSMENT_ITEMS = {
    "gcs_eyes": (220739, "GCS - Eye Opening", "Text"),
    "gcs_verbal": (223900, "GCS - Verbal Response", "Text"),
    "gcs_motor": (223901, "GCS - Motor Response", "Text"),
    "Richmond-RAS Scale": (228096, "Richmond-RAS Scale", "Text"),
    "Braden Sensory Perception": (224054, "Braden Sensory Perception", "Text"),
    "Braden Moisture": (224055, "Braden Moisture", "Text"),
    "Braden Activity": (224056, "Braden Activity", "Text"),
    "Braden Mobility": (224057, "Braden Mobility", "Text"),
    "Braden Nutrition": (224058, "Braden Nutrition", "Text"),
    "Braden Friction/Shear": (224059, "Braden Friction/Shear", "Text"),
    "CAM-ICU MS Change": (228300, "CAM-ICU MS Change", "Text"),
    "CAM-ICU Inattention": (228301, "CAM-ICU Inattention", "Text"),
    "CAM-ICU Altered LOC": (228334, "CAM-ICU Altered LOC", "Text"),
    "CAM-ICU Disorganized thinking": (228303, "CAM-ICU Disorganized thinking", "Text"),
    "SBT Successfully Completed": (224717, "SBT Successfully Completed", "Text"),
    "SBT Deferred": (224833, "SBT Deferred", "Text"),
    "SBT Stopped": (224716, "SBT Stopped", "Text"),
}
# Scores the consortium computes from their components: no MIMIC-IV item.
COMPUTED_ASSESSMENTS = {"gcs_total", "braden_total", "cam_total"}
TEMPERATURE_SITE_ITEM = (224642, "Temperature Site")
POSITION_ITEM = (224093, "Position")
CODE_STATUS_ITEM = (223758, "Code Status")

# The consortium writes Dextrose 5% (220949) under two CLIF categories; one
# MIMIC-IV row gives back one of them.
DUPLICATED_MEDICATIONS = {("Dextrose 5%", "dextrose")}


def _first_unit(instances: str) -> str:
    """The most frequent source unit of labs.csv's ``uom_instances``:
    ``{'K/uL': 123}`` or ``K/uL: 847472; : 1``."""
    text = (instances or "").strip()
    if not text or text in ("{}", "None"):
        return ""
    if text.startswith("{"):
        units = ast.literal_eval(text)
        return max(units, key=units.get) if units else ""
    if ":" in text:
        return text.split(";")[0].rsplit(":", 1)[0].strip()
    return text


def _text_col(values) -> pd.Series:
    s = pd.Series(values)
    return s.astype("object").where(s.notna(), None)


def inversion_facts_from_tables(mappings: Path = MAPPINGS) -> dict:
    """CLIF name/category -> MIMIC-IV item, as read from the consortium's tables
    (tests/windows/clif_mimic_facts.py holds the result, checked against the
    tables by the round-trip test wherever they are)."""

    def rows(name: str) -> list[dict]:
        with open(mappings / name, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))

    vitals = {}
    for r in rows("vitals.csv"):
        if r["vital_category"] in ("NO MAPPING", "MAPPED ELSEWHERE", ""):
            continue
        unit = r["unitname"] if r["unitname"] not in ("NaN", "None") else ""
        vitals[r["label = vital_name"]] = (int(r["itemid"]), unit)
    labs = {}
    for r in rows("labs.csv"):
        if not r["itemid"].isdigit() or "NO MAPPING" in r["decision"]:
            continue
        key = (r["label"], r["lab_category"])
        if key in labs:
            continue
        multiplier = float(r["conversion_multiplier"] or 1.0)
        chart = r["fluid"] == "chartevents"
        unit = r["uom_instances"] if chart else _first_unit(r["uom_instances"])
        unit = "" if unit in ("None", "NaN") else unit
        labs[key] = (int(r["itemid"]), unit, multiplier, chart, r["fluid"])
    meds = {}
    for r in rows("med_category.csv"):
        if r["linksto"] != "inputevents" or not r["itemid"].isdigit():
            continue
        meds.setdefault(r["label"], int(r["itemid"]))
    modes: dict[str, list[int]] = {}
    for r in rows("mode_category.csv"):
        if r["itemid"].isdigit():
            modes.setdefault(r["mode_name"], []).append(int(r["itemid"]))
    return {"vitals": vitals, "labs": labs, "meds": meds, "modes": modes}


class Inversion:
    """The consortium's mapping facts (tests/windows/clif_mimic_facts.py, so the
    round trip runs wherever the repository is): CLIF name/category -> MIMIC-IV
    item."""

    def __init__(self) -> None:
        from tests.windows import clif_mimic_facts as facts

        self.vitals = dict(facts.VITALS)
        self.vitals["Admission Weight (lbs.)"] = (226531, "lbs")
        self.labs = dict(facts.LABS)
        self.meds = dict(facts.MEDS)
        self.modes = {name: list(items) for name, items in facts.MODES.items()}

    def mode_item(self, name: str, brand: str) -> int:
        items = self.modes.get(name, [223849])
        if brand == "Hamilton" and 229314 in items:
            return 229314
        return items[0]


def write_mimic_folder(clif_dir: Path, out: Path) -> dict:
    """Write ``out/hosp`` and ``out/icu`` (CSV) from the CLIF demo in ``clif_dir``;
    returns counts of what was written per file."""
    inv = Inversion()
    clif_dir, out = Path(clif_dir), Path(out)
    (out / "hosp").mkdir(parents=True, exist_ok=True)
    (out / "icu").mkdir(parents=True, exist_ok=True)

    def read(name):
        return pd.read_parquet(clif_dir / f"clif_{name}.parquet")

    counts: dict[str, int] = {}

    def write(frame: pd.DataFrame, path: str) -> None:
        frame.to_csv(out / path, index=False, date_format="%Y-%m-%d %H:%M:%S")
        counts[path] = len(frame)

    def naive(values) -> pd.Series:
        return pd.to_datetime(values, utc=True).dt.tz_localize(None)

    patient = read("patient")
    hosp = read("hospitalization")
    adt = read("adt")
    for frame in (patient, hosp, adt):
        for col in ("patient_id", "hospitalization_id"):
            if col in frame:
                frame[col] = frame[col].astype(str)
    hosp["subject_id"] = hosp["patient_id"].astype("int64")
    hosp["hadm_id"] = hosp["hospitalization_id"].astype("int64")
    subject_of = hosp.set_index("hadm_id")["subject_id"]

    # patients: anchor age and year at the patient's first admission.
    first = hosp.sort_values("admission_dttm").groupby("patient_id").first()
    death = pd.to_datetime(patient["death_dttm"], utc=True)
    write(
        pd.DataFrame(
            {
                "subject_id": patient["patient_id"].astype("int64"),
                "gender": patient["sex_name"],
                "anchor_age": patient["patient_id"]
                .map(first["age_at_admission"])
                .astype("Int64"),
                "anchor_year": patient["patient_id"]
                .map(first["admission_dttm"].dt.year)
                .astype("Int64"),
                "anchor_year_group": "2017 - 2019",
                "dod": death.dt.tz_localize(None).dt.strftime("%Y-%m-%d"),
            }
        ),
        "hosp/patients.csv",
    )

    expired = hosp["discharge_category"].eq("Expired").fillna(False).astype(bool)
    death_of = patient.set_index("patient_id")["death_dttm"]
    deathtime = pd.to_datetime(hosp["patient_id"].map(death_of), utc=True).where(
        expired
    )
    write(
        pd.DataFrame(
            {
                "subject_id": hosp["subject_id"],
                "hadm_id": hosp["hadm_id"],
                "admittime": naive(hosp["admission_dttm"]),
                "dischtime": naive(hosp["discharge_dttm"]),
                "deathtime": deathtime.dt.tz_localize(None),
                "admission_type": hosp["admission_type_name"],
                "admit_provider_id": None,
                "admission_location": None,
                "discharge_location": hosp["discharge_name"],
                "insurance": None,
                "language": None,
                "marital_status": None,
                "race": None,
                "edregtime": None,
                "edouttime": None,
                "hospital_expire_flag": expired.astype(int),
            }
        ),
        "hosp/admissions.csv",
    )

    # transfers: every ADT segment, and MIMIC-IV's discharge row per admission.
    adt = adt.sort_values(["hospitalization_id", "in_dttm"]).reset_index(drop=True)
    adt["hadm_id"] = adt["hospitalization_id"].astype("int64")
    eventtype = np.where(adt["location_category"].eq("ed"), "ED", "transfer")
    first_row = ~adt["hadm_id"].duplicated()
    eventtype = np.where(first_row & (eventtype != "ED"), "admit", eventtype)
    transfers = pd.DataFrame(
        {
            "subject_id": adt["hadm_id"].map(subject_of),
            "hadm_id": adt["hadm_id"],
            "transfer_id": 30_000_000 + np.arange(len(adt)),
            "eventtype": eventtype,
            "careunit": adt["location_name"],
            "intime": naive(adt["in_dttm"]),
            "outtime": naive(adt["out_dttm"]),
        }
    )
    discharge = pd.DataFrame(
        {
            "subject_id": hosp["subject_id"],
            "hadm_id": hosp["hadm_id"],
            "transfer_id": 39_000_000 + np.arange(len(hosp)),
            "eventtype": "discharge",
            "careunit": None,
            "intime": naive(hosp["discharge_dttm"]),
            "outtime": pd.NaT,
        }
    )
    write(
        pd.concat([transfers, discharge.dropna(axis=1, how="all")], ignore_index=True),
        "hosp/transfers.csv",
    )

    # icustays: contiguous ICU segments, as MIMIC-IV (and the CLIF importer) merge them.
    icu = adt[adt["location_category"].eq("icu")].sort_values(["hadm_id", "in_dttm"])
    stays = []
    for hadm, group in icu.groupby("hadm_id", sort=True):
        run = None
        for r in group.itertuples():
            if run is not None and r.in_dttm <= run["outtime"]:
                run["outtime"] = max(run["outtime"], r.out_dttm)
                run["last_careunit"] = r.location_name
                continue
            if run is not None:
                stays.append(run)
            run = {
                "subject_id": int(subject_of[hadm]),
                "hadm_id": int(hadm),
                "first_careunit": r.location_name,
                "last_careunit": r.location_name,
                "intime": r.in_dttm,
                "outtime": r.out_dttm,
            }
        stays.append(run)
    stays = pd.DataFrame(stays)
    stays = stays[stays["outtime"] > stays["intime"]].reset_index(drop=True)
    stays.insert(2, "stay_id", 30_000_000 + np.arange(len(stays)))
    stays["los"] = (stays["outtime"] - stays["intime"]).dt.total_seconds() / 86400
    stays["intime"], stays["outtime"] = naive(stays["intime"]), naive(stays["outtime"])
    write(stays, "icu/icustays.csv")
    stay_of = stays.drop_duplicates("hadm_id").set_index("hadm_id")["stay_id"]

    # diagnoses: the primary diagnosis first, then file order (the CLIF importer's rank).
    dx = read("hospital_diagnosis")
    dx["hadm_id"] = dx["hospitalization_id"].astype(str).astype("int64")
    dx["_order"] = np.arange(len(dx))
    dx["_primary"] = dx["diagnosis_primary"].fillna(0).astype(int).eq(1)
    dx = dx.sort_values(
        ["hadm_id", "_primary", "_order"], ascending=[True, False, True]
    )
    write(
        pd.DataFrame(
            {
                "subject_id": dx["hadm_id"].map(subject_of),
                "hadm_id": dx["hadm_id"],
                "seq_num": dx.groupby("hadm_id").cumcount() + 1,
                "icd_code": dx["diagnosis_code"],
                "icd_version": np.where(
                    dx["diagnosis_code_format"].str.contains("10"), 10, 9
                ),
            }
        ),
        "hosp/diagnoses_icd.csv",
    )

    # Coded procedures: ICD codes in procedures_icd, CPT/HCPCS in hcpcsevents,
    # each with its date only.
    proc = read("patient_procedures")
    proc["hadm_id"] = proc["hospitalization_id"].astype(str).astype("int64")
    date = naive(proc["procedure_billed_dttm"]).dt.strftime("%Y-%m-%d")
    icd = proc["procedure_code_format"].str.startswith("ICD")
    p = proc[icd]
    write(
        pd.DataFrame(
            {
                "subject_id": p["hadm_id"].map(subject_of),
                "hadm_id": p["hadm_id"],
                "seq_num": p.groupby("hadm_id").cumcount() + 1,
                "chartdate": date[icd],
                "icd_code": p["procedure_code"],
                "icd_version": np.where(
                    p["procedure_code_format"].str.contains("10"), 10, 9
                ),
            }
        ),
        "hosp/procedures_icd.csv",
    )
    p = proc[~icd]
    write(
        pd.DataFrame(
            {
                "subject_id": p["hadm_id"].map(subject_of),
                "hadm_id": p["hadm_id"],
                "chartdate": date[~icd],
                "hcpcs_cd": p["procedure_code"],
                "seq_num": p.groupby("hadm_id").cumcount() + 1,
                "short_description": "",
            }
        ),
        "hosp/hcpcsevents.csv",
    )

    d_items: dict[
        int, tuple[str, str, str, str]
    ] = {}  # itemid -> label, linksto, unit, type
    chart_parts = []

    def chart(hosp_ids, time, itemid, value, valuenum, valueuom, storetime=None):
        n = len(hosp_ids)
        hadm = pd.Series(hosp_ids).astype(str).astype("int64").to_numpy()
        frame = pd.DataFrame(
            {
                "subject_id": pd.Series(hadm).map(subject_of).to_numpy(),
                "hadm_id": hadm,
                "stay_id": pd.Series(hadm).map(stay_of).astype("Int64").to_numpy(),
                "caregiver_id": None,
                "charttime": naive(pd.Series(time).reset_index(drop=True)).to_numpy(),
                "storetime": naive(
                    pd.Series(time if storetime is None else storetime).reset_index(
                        drop=True
                    )
                ).to_numpy(),
                "itemid": np.broadcast_to(np.asarray(itemid), n),
                "value": _text_col(
                    np.broadcast_to(np.asarray(value, dtype=object), n)
                ).to_numpy(),
                "valuenum": np.broadcast_to(np.asarray(valuenum, dtype="float64"), n),
                "valueuom": np.broadcast_to(np.asarray(valueuom, dtype=object), n),
                "warning": 0,
            }
        )
        chart_parts.append(frame)

    def chart_text(rows, item, column, time_column="recorded_dttm"):
        """One Text item (itemid, label) charted from a CLIF text column."""
        chart(
            rows["hospitalization_id"],
            rows[time_column],
            item[0],
            rows[column].to_numpy(),
            np.nan,
            None,
        )
        d_items[item[0]] = (item[1], "chartevents", "", "Text")

    def chart_numbers(rows, values, itemid, label, unit):
        """One Numeric item charted from CLIF values already in the source unit."""
        chart(
            rows["hospitalization_id"],
            rows["recorded_dttm"],
            itemid,
            values.map(lambda v: f"{v:.10g}"),
            values.to_numpy(),
            unit or None,
        )
        d_items[itemid] = (label, "chartevents", unit, "Numeric")

    # vitals, with the temperature site as its own item at the same charttime.
    vitals = read("vitals")
    item = vitals["vital_name"].map(lambda n: inv.vitals[n][0])
    uom = vitals["vital_name"].map(lambda n: inv.vitals[n][1])
    value = vitals["vital_value"].astype("float64")
    value = value.where(item != 223761, value * 1.8 + 32)
    value = value.where(item != 226531, value / 0.45359237)
    chart(
        vitals["hospitalization_id"],
        vitals["recorded_dttm"],
        item.to_numpy(),
        value.map(lambda v: f"{v:.10g}"),
        value.to_numpy(),
        uom.to_numpy(),
    )
    for name, (itemid, unit) in inv.vitals.items():
        d_items[itemid] = (name, "chartevents", unit, "Numeric")
    site = vitals[vitals["meas_site_name"].notna()]
    chart_text(site, TEMPERATURE_SITE_ITEM, "meas_site_name")

    # labs: labevents, or chartevents for the bedside blood gases; the source
    # value is the CLIF value divided by the consortium's multiplier.
    labs = read("labs")
    keys = list(zip(labs["lab_name"], labs["lab_category"]))
    spec = [inv.labs[k] for k in keys]
    itemid = np.array([s[0] for s in spec])
    unit = np.array([s[1] for s in spec], dtype=object)
    factor = np.array([s[2] for s in spec])
    in_chart = np.array([s[3] for s in spec])
    valuenum = labs["lab_value_numeric"].to_numpy(dtype="float64") / factor
    lab_value = labs["lab_value"].astype("object")
    c = labs[in_chart]
    chart(
        c["hospitalization_id"],
        c["lab_collect_dttm"],
        itemid[in_chart],
        lab_value[in_chart].to_numpy(),
        valuenum[in_chart],
        unit[in_chart],
        storetime=c["lab_result_dttm"],
    )
    le = labs[~in_chart]
    hadm = le["hospitalization_id"].astype(str).astype("int64")
    write(
        pd.DataFrame(
            {
                "labevent_id": 1 + np.arange(len(le)),
                "subject_id": hadm.map(subject_of),
                "hadm_id": hadm,
                "specimen_id": 1 + np.arange(len(le)),
                "itemid": itemid[~in_chart],
                "order_provider_id": None,
                "charttime": naive(le["lab_collect_dttm"]),
                "storetime": naive(le["lab_result_dttm"]),
                "value": lab_value[~in_chart],
                "valuenum": valuenum[~in_chart],
                "valueuom": unit[~in_chart],
                "ref_range_lower": None,
                "ref_range_upper": None,
                "flag": None,
                "priority": None,
                "comments": None,
            }
        ),
        "hosp/labevents.csv",
    )
    d_lab = {}
    for (label, _cat), (itemid_, unit_, _f, chart_, fluid) in inv.labs.items():
        if chart_:
            d_items[itemid_] = (label, "chartevents", unit_, "Numeric")
        else:
            d_lab.setdefault(itemid_, (label, fluid or "Blood"))
    write(
        pd.DataFrame(
            {
                "itemid": list(d_lab),
                "label": [v[0] for v in d_lab.values()],
                "fluid": [v[1] for v in d_lab.values()],
                "category": "",
            }
        ),
        "hosp/d_labitems.csv",
    )

    # respiratory support: one chartevents row per charted column.
    resp = read("respiratory_support")
    dev = resp[resp["device_name"].notna()]
    chart_text(dev, DEVICE_ITEM, "device_name")
    brand = resp[resp["vent_brand_name"].notna()]
    chart_text(brand, VENT_BRAND_ITEM, "vent_brand_name")
    mode = resp[resp["mode_name"].notna()]
    mode_item = [
        inv.mode_item(n, str(b))
        for n, b in zip(mode["mode_name"], mode["vent_brand_name"])
    ]
    chart(
        mode["hospitalization_id"],
        mode["recorded_dttm"],
        np.array(mode_item),
        mode["mode_name"].to_numpy(),
        np.nan,
        None,
    )
    for itemid_, label in MODE_ITEMS.items():
        d_items[itemid_] = (label, "chartevents", "", "Text")
    for col, (itemid_, label, unit_) in RESPIRATORY_ITEMS.items():
        has = resp[resp[col].notna()]
        values = has[col].astype("float64") * (100 if col == "fio2_set" else 1)
        chart_numbers(has, values, itemid_, label, unit_)

    # assessments (the consortium's computed totals have no MIMIC-IV item).
    ass = read("patient_assessments")
    ass = ass[~ass["assessment_category"].isin(COMPUTED_ASSESSMENTS)]
    for name, group in ass.groupby("assessment_name"):
        itemid_, label, ptype = ASSESSMENT_ITEMS[name]
        text = group["categorical_value"].astype("object")
        text = text.where(text.notna(), group["text_value"])
        num = group["numerical_value"].astype("float64")
        text = text.where(
            text.notna(), num.map(lambda v: None if pd.isna(v) else f"{v:g}")
        )
        chart(
            group["hospitalization_id"],
            group["recorded_dttm"],
            itemid_,
            text.to_numpy(),
            num.to_numpy(),
            None,
        )
        d_items[itemid_] = (label, "chartevents", "", ptype)

    pos = read("position")
    chart_text(pos, POSITION_ITEM, "position_name")

    # code status is charted per patient in CLIF: each record goes to the
    # admission whose hospital stay holds it (as the CLIF importer places it).
    cs = read("code_status")
    cs["patient_id"] = cs["patient_id"].astype(str)
    cs_hosp = cs.merge(
        hosp[["patient_id", "hospitalization_id", "admission_dttm", "discharge_dttm"]],
        on="patient_id",
    )
    cs_hosp = cs_hosp[
        (cs_hosp["start_dttm"] >= cs_hosp["admission_dttm"])
        & (cs_hosp["start_dttm"] <= cs_hosp["discharge_dttm"])
    ]
    cs_hosp = cs_hosp[cs_hosp["hospitalization_id"].astype("int64").isin(stay_of.index)]
    chart_text(cs_hosp, CODE_STATUS_ITEM, "code_status_name", "start_dttm")

    crrt = read("crrt_therapy")
    m = crrt[crrt["crrt_mode_name"].notna()]
    chart_text(m, CRRT_MODE_ITEM, "crrt_mode_name")
    for col, (itemid_, label, unit_, per_unit) in CRRT_ITEMS.items():
        has = crrt[crrt[col].notna()]
        values = has[col].astype("float64") / per_unit
        chart_numbers(has, values, itemid_, label, unit_)

    chartevents = pd.concat(chart_parts, ignore_index=True)
    chartevents["stay_id"] = chartevents["stay_id"].astype("Int64")
    chartevents = chartevents[chartevents["hadm_id"].isin(stay_of.index)]
    chartevents = chartevents.sort_values(
        ["subject_id", "charttime", "itemid"], kind="stable"
    )
    write(chartevents, "icu/chartevents.csv")

    write(
        _inputevents(read, inv, subject_of, stay_of, vitals, d_items),
        "icu/inputevents.csv",
    )
    write(
        pd.DataFrame(
            {
                "itemid": list(d_items),
                "label": [v[0] for v in d_items.values()],
                "abbreviation": [v[0] for v in d_items.values()],
                "linksto": [v[1] for v in d_items.values()],
                "category": "",
                "unitname": [v[2] or None for v in d_items.values()],
                "param_type": [v[3] for v in d_items.values()],
                "lownormalvalue": None,
                "highnormalvalue": None,
            }
        ),
        "icu/d_items.csv",
    )
    return counts


def _weights(vitals: pd.DataFrame) -> pd.Series:
    """Each hospitalization's first charted weight (kg): inputevents' patientweight."""
    w = vitals[vitals["vital_category"] == "weight_kg"].sort_values("recorded_dttm")
    return w.groupby(w["hospitalization_id"].astype(str))["vital_value"].first()


def _inputevents(read, inv, subject_of, stay_of, vitals, d_items) -> pd.DataFrame:
    """Continuous administrations back to MIMIC-IV's intervals, per order and item:
    each MAR record that sets a rate (start, dose change, restart) begins an
    interval that the order's next record ends, with that record's action as the
    interval's statusdescription (ChangeDose/Rate, Paused, FinishedRunning,
    Stopped). Intermittent ones are one row each, at their time."""
    weights = _weights(vitals)
    rows = []
    orderid = iter(range(50_000_000, 99_000_000))

    cont = read("medication_admin_continuous")
    cont = cont[
        ~pd.Series(
            list(zip(cont["med_name"], cont["med_category"])), index=cont.index
        ).isin(DUPLICATED_MEDICATIONS)
    ]
    cont = cont.assign(hospitalization_id=cont["hospitalization_id"].astype(str))
    cont = cont.sort_values(
        ["hospitalization_id", "med_order_id", "med_name", "admin_dttm"], kind="stable"
    )
    for (hosp_id, order, name), group in cont.groupby(
        ["hospitalization_id", "med_order_id", "med_name"], sort=False
    ):
        recs = list(group.itertuples())
        for cur, nxt in zip(recs, recs[1:]):
            if cur.mar_action_category == "stop":
                continue
            status = {"dose_change": "ChangeDose/Rate", "going": "Paused"}.get(
                nxt.mar_action_category, nxt.mar_action_name
            )
            if nxt.mar_action_category == "start":
                status = "ChangeDose/Rate"
            rows.append(
                _input_row(
                    hosp_id,
                    order,
                    name,
                    cur.admin_dttm,
                    nxt.admin_dttm,
                    cur.med_dose,
                    cur.med_dose_unit,
                    status,
                    next(orderid),
                    inv,
                    weights,
                )
            )
        last = recs[-1]
        if last.mar_action_category != "stop":
            # An order still running at the end of the data: one minute more.
            rows.append(
                _input_row(
                    hosp_id,
                    order,
                    name,
                    last.admin_dttm,
                    last.admin_dttm + pd.Timedelta(minutes=1),
                    last.med_dose,
                    last.med_dose_unit,
                    "Stopped",
                    next(orderid),
                    inv,
                    weights,
                )
            )

    inter = read("medication_admin_intermittent")
    inter = inter[
        ~pd.Series(
            list(zip(inter["med_name"], inter["med_category"])), index=inter.index
        ).isin(DUPLICATED_MEDICATIONS)
    ]
    for r in inter.itertuples():
        row = _input_row(
            str(r.hospitalization_id),
            r.med_order_id,
            r.med_name,
            r.admin_dttm,
            r.admin_dttm + pd.Timedelta(minutes=1),
            np.nan,
            "",
            r.mar_action_name,
            next(orderid),
            inv,
            weights,
        )
        row.update(amount=r.med_dose, amountuom=r.med_dose_unit)
        rows.append(row)
    for label, itemid in inv.meds.items():
        d_items[itemid] = (label, "inputevents", "", "Solution")
    frame = pd.DataFrame(rows)
    frame.insert(0, "subject_id", frame["hadm_id"].map(subject_of))
    frame.insert(2, "stay_id", frame["hadm_id"].map(stay_of).astype("Int64"))
    frame = frame[frame["stay_id"].notna()]
    for col in ("starttime", "endtime", "storetime"):
        frame[col] = pd.to_datetime(frame[col], utc=True).dt.tz_localize(None)
    return frame


def _input_row(
    hosp_id, order, name, start, end, rate, rateuom, status, orderid, inv, weights
) -> dict:
    hours = (end - start).total_seconds() / 3600
    weight = float(weights.get(hosp_id, 80.0))
    amount, amountuom = np.nan, ""
    if rateuom and not pd.isna(rate):
        parts = rateuom.split("/")
        amountuom = parts[0]
        amount = rate * hours * (60 if parts[-1] == "min" else 1)
        if len(parts) == 3:
            amount *= weight
    link = int(order) if str(order).isdigit() else orderid
    return {
        "hadm_id": int(hosp_id),
        "caregiver_id": None,
        "starttime": start,
        "endtime": end,
        "storetime": end,
        "itemid": inv.meds[name],
        "amount": amount,
        "amountuom": amountuom,
        "rate": rate,
        "rateuom": rateuom or None,
        "orderid": orderid,
        "linkorderid": link,
        "ordercategoryname": None,
        "secondaryordercategoryname": None,
        "ordercomponenttypedescription": None,
        "ordercategorydescription": "Continuous Med" if rateuom else "Drug Push",
        "patientweight": weight,
        "totalamount": None,
        "totalamountuom": None,
        "isopenbag": 0,
        "continueinnextdept": 0,
        "statusdescription": status,
        "originalamount": amount,
        "originalrate": rate,
    }


# CLIF device categories (mCIDE): the device rows of respiratory_support.
DEVICE_CATEGORIES_OF_DEMO = [
    "IMV",
    "NIPPV",
    "CPAP",
    "High Flow NC",
    "Face Mask",
    "Trach Collar",
    "Nasal Cannula",
    "Room Air",
    "Other",
]


def write_facts(path: Path, mappings: Path = MAPPINGS) -> None:
    """Write the facts module (tests/windows/clif_mimic_facts.py) from the tables."""
    facts = inversion_facts_from_tables(mappings)
    lines = [
        '"""The CLIF consortium\'s MIMIC-IV -> CLIF mapping facts that the round trip',
        "inverts (tests/windows/mimic_roundtrip.py), read from its mapping tables",
        "(release 1.2.0, MIT licence, copyright 2025 CLIF Consortium;",
        "../shared/clif-mimic-mappings) by ``python -m tests.windows.mimic_roundtrip``",
        "(then ``ruff format``). Generated: edit the tables' reading, not this file.",
        'The round-trip test checks it against the tables wherever they are."""',
        "",
    ]
    for name in ("vitals", "labs", "meds", "modes"):
        lines.append(f"{name.upper()} = {facts[name]!r}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_facts(Path(__file__).with_name("clif_mimic_facts.py"))
