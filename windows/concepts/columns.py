"""What each column of compute_stay_tracks holds: label, unit, group, how the
value at an hour is obtained, and the definition it follows."""

from __future__ import annotations

from dataclasses import dataclass

# Ventilation statuses from least to most support (windows.concepts.respiratory).
# Here, with the other names of what the tracks hold, so that the pages that
# list them import no pandas.
STATUSES = ("none", "supplemental_o2", "hfnc", "niv", "invasive")
# The seven vasoactive agents of section 5 (windows.concepts.vasoactive).
VASOACTIVE_DRUGS = (
    "norepinephrine",
    "epinephrine",
    "dopamine",
    "dobutamine",
    "phenylephrine",
    "vasopressin",
    "milrinone",
)


@dataclass(frozen=True)
class ConceptColumn:
    label: str
    unit: str
    group: str
    value: str  # "number", "stage" (ordinal 0-4), "flag" (0/1), "category" (text)
    rule: str  # how the value of hour H, interval (H - 1 h, H], is obtained
    source: str  # section of /work/shared/CLINICAL_CONCEPTS.md


def _c(label, unit, group, value, rule, source) -> ConceptColumn:
    return ConceptColumn(label, unit, group, value, rule, source)


def _vasoactive(label: str, unit: str = "mcg/kg/min") -> ConceptColumn:
    return _c(label, unit, "vasoactive", "number", "active at hour end", "5")


def _sofa(organ: str) -> ConceptColumn:
    return _c(f"SOFA {organ}", "", "sofa", "stage", "24 h worst", "9")


CONCEPT_COLUMNS: dict[str, ConceptColumn] = {
    # Vitals: hourly mean of valid chartings, no carry-forward.
    "hr": _c("Heart rate", "bpm", "vitals", "number", "mean in hour", "1"),
    "sbp": _c("Systolic BP", "mmHg", "vitals", "number", "mean in hour", "1"),
    "dbp": _c("Diastolic BP", "mmHg", "vitals", "number", "mean in hour", "1"),
    "map": _c(
        "Mean arterial pressure", "mmHg", "vitals", "number", "mean in hour", "1"
    ),
    "map_min": _c("Lowest MAP", "mmHg", "vitals", "number", "min in hour", "1, 9a"),
    "rr": _c("Respiratory rate", "/min", "vitals", "number", "mean in hour", "1"),
    "spo2": _c("SpO2", "%", "vitals", "number", "mean in hour", "1"),
    "temp": _c("Temperature", "°C", "vitals", "number", "mean in hour", "1"),
    # Neurology.
    "gcs": _c(
        "GCS total",
        "",
        "neuro",
        "number",
        "min in hour; 15 when the verbal cannot be tested (see gcs_unable)",
        "2, 9a",
    ),
    "gcs_eye": _c("GCS eye", "", "neuro", "number", "of the hour's GCS", "2"),
    "gcs_verbal": _c(
        "GCS verbal", "", "neuro", "number", "of the hour's GCS; 0 = untestable", "2"
    ),
    "gcs_motor": _c("GCS motor", "", "neuro", "number", "of the hour's GCS", "2"),
    "gcs_unable": _c(
        "GCS verbal untestable (intubated, VT)",
        "",
        "neuro",
        "flag",
        "1 when the hour's GCS is 15 by convention for an untestable verbal",
        "2",
    ),
    "rass": _c("RASS", "", "neuro", "number", "last in hour", "-"),
    # Labs: latest result carried forward for a bounded time.
    "lactate": _c("Lactate", "mmol/L", "labs", "number", "latest within 12 h", "7"),
    "ph": _c("pH (arterial)", "", "labs", "number", "latest within 12 h", "7"),
    "creatinine": _c(
        "Creatinine", "mg/dL", "labs", "number", "latest within 24 h", "8"
    ),
    "platelets": _c(
        "Platelets", "10^3/µL", "labs", "number", "latest within 24 h", "8"
    ),
    "bilirubin": _c(
        "Bilirubin, total", "mg/dL", "labs", "number", "latest within 24 h", "8"
    ),
    "inr": _c("INR", "", "labs", "number", "latest within 24 h", "8"),
    # Respiratory.
    "fio2": _c(
        "FiO2 (set)", "fraction", "respiratory", "number", "latest within 4 h", "6a, 7"
    ),
    "pf_ratio": _c(
        "PaO2/FiO2",
        "mmHg",
        "respiratory",
        "number",
        "latest within 12 h; never from a venous pO2",
        "7",
    ),
    "pf_specimen_unknown": _c(
        "P/F from a pO2 of unknown specimen",
        "",
        "respiratory",
        "flag",
        "1 when the P/F shown comes from a pO2 not recorded as arterial",
        "7",
    ),
    "ventilation": _c(
        "Ventilation status",
        "",
        "respiratory",
        "category",
        "most supportive episode overlapping the hour (invasive > niv > hfnc > "
        "supplemental_o2 > none); episodes carry a status up to 14 h",
        "6b, 6c",
    ),
    # Vasoactive agents: rate active at the hour end; 0 = none recorded.
    "norepinephrine": _vasoactive("Norepinephrine"),
    "epinephrine": _vasoactive("Epinephrine"),
    "dopamine": _vasoactive("Dopamine"),
    "dobutamine": _vasoactive("Dobutamine"),
    "phenylephrine": _vasoactive("Phenylephrine"),
    "vasopressin": _vasoactive("Vasopressin", "units/h"),
    "milrinone": _vasoactive("Milrinone"),
    "ned": _c(
        "Norepinephrine equivalent",
        "mcg/kg/min",
        "vasoactive",
        "number",
        "at hour end",
        "5",
    ),
    # Renal.
    "urine_ml": _c("Urine output", "mL", "renal", "number", "sum in hour", "3"),
    "urine_ml_kg_h": _c(
        "Urine output rate (6 h)",
        "mL/kg/h",
        "renal",
        "number",
        "urine in (H-6h, H] / weight / 6",
        "3",
    ),
    "crrt_active": _c(
        "CRRT",
        "",
        "renal",
        "flag",
        "running charting (mode, circuit flow) in the hour, carried to the next "
        "charting up to 6 h later, or CRRT interval overlapping it",
        "11a, 11b",
    ),
    "aki_stage_creat": _c(
        "KDIGO stage (creatinine)", "", "renal", "stage", "max in hour", "4b"
    ),
    "aki_stage_uo": _c(
        "KDIGO stage (urine)", "", "renal", "stage", "max in hour", "4c"
    ),
    "aki_stage": _c(
        "KDIGO stage", "", "renal", "stage", "max in hour; 3 on CRRT", "4d"
    ),
    "aki_stage_smoothed": _c(
        "KDIGO stage (6 h max)", "", "renal", "stage", "max over (H-6h, H]", "4d"
    ),
    # SOFA: 24-h worst of each component (missing = 0) and their sum.
    "sofa_respiration": _sofa("respiration"),
    "sofa_coagulation": _sofa("coagulation"),
    "sofa_liver": _sofa("liver"),
    "sofa_cardiovascular": _sofa("cardiovascular"),
    "sofa_cns": _sofa("CNS"),
    "sofa_renal": _sofa("renal"),
    "sofa": _c(
        "SOFA total", "", "sofa", "number", "sum of 24 h worst components", "9c"
    ),
    # Infection.
    "antibiotic": _c("Antibiotic given", "", "infection", "flag", "any in hour", "10a"),
    "suspected_infection": _c(
        "Suspected infection",
        "",
        "infection",
        "flag",
        "1 from the onset hour on; NaN without culture data",
        "10b",
    ),
    "sepsis3": _c(
        "Sepsis-3",
        "",
        "infection",
        "flag",
        "1 from the hour both criteria are documented; NaN without culture data",
        "10c",
    ),
}
