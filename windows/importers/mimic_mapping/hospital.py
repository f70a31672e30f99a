"""The hospital tables' values in CLIF's vocabulary: care units (transfers), sex,
discharge locations and admission types."""

from __future__ import annotations

# careunit -> CLIF location_category (consortium adt.csv).
_LOCATIONS = {
    "icu": (
        "Medical Intensive Care Unit (MICU)",
        "Cardiac Vascular Intensive Care Unit (CVICU)",
        "Medical/Surgical Intensive Care Unit (MICU/SICU)",
        "Surgical Intensive Care Unit (SICU)",
        "Trauma SICU (TSICU)",
        "Coronary Care Unit (CCU)",
        "Neuro Surgical Intensive Care Unit (Neuro SICU)",
        "Intensive Care Unit (ICU)",
    ),
    "ed": ("Emergency Department", "Emergency Department Observation"),
    "stepdown": (
        "Hematology/Oncology Intermediate",
        "Medicine/Cardiology Intermediate",
        "Cardiology Surgery Intermediate",
        "Neuro Intermediate",
        "Surgery/Vascular/Intermediate",
        "Neuro Stepdown",
        "Surgical Intermediate",
    ),
    "procedural": ("PACU",),
    "l&d": ("Labor & Delivery",),
    "psych": ("Psychiatry",),
    "other": ("Discharge Lounge", "UNKNOWN", "Unknown"),
    "ward": (
        "Medicine",
        "Med/Surg",
        "Medicine/Cardiology",
        "Neurology",
        "Transplant",
        "Hematology/Oncology",
        "Vascular",
        "Med/Surg/GYN",
        "Surgery/Trauma",
        "Med/Surg/Trauma",
        "Surgery",
        "Cardiac Surgery",
        "Obstetrics (Postpartum & Antepartum)",
        "Medical/Surgical (Gynecology)",
        "Surgery/Pancreatic/Biliary/Bariatric",
        "Obstetrics Postpartum",
        "Observation",
        "Cardiology",
        "Thoracic Surgery",
        "Obstetrics Antepartum",
        "Nursery",
        "Oncology",
        "Special Care Nursery (SCN)",
    ),
}
ADT_LOCATION_CATEGORIES: dict[str, str] = {
    unit: category for category, units in _LOCATIONS.items() for unit in units
}

# --- patients and admissions ----------------------------------------------------

# patients.gender -> CLIF sex_category.
SEX_CATEGORIES: dict[str, str] = {"F": "Female", "M": "Male"}

# admissions.discharge_location -> CLIF discharge_category (consortium
# discharge.csv); an admission without one is "Missing", as in the CLIF demo.
DISCHARGE_CATEGORIES: dict[str, str] = {
    "HOME": "Home",
    "HOME HEALTH CARE": "Home",
    "SKILLED NURSING FACILITY": "Skilled Nursing Facility (SNF)",
    "REHAB": "Acute Inpatient Rehab Facility",
    "DIED": "Expired",
    "CHRONIC/LONG TERM ACUTE CARE": "Long Term Care Hospital (LTACH)",
    "HOSPICE": "Hospice",
    "AGAINST ADVICE": "Against Medical Advice (AMA)",
    "PSYCH FACILITY": "Psychiatric Hospital",
    "ACUTE HOSPITAL": "Acute Care Hospital",
    "OTHER FACILITY": "Other",
    "ASSISTED LIVING": "Assisted Living",
    "HEALTHCARE FACILITY": "Other",
}
DISCHARGE_MISSING = "Missing"
DISCHARGE_EXPIRED = "Expired"

# admissions.admission_type -> CLIF admission_type_category (the pairs of the
# consortium's demo, which holds all nine MIMIC-IV admission types).
ADMISSION_TYPE_CATEGORIES: dict[str, str] = {
    "AMBULATORY OBSERVATION": "direct",
    "DIRECT OBSERVATION": "direct",
    "DIRECT EMER.": "ed",
    "EU OBSERVATION": "ed",
    "EW EMER.": "ed",
    "OBSERVATION ADMIT": "ed",
    "URGENT": "ed",
    "ELECTIVE": "elective",
    "SURGICAL SAME DAY ADMISSION": "elective",
}
