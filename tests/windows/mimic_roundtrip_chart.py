"""The chartevents of the MIMIC-IV folder that tests/windows/mimic_roundtrip.py
writes from the CLIF demo: vitals, bedside blood gases (the other labs go to
labevents), respiratory support, assessments, position, code status and CRRT,
each as the MIMIC-IV item the consortium maps to its CLIF category, and the
d_items that name them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.windows.mimic_roundtrip_hosp import naive

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


def _text_col(values) -> pd.Series:
    s = pd.Series(values)
    return s.astype("object").where(s.notna(), None)


class ChartEvents:
    """The chartevents rows gathered table by table, and the d_items entry of every
    item charted (or given: the inputevents add theirs)."""

    def __init__(self, subject_of: pd.Series, stay_of: pd.Series) -> None:
        self.subject_of, self.stay_of = subject_of, stay_of
        self.parts: list[pd.DataFrame] = []
        # itemid -> label, linksto, unit, type
        self.d_items: dict[int, tuple[str, str, str, str]] = {}

    def chart(self, hosp_ids, time, itemid, value, valuenum, valueuom, storetime=None):
        n = len(hosp_ids)
        hadm = pd.Series(hosp_ids).astype(str).astype("int64").to_numpy()
        frame = pd.DataFrame(
            {
                "subject_id": pd.Series(hadm).map(self.subject_of).to_numpy(),
                "hadm_id": hadm,
                "stay_id": pd.Series(hadm).map(self.stay_of).astype("Int64").to_numpy(),
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
        self.parts.append(frame)

    def text(self, rows, item, column, time_column="recorded_dttm"):
        """One Text item (itemid, label) charted from a CLIF text column."""
        self.chart(
            rows["hospitalization_id"],
            rows[time_column],
            item[0],
            rows[column].to_numpy(),
            np.nan,
            None,
        )
        self.d_items[item[0]] = (item[1], "chartevents", "", "Text")

    def numbers(self, rows, values, itemid, label, unit):
        """One Numeric item charted from CLIF values already in the source unit."""
        self.chart(
            rows["hospitalization_id"],
            rows["recorded_dttm"],
            itemid,
            values.map(lambda v: f"{v:.10g}"),
            values.to_numpy(),
            unit or None,
        )
        self.d_items[itemid] = (label, "chartevents", unit, "Numeric")

    def frame(self) -> pd.DataFrame:
        """chartevents: the rows of the admissions with an ICU stay, in time order
        per subject."""
        chartevents = pd.concat(self.parts, ignore_index=True)
        chartevents["stay_id"] = chartevents["stay_id"].astype("Int64")
        chartevents = chartevents[chartevents["hadm_id"].isin(self.stay_of.index)]
        return chartevents.sort_values(
            ["subject_id", "charttime", "itemid"], kind="stable"
        )

    def d_items_frame(self) -> pd.DataFrame:
        d_items = self.d_items
        return pd.DataFrame(
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
        )


def chart_vitals(folder, charts: ChartEvents, inv) -> pd.DataFrame:
    """Vitals, with the temperature site as its own item at the same charttime;
    returns the CLIF vitals."""
    vitals = folder.read("vitals")
    item = vitals["vital_name"].map(lambda n: inv.vitals[n][0])
    uom = vitals["vital_name"].map(lambda n: inv.vitals[n][1])
    value = vitals["vital_value"].astype("float64")
    value = value.where(item != 223761, value * 1.8 + 32)
    value = value.where(item != 226531, value / 0.45359237)
    charts.chart(
        vitals["hospitalization_id"],
        vitals["recorded_dttm"],
        item.to_numpy(),
        value.map(lambda v: f"{v:.10g}"),
        value.to_numpy(),
        uom.to_numpy(),
    )
    for name, (itemid, unit) in inv.vitals.items():
        charts.d_items[itemid] = (name, "chartevents", unit, "Numeric")
    site = vitals[vitals["meas_site_name"].notna()]
    charts.text(site, TEMPERATURE_SITE_ITEM, "meas_site_name")
    return vitals


def chart_labs(folder, charts: ChartEvents, inv) -> None:
    """Labs: labevents (and d_labitems), or chartevents for the bedside blood
    gases; the source value is the CLIF value divided by the consortium's
    multiplier."""
    labs = folder.read("labs")
    keys = list(zip(labs["lab_name"], labs["lab_category"]))
    spec = [inv.labs[k] for k in keys]
    itemid = np.array([s[0] for s in spec])
    unit = np.array([s[1] for s in spec], dtype=object)
    factor = np.array([s[2] for s in spec])
    in_chart = np.array([s[3] for s in spec])
    valuenum = labs["lab_value_numeric"].to_numpy(dtype="float64") / factor
    lab_value = labs["lab_value"].astype("object")
    c = labs[in_chart]
    charts.chart(
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
    folder.write(
        pd.DataFrame(
            {
                "labevent_id": 1 + np.arange(len(le)),
                "subject_id": hadm.map(charts.subject_of),
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
            charts.d_items[itemid_] = (label, "chartevents", unit_, "Numeric")
        else:
            d_lab.setdefault(itemid_, (label, fluid or "Blood"))
    folder.write(
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


def chart_respiratory(folder, charts: ChartEvents, inv) -> None:
    """Respiratory support: one chartevents row per charted column."""
    resp = folder.read("respiratory_support")
    dev = resp[resp["device_name"].notna()]
    charts.text(dev, DEVICE_ITEM, "device_name")
    brand = resp[resp["vent_brand_name"].notna()]
    charts.text(brand, VENT_BRAND_ITEM, "vent_brand_name")
    mode = resp[resp["mode_name"].notna()]
    mode_item = [
        inv.mode_item(n, str(b))
        for n, b in zip(mode["mode_name"], mode["vent_brand_name"])
    ]
    charts.chart(
        mode["hospitalization_id"],
        mode["recorded_dttm"],
        np.array(mode_item),
        mode["mode_name"].to_numpy(),
        np.nan,
        None,
    )
    for itemid_, label in MODE_ITEMS.items():
        charts.d_items[itemid_] = (label, "chartevents", "", "Text")
    for col, (itemid_, label, unit_) in RESPIRATORY_ITEMS.items():
        has = resp[resp[col].notna()]
        values = has[col].astype("float64") * (100 if col == "fio2_set" else 1)
        charts.numbers(has, values, itemid_, label, unit_)


def chart_assessments(folder, charts: ChartEvents) -> None:
    """Assessments (the consortium's computed totals have no MIMIC-IV item)."""
    ass = folder.read("patient_assessments")
    ass = ass[~ass["assessment_category"].isin(COMPUTED_ASSESSMENTS)]
    for name, group in ass.groupby("assessment_name"):
        itemid_, label, ptype = ASSESSMENT_ITEMS[name]
        text = group["categorical_value"].astype("object")
        text = text.where(text.notna(), group["text_value"])
        num = group["numerical_value"].astype("float64")
        text = text.where(
            text.notna(), num.map(lambda v: None if pd.isna(v) else f"{v:g}")
        )
        charts.chart(
            group["hospitalization_id"],
            group["recorded_dttm"],
            itemid_,
            text.to_numpy(),
            num.to_numpy(),
            None,
        )
        charts.d_items[itemid_] = (label, "chartevents", "", ptype)


def chart_code_status(folder, charts: ChartEvents, hosp: pd.DataFrame) -> None:
    """Code status is charted per patient in CLIF: each record goes to the
    admission whose hospital stay holds it (as the CLIF importer places it)."""
    cs = folder.read("code_status")
    cs["patient_id"] = cs["patient_id"].astype(str)
    cs_hosp = cs.merge(
        hosp[["patient_id", "hospitalization_id", "admission_dttm", "discharge_dttm"]],
        on="patient_id",
    )
    cs_hosp = cs_hosp[
        (cs_hosp["start_dttm"] >= cs_hosp["admission_dttm"])
        & (cs_hosp["start_dttm"] <= cs_hosp["discharge_dttm"])
    ]
    cs_hosp = cs_hosp[
        cs_hosp["hospitalization_id"].astype("int64").isin(charts.stay_of.index)
    ]
    charts.text(cs_hosp, CODE_STATUS_ITEM, "code_status_name", "start_dttm")


def chart_crrt(folder, charts: ChartEvents) -> None:
    crrt = folder.read("crrt_therapy")
    m = crrt[crrt["crrt_mode_name"].notna()]
    charts.text(m, CRRT_MODE_ITEM, "crrt_mode_name")
    for col, (itemid_, label, unit_, per_unit) in CRRT_ITEMS.items():
        has = crrt[crrt[col].notna()]
        values = has[col].astype("float64") / per_unit
        charts.numbers(has, values, itemid_, label, unit_)
