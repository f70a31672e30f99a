"""MIMIC-IV items in CLIF's vocabulary: for each itemid of chartevents, labevents,
inputevents, outputevents, procedureevents and datetimeevents, the event domain,
CLIF category, kind, target unit and conversion.

The facts come from the CLIF consortium's MIMIC-IV to CLIF mapping (release 1.2.0,
MIT licensed: vitals, labs, med_category, respiratory_support, device_category,
mode_category, dialysis, output, input, adt) and from the concept definitions in
CLINICAL_CONCEPTS.md. Items CLINICAL_CONCEPTS.md names that CLIF has no category for
get a category of this project (marked "project" below), or only their domain
where the concept reads them as a group. Items missing here keep their source label
and an empty category on import, and the import summary lists them with their row
counts; nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pandas as pd

from windows.models import Domain, EventKind

OBS = EventKind.OBSERVATION
ACT = EventKind.ACTION


@dataclass(frozen=True)
class ItemMapping:
    """Where one itemid goes: ``value = source value * factor + offset`` in ``unit``
    (an empty unit keeps the source's unit, unless ``no_unit``: CLIF gives the
    category none, as for pH and INR). ``delivery`` says, for medications,
    whether CLIF records them as continuous, intermittent or both (by the row)."""

    domain: str
    category: str = ""
    kind: str = OBS
    unit: str = ""
    factor: float = 1.0
    offset: float = 0.0
    delivery: str = ""
    no_unit: bool = False


def _items(domain: str, kind: str, table: dict) -> dict[int, ItemMapping]:
    """Expand ``{itemid: category | (category, unit[, factor[, offset]])}``; a unit
    of None means the CLIF category has no unit."""
    out = {}
    for itemid, spec in table.items():
        if isinstance(spec, str):
            spec = (spec,)
        unit = spec[1] if len(spec) > 1 else ""
        out[itemid] = ItemMapping(
            domain, spec[0], kind, unit or "", *spec[2:], no_unit=unit is None
        )
    return out


# --- chartevents ----------------------------------------------------------------

# CLIF vitals (consortium vitals.csv) in the units the CLIF importer labels
# them with; ranges and the F -> C rule in CLINICAL_CONCEPTS.md section 1,
# weights in section 3a. The Temperature Site item (224642) is not a vital: the
# importer copies its text onto the temperature charted at the same time, as
# CLIF's meas_site_name (TEMPERATURE_SITE_ITEM).
_VITALS = {
    220045: ("heart_rate", "bpm"),  # Heart Rate
    220179: ("sbp", "mmHg"),  # Non Invasive Blood Pressure systolic
    220050: ("sbp", "mmHg"),  # Arterial Blood Pressure systolic
    225309: ("sbp", "mmHg"),  # ART BP Systolic
    224167: ("sbp", "mmHg"),  # Manual Blood Pressure Systolic Left
    227243: ("sbp", "mmHg"),  # Manual Blood Pressure Systolic Right
    220180: ("dbp", "mmHg"),  # Non Invasive Blood Pressure diastolic
    220051: ("dbp", "mmHg"),  # Arterial Blood Pressure diastolic
    225310: ("dbp", "mmHg"),  # ART BP Diastolic
    224643: ("dbp", "mmHg"),  # Manual Blood Pressure Diastolic Left
    227242: ("dbp", "mmHg"),  # Manual Blood Pressure Diastolic Right
    220181: ("map", "mmHg"),  # Non Invasive Blood Pressure mean
    220052: ("map", "mmHg"),  # Arterial Blood Pressure mean
    225312: ("map", "mmHg"),  # ART BP Mean
    220277: ("spo2", "%"),  # O2 saturation pulseoxymetry
    220210: ("respiratory_rate", "/min"),  # Respiratory Rate
    223762: ("temp_c", "°C"),  # Temperature Celsius
    223761: ("temp_c", "°C", 1 / 1.8, -32 / 1.8),  # Temperature Fahrenheit
    226730: ("height_cm", "cm"),  # Height (cm)
    224639: ("weight_kg", "kg"),  # Daily Weight
    226512: ("weight_kg", "kg"),  # Admission Weight (Kg)
    226531: ("weight_kg", "kg", 0.45359237),  # Admission Weight (lbs.)
    226329: "",  # Blood Temperature CCO (C): excluded on purpose, section 1
}

# The chartevents item of the temperature's site (CLIF vitals meas_site_name).
TEMPERATURE_SITE_ITEM = 224642

# GCS components (section 2), RASS, Braden, CAM-ICU and SBT items in CLIF
# patient_assessments categories (mCIDE clif_patient_assessment_categories;
# CLIF's braden_total and cam_total are computed, not charted).
_ASSESSMENTS = {
    220739: "gcs_eye",  # GCS - Eye Opening
    223900: "gcs_verbal",  # GCS - Verbal Response ("No Response-ETT" kept as text)
    223901: "gcs_motor",  # GCS - Motor Response
    228096: "RASS",  # Richmond-RAS Scale
    224054: "braden_sensory",  # Braden Sensory Perception
    224055: "braden_moisture",  # Braden Moisture
    224056: "braden_activity",  # Braden Activity
    224057: "braden_mobility",  # Braden Mobility
    224058: "braden_nutrition",  # Braden Nutrition
    224059: "braden_friction",  # Braden Friction/Shear
    228300: "cam_mental",  # CAM-ICU MS Change
    228337: "cam_mental",  # CAM-ICU MS Change
    229326: "cam_mental",  # CAM-ICU MS Change
    228301: "cam_inattention",  # CAM-ICU Inattention
    228336: "cam_inattention",  # CAM-ICU Inattention
    229325: "cam_inattention",  # CAM-ICU Inattention
    228334: "cam_loc",  # CAM-ICU Altered LOC
    228302: "cam_loc",  # CAM-ICU RASS LOC
    228303: "cam_thinking",  # CAM-ICU Disorganized thinking
    228335: "cam_thinking",  # CAM-ICU Disorganized thinking
    229324: "cam_thinking",  # CAM-ICU Disorganized thinking
    224717: "sbt_delivery_pass_fail",  # SBT Successfully Completed
    224833: "sbt_fail_reason",  # SBT Deferred
    224716: "sbt_fail_reason",  # SBT Stopped
}

# Ventilator and oxygen settings and measured values (consortium
# respiratory_support.csv; section 6a), named as the CLIF importer names CLIF's
# columns and in its units. Which chartings are actions is decided after the
# import (windows.actions: a change of device, mode or one setting).
_RESPIRATORY_SETTINGS = {
    226732: "",  # O2 Delivery Device(s): category from the value, DEVICE_CATEGORIES
    223849: "",  # Ventilator Mode: "mode:" + category from the value, MODE_CATEGORIES
    229314: "",  # Ventilator Mode (Hamilton): likewise
    227577: "",  # BiPap Mode: likewise
    223835: ("fio2_set", "fraction"),  # Inspired O2 Fraction, see FRACTION_ITEMS
    220339: ("peep_set", "cmH2O"),  # PEEP set
    227579: ("peep_set", "cmH2O"),  # BiPap EPAP
    224684: ("tidal_volume_set", "mL"),  # Tidal Volume (set)
    224688: ("resp_rate_set", "/min"),  # Respiratory Rate (Set)
    227581: ("resp_rate_set", "/min"),  # BiPap bpm (S/T -Back up)
    223834: ("lpm_set", "L/min"),  # O2 Flow
    227287: ("lpm_set", "L/min"),  # O2 Flow (additional cannula)
    227582: ("flow_rate_set", "L/min"),  # BiPap O2 Flow
    224691: ("flow_rate_set", "L/min"),  # Flow Rate (L/min)
    224738: ("inspiratory_time_set", "s"),  # Inspiratory Time
    224701: ("pressure_support_set", "cmH2O"),  # PSV Level
    224702: ("pressure_control_set", "cmH2O"),  # PCV Level
    227580: ("peak_inspiratory_pressure_set", "cmH2O"),  # BiPap IPAP
}
_RESPIRATORY_MEASURES = {
    224700: ("peep_obs", "cmH2O"),  # Total PEEP Level
    224685: ("tidal_volume_obs", "mL"),  # Tidal Volume (observed)
    224686: ("tidal_volume_obs", "mL"),  # Tidal Volume (spontaneous)
    224421: ("tidal_volume_obs", "mL"),  # Spont Vt
    224687: ("minute_vent_obs", "L/min"),  # Minute Volume
    224697: ("mean_airway_pressure_obs", "cmH2O"),  # Mean Airway Pressure
    224695: ("peak_inspiratory_pressure_obs", "cmH2O"),  # Peak Insp. Pressure
    224696: ("plateau_pressure_obs", "cmH2O"),  # Plateau Pressure
    224690: ("resp_rate_obs", "/min"),  # Respiratory Rate (Total)
    224422: ("resp_rate_obs", "/min"),  # Spont RR
    224689: ("resp_rate_spont", "/min"),  # Respiratory Rate (spontaneous): project
}

# Blood-gas and oximetry values charted at the bedside (consortium labs.csv).
_CHART_LABS = {
    220235: ("pco2_arterial", "mmHg"),  # Arterial CO2 Pressure
    220224: ("po2_arterial", "mmHg"),  # Arterial O2 pressure
    226062: ("pco2_venous", "mmHg"),  # Venous CO2 Pressure
    223830: ("ph_arterial", None),  # PH (Arterial)
    220274: ("ph_venous", None),  # PH (Venous)
    220227: ("so2_arterial", "%"),  # Arterial O2 Saturation
    223772: ("so2_mixed_venous", "%"),  # SvO2
    225674: ("so2_mixed_venous", "%"),  # Mixed Venous O2% Sat
    227686: ("so2_central_venous", "%"),  # Central Venous O2% Sat
    227549: ("so2_central_venous", "%"),  # ScvO2 (Presep)
    226541: ("so2_central_venous", "%"),  # ScvO2 Central Venous O2% Sat
    # Bedside glucose, section 1.
    225664: ("glucose_fingerstick", "mg/dL"),  # Glucose finger stick
    220621: ("glucose_serum", "mg/dL"),  # Glucose (serum)
    226537: ("glucose_serum", "mg/dL"),  # Glucose (whole blood)
}

# Renal replacement therapy, sections 11a-11b. CLIF crrt_therapy names where it
# has them (consortium dialysis.csv), else project names; the items section 11b
# uses only to tell that some RRT is present keep just the CRRT domain.
# CLIF's flows are mL/h (blood flow charted in mL/min, x 60), as the CLIF
# importer labels them; the mode is "crrt:" + the charted mode, lower case.
_CRRT_SETTINGS = {
    227290: "",  # CRRT mode (text): category from the value, CRRT_MODE_ITEM
    224144: ("blood_flow_rate", "mL/h", 60.0),  # Blood Flow (ml/min)
    224154: ("dialysate_flow_rate", "mL/h"),  # Dialysate Rate
    228005: ("pre_filter_replacement_fluid_rate", "mL/h"),  # PBP (Prefilter) Repl.
    228006: ("post_filter_replacement_fluid_rate", "mL/h"),  # Post Filter Replacement
    224153: "crrt_replacement_rate",  # Replacement Rate: project
    224145: "crrt_heparin_dose",  # Heparin Dose (per hour): project
    228004: "crrt_citrate",  # Citrate (ACD-A): project
    225183: "crrt_fluid_removal_goal",  # Current Goal: project
}
_CRRT_MEASURES = {
    226457: ("ultrafiltration_out", "mL/h"),  # Ultrafiltrate Output (hourly)
    224146: "crrt_system_integrity",  # System Integrity (text): project
    224191: "crrt_fluid_removal",  # Hourly Patient Fluid Removal: project
    224149: "crrt_access_pressure",  # Access Pressure: project
    224150: "crrt_filter_pressure",  # Filter Pressure: project
    224151: "crrt_effluent_pressure",  # Effluent Pressure: project
    224152: "crrt_return_pressure",  # Return Pressure: project
    225976: "crrt_replacement_fluid",  # Replacement Fluid (text): project
    225977: "crrt_dialysate_fluid",  # Dialysate Fluid (text): project
    225958: "crrt_heparin_concentration",  # Heparin Concentration (units/mL)
    226499: "hemodialysis_output",  # Hemodialysis Output: project (IHD)
    227438: "rrt_volume_not_removed",  # Volume not removed: project
    225806: "pd_volume_in",  # Volume In (PD): project
    225807: "pd_volume_out",  # Volume Out (PD): project
    225810: "pd_dwell_time",  # Dwell Time (Peritoneal Dialysis): project
    225965: "pd_catheter_status",  # Peritoneal Dialysis Catheter Status: project
    225953: "pd_solution",  # Solution (Peritoneal Dialysis): project
    225951: "pd_fluid_appearance",  # Peritoneal Dialysis Fluid Appearance
    225963: "pd_catheter_type",  # Peritoneal Dialysis Catheter Type
    225952: "pd_medication",  # Medication Added #1 (Peritoneal Dialysis)
    227638: "pd_medication",  # Medication Added #2 (Peritoneal Dialysis)
    225959: "pd_medication_amount",  # Medication Added Amount #1 (PD)
    227639: "pd_medication_amount",  # Medication Added Amount #2 (PD)
    225961: "pd_medication_units",  # Medication Added Units #1 (PD)
    227640: "pd_medication_units",  # Medication Added Units #2 (PD)
    # Dialysis access and catheter care: RRT present, no category.
    224135: "",  # Dialysis Access Site
    224139: "",  # Dialysis Site Appearance
    225323: "",  # Dialysis Catheter Site Appear
    225740: "",  # Dialysis Catheter Discontinued
    225776: "",  # Dialysis Catheter Dressing Type
    225954: "",  # Dialysis Access Type
    225956: "",  # Reason for CRRT Filter Change
    227124: "",  # Dialysis Catheter Type
    227753: "",  # Dialysis Catheter Placement Confirmed by X-ray
    226118: "",  # Dialysis Catheter placed in outside facility
    227357: "",  # Dialysis Catheter Dressing Occlusive
    225725: "",  # Dialysis Catheter Tip Cultured
    224404: "",  # ART Lumen Volume
    224406: "",  # VEN Lumen Volume
}

# Position (CLIF position: prone or not_prone, by the charted value) and code
# status (CLIF code_status categories, by the charted value).
POSITION_ITEM = 224093
CODE_STATUS_ITEM = 223758
CRRT_MODE_ITEM = 227290

CHARTEVENTS: dict[int, ItemMapping] = {
    **_items(Domain.VITALS, OBS, _VITALS),
    TEMPERATURE_SITE_ITEM: ItemMapping(Domain.VITALS, "temp_site", OBS),
    # Ventilator Type is CLIF's vent_brand_name, an attribute of a respiratory
    # row that the CLIF importer does not import; kept outside the
    # respiratory domain, whose records are devices, modes and parameters.
    223848: ItemMapping(Domain.OTHER, "vent_brand_name", OBS),
    POSITION_ITEM: ItemMapping(Domain.POSITION, "", OBS),
    CODE_STATUS_ITEM: ItemMapping(Domain.CODE_STATUS, "", ACT),
    **_items(Domain.ASSESSMENTS, OBS, _ASSESSMENTS),
    **_items(Domain.RESPIRATORY, ACT, _RESPIRATORY_SETTINGS),
    **_items(Domain.RESPIRATORY, OBS, _RESPIRATORY_MEASURES),
    **_items(Domain.LABS, OBS, _CHART_LABS),
    **_items(Domain.CRRT, ACT, _CRRT_SETTINGS),
    **_items(Domain.CRRT, OBS, _CRRT_MEASURES),
}

# FiO2 is charted in percent (sometimes as a fraction); CLIF's fio2_set is a
# fraction, so values above 1 are divided by 100 (section 6a's cleaning rule
# belongs to the concept, not here).
FRACTION_ITEMS = frozenset({223835})

# O2 Delivery Device(s) value -> CLIF device_category (consortium
# device_category.csv); MIMIC's values carry trailing spaces, matched stripped.
DEVICE_CATEGORIES: dict[str, str] = {
    "Endotracheal tube": "IMV",
    "Tracheostomy tube": "IMV",
    "Nasal cannula": "Nasal Cannula",
    "Aerosol-cool": "Face Mask",
    "Face tent": "Face Mask",
    "Non-rebreather": "Face Mask",
    "Venti mask": "Face Mask",
    "Medium conc mask": "Face Mask",
    "Oxymizer": "Face Mask",
    "Trach mask": "Trach Collar",
    "High flow nasal cannula": "High Flow NC",
    "High flow neb": "High Flow NC",
    "Bipap mask": "NIPPV",
    "CPAP mask": "CPAP",
    "Other": "Other",
    "T-piece": "Other",
    "Ultrasonic neb": "Other",
    "Vapomist": "Other",
}

_MODES = {
    "Assist Control-Volume Control": (
        (223849, "CMV/ASSIST/AutoFlow"),
        (223849, "CMV/ASSIST"),
        (223849, "CMV/AutoFlow"),
        (223849, "VOL/AC"),
        (223849, "CMV"),
        (223849, "(S) CMV"),
        (229314, "(S) CMV"),
    ),
    "Pressure Control": (
        (223849, "PCV+Assist"),
        (223849, "PCV+"),
        (223849, "PCV+/PSV"),
        (223849, "PRES/AC"),
        (223849, "P-CMV"),
        (229314, "P-CMV"),
    ),
    "Pressure-Regulated Volume Control": (
        (223849, "PRVC/AC"),
        (223849, "APRV"),
        (223849, "APV (cmv)"),
        (229314, "APV (cmv)"),
    ),
    "SIMV": (
        (223849, "MMV/PSV/AutoFlow"),
        (223849, "SIMV/PSV/AutoFlow"),
        (223849, "MMV/PSV"),
        (223849, "SIMV/PSV"),
        (223849, "MMV"),
        (223849, "MMV/AutoFlow"),
        (223849, "SIMV/PRES"),
        (223849, "PRVC/SIMV"),
        (223849, "SIMV"),
        (223849, "SIMV/AutoFlow"),
        (223849, "SIMV/VOL"),
        (229314, "APV (simv)"),
        (229314, "SIMV"),
        (229314, "P-SIMV"),
    ),
    "Pressure Support/CPAP": (
        (223849, "CPAP/PSV"),
        (223849, "PSV/SBT"),
        (223849, "CPAP/PSV+ApnVol"),
        (223849, "CPAP"),
        (223849, "CPAP/PPS"),
        (223849, "CPAP/PSV+ApnPres"),
        (223849, "SPONT"),
        (223849, "CPAP/PSV+Apn TCPL"),
        (229314, "SPONT"),
        (229314, "DuoPaP"),
        (229314, "nCPAP-PS"),
    ),
    "Volume Support": ((229314, "VS"),),
    "Other": (
        (223849, "Apnea Ventilation"),
        (223849, "APRV/Biphasic+ApnVol"),
        (223849, "APRV/Biphasic+ApnPress"),
        (223849, "SYNCHRON MASTER"),
        (223849, "SYNCHRON SLAVE"),
        (229314, "ASV"),
        (229314, "NIV"),
        (229314, "APRV"),
        (229314, "NIV-ST"),
        (227577, "Spontaneous (S)"),
        (227577, "Spontaneous/Timed (S/T) (Back up)"),
        (227577, "Not applicable"),
        (227577, "Timed (T)"),
    ),
}
# (itemid, mode name) -> CLIF mode_category (consortium mode_category.csv):
# the same name means different things on different ventilators (APRV).
MODE_CATEGORIES: dict[tuple[int, str], str] = {
    key: category for category, keys in _MODES.items() for key in keys
}

# Code Status value -> CLIF code_status_category (the pairs of the consortium's
# demo; the DNAR wordings of later MIMIC-IV charting as their DNR equivalents).
CODE_STATUS_CATEGORIES: dict[str, str] = {
    "Full code": "Full",
    "DNR (do not resuscitate)": "DNR",
    "DNI (do not intubate)": "DNI_only",
    "DNR / DNI": "DNR/DNI",
    "Comfort measures only": "AND",
    "DNAR (Do Not Attempt Resuscitation)  [DNR]": "DNR",
    "DNAR (Do Not Attempt Resuscitation) [DNR]": "DNR",
    "DNAR (Do Not Attempt Resuscitation) [DNR] / DNI": "DNR/DNI",
}

MODE_ITEMS = frozenset({223849, 229314, 227577})


def value_categories(itemid: int, values: list[str]) -> list[str]:
    """The CLIF category of each charted text of a text item whose category
    depends on its value (devices, modes, position, code status, CRRT mode);
    an unknown text gives an empty category (a mode: "mode:")."""
    texts = [str(v).strip() for v in values]
    if itemid == 226732:
        return [DEVICE_CATEGORIES.get(t, "") for t in texts]
    if itemid in MODE_ITEMS:
        return ["mode:" + MODE_CATEGORIES.get((itemid, t), "") for t in texts]
    if itemid == POSITION_ITEM:
        return [
            "prone" if "prone" in t.lower() else "not_prone" if t else "" for t in texts
        ]
    if itemid == CODE_STATUS_ITEM:
        return [CODE_STATUS_CATEGORIES.get(t, "") for t in texts]
    if itemid == CRRT_MODE_ITEM:
        return ["crrt:" + t.lower() for t in texts]
    raise KeyError(itemid)


# Items named by their charted text (the CLIF *_name), as value_categories
# categorizes them.
VALUE_CATEGORY_ITEMS = frozenset(
    {226732, *MODE_ITEMS, POSITION_ITEM, CODE_STATUS_ITEM, CRRT_MODE_ITEM}
)

# --- labevents ------------------------------------------------------------------

# CLIF lab categories with their reference units (labs.csv target_uom, as the
# consortium writes them: 10*3/uL for platelets and WBC, 10^3/µL for the
# differential counts) and conversions (consortium labs.csv, rows to map);
# blood gases section 7, other labs section 8.
_LABS = {
    50862: ("albumin", "g/dL"),  # Albumin
    50863: ("alkaline_phosphatase", "U/L"),  # Alkaline Phosphatase
    50861: ("alt", "U/L"),  # Alanine Aminotransferase (ALT)
    50878: ("ast", "U/L"),  # Asparate Aminotransferase (AST)
    51146: ("basophils_percent", "%"),  # Basophils
    52069: ("basophils_absolute", "10^3/µL"),  # Absolute Basophil Count
    50885: ("bilirubin_total", "mg/dL"),  # Bilirubin, Total
    50883: ("bilirubin_conjugated", "mg/dL"),  # Bilirubin, Direct
    50884: ("bilirubin_unconjugated", "mg/dL"),  # Bilirubin, Indirect
    51006: ("bun", "mg/dL"),  # Urea Nitrogen
    52647: ("bun", "mg/dL"),  # Urea Nitrogen
    50893: ("calcium_total", "mg/dL"),  # Calcium, Total
    50808: ("calcium_ionized", "mg/dL", 4.0),  # Free Calcium (mmol/L)
    51624: ("calcium_ionized", "mg/dL", 4.0),  # Free Calcium (mmol/L)
    50882: ("bicarbonate", "mmol/L"),  # Bicarbonate (mEq/L)
    51739: ("bicarbonate", "mmol/L"),  # Total CO2 (mEq/L)
    50902: ("chloride", "mmol/L"),  # Chloride
    50806: ("chloride", "mmol/L"),  # Chloride, Whole Blood
    52535: ("chloride", "mmol/L"),  # Chloride
    50912: ("creatinine", "mg/dL"),  # Creatinine
    52024: ("creatinine", "mg/dL"),  # Creatinine, Whole Blood
    52546: ("creatinine", "mg/dL"),  # Creatinine
    50889: ("crp", "mg/L"),  # C-Reactive Protein
    51652: ("crp", "mg/L"),  # High-Sensitivity CRP
    51200: ("eosinophils_percent", "%"),  # Eosinophils
    52073: ("eosinophils_absolute", "10^3/µL"),  # Absolute Eosinophil Count
    51199: ("eosinophils_absolute", "10^3/µL", 0.001),  # Eosinophil Count (#/uL)
    51288: ("esr", "mm/Hr"),  # Sedimentation Rate
    50924: ("ferritin", "ng/mL"),  # Ferritin
    50931: ("glucose_serum", "mg/dL"),  # Glucose
    50809: ("glucose_serum", "mg/dL"),  # Glucose (blood gas)
    52569: ("glucose_serum", "mg/dL"),  # Glucose
    51222: ("hemoglobin", "g/dL"),  # Hemoglobin
    50811: ("hemoglobin", "g/dL"),  # Hemoglobin (blood gas)
    51645: ("hemoglobin", "g/dL"),  # Hemoglobin, Calculated
    50970: ("phosphate", "mg/dL"),  # Phosphate
    51237: ("inr", None),  # INR(PT)
    51675: ("inr", None),  # INR(PT)
    50813: ("lactate", "mmol/L"),  # Lactate
    53154: ("lactate", "mmol/L"),  # Lactate
    50954: ("ldh", "U/L"),  # Lactate Dehydrogenase (LD)
    51244: ("lymphocytes_percent", "%"),  # Lymphocytes
    51245: ("lymphocytes_percent", "%"),  # Lymphocytes, Percent
    51133: ("lymphocytes_absolute", "10^3/µL"),  # Absolute Lymphocyte Count
    52769: ("lymphocytes_absolute", "10^3/µL", 0.001),  # Absolute Lymphocyte (#/uL)
    50960: ("magnesium", "mg/dL"),  # Magnesium
    51254: ("monocytes_percent", "%"),  # Monocytes
    52074: ("monocytes_absolute", "10^3/µL"),  # Absolute Monocyte Count
    51253: ("monocytes_absolute", "10^3/µL", 0.001),  # Monocyte Count (#/uL)
    51256: ("neutrophils_percent", "%"),  # Neutrophils
    53164: ("neutrophils_percent", "%"),  # Neutrophils
    52075: ("neutrophils_absolute", "10^3/µL"),  # Absolute Neutrophil Count
    53159: ("neutrophils_absolute", "10^3/µL"),  # Absolute Neutrophil Count
    50818: ("pco2_arterial", "mmHg"),  # pCO2
    50821: ("po2_arterial", "mmHg"),  # pO2
    50820: ("ph_arterial", None),  # pH
    51265: ("platelet_count", "10*3/uL"),  # Platelet Count
    50971: ("potassium", "mmol/L"),  # Potassium
    50822: ("potassium", "mmol/L"),  # Potassium, Whole Blood
    52610: ("potassium", "mmol/L"),  # Potassium
    51274: ("pt", "sec"),  # PT
    51275: ("ptt", "sec"),  # PTT
    50817: ("so2_arterial", "%"),  # Oxygen Saturation (consortium: unsure)
    50983: ("sodium", "mmol/L"),  # Sodium
    50824: ("sodium", "mmol/L"),  # Sodium, Whole Blood
    52623: ("sodium", "mmol/L"),  # Sodium
    50976: ("total_protein", "g/dL"),  # Protein, Total
    51003: ("troponin_t", "ng/L", 1000.0),  # Troponin T (ng/mL)
    52642: ("troponin_i", "ng/L", 1000.0),  # Troponin I (ng/mL)
    51300: ("wbc", "10*3/uL"),  # WBC Count
    51301: ("wbc", "10*3/uL"),  # White Blood Cells
    51755: ("wbc", "10*3/uL"),  # White Blood Cells
    51756: ("wbc", "10*3/uL"),  # White Blood Cells
    # Project categories for the blood-gas panel of section 7.
    52033: "specimen_type",  # Specimen Type (text; ART. = arterial)
    50801: "aado2",  # Alveolar-arterial Gradient
    50802: "base_excess",  # Base Excess
    50803: "bicarbonate_calculated",  # Calculated Bicarbonate, Whole Blood
    50804: "total_co2_calculated",  # Calculated Total CO2
    50805: "carboxyhemoglobin",  # Carboxyhemoglobin
    50814: "methemoglobin",  # Methemoglobin
    50810: "hematocrit",  # Hematocrit, Calculated
    50815: "o2_flow_lab",  # O2 Flow
    50816: "fio2_lab",  # Oxygen (FiO2, percent)
    50819: "peep_lab",  # PEEP
    50823: "required_o2",  # Required O2
    50825: "temperature_lab",  # Temperature
    50807: "blood_gas_comments",  # Comments
    # Project categories for the labs of section 8 CLIF has no category for.
    51196: "d_dimer",  # D-Dimer
    51214: "fibrinogen",  # Fibrinogen, Functional
    51297: "thrombin_time",  # Thrombin
    51221: "hematocrit",  # Hematocrit
    51248: "mch",  # MCH
    51249: "mchc",  # MCHC
    51250: "mcv",  # MCV
    51279: "rbc",  # Red Blood Cells
    51277: "rdw",  # RDW
    52159: "rdw_sd",  # RDW-SD
    50868: "anion_gap",  # Anion Gap
    50930: "globulin",  # Globulin
    # Excluded on purpose (section 7: whole-blood electrolytes; section 8:
    # point-of-care chemistry): labs, no category.
    52390: "",
    52408: "",
    52411: "",
    52456: "",
    52502: "",
    52525: "",
    52566: "",
    52579: "",
    52603: "",
}

LABEVENTS: dict[int, ItemMapping] = _items(Domain.LABS, OBS, _LABS)

# --- inputevents ----------------------------------------------------------------

# CLIF medication categories (consortium med_category.csv, rows continuous,
# intermittent or both). Vasoactive conversions: section 5, RATE_CONVERSIONS.
_CONTINUOUS = "continuous"
_INTERMITTENT = "intermittent"
_BOTH = "both"
_MEDICATIONS: dict[str, tuple[tuple[int, str], ...]] = {
    "norepinephrine": ((221906, _CONTINUOUS),),
    "epinephrine": ((221289, _CONTINUOUS), (229617, _INTERMITTENT)),
    "phenylephrine": (
        (221749, _CONTINUOUS),
        (229630, _CONTINUOUS),
        (229632, _CONTINUOUS),
    ),
    "angiotensin": ((229764, _CONTINUOUS), (229709, _CONTINUOUS)),
    "vasopressin": ((222315, _CONTINUOUS),),
    "dopamine": ((221662, _CONTINUOUS),),
    "dobutamine": ((221653, _CONTINUOUS),),
    "milrinone": ((221986, _CONTINUOUS),),
    "propofol": ((222168, _BOTH),),
    "dexmedetomidine": ((229420, _CONTINUOUS), (225150, _CONTINUOUS)),
    "ketamine": ((221712, _BOTH),),
    "midazolam": ((221668, _BOTH),),
    "fentanyl": ((221744, _BOTH), (225942, _BOTH)),
    "hydromorphone": ((221833, _BOTH),),
    "morphine": ((225154, _BOTH),),
    "pentobarbital": ((225156, _CONTINUOUS),),
    "lorazepam": ((221385, _BOTH),),
    "furosemide": ((221794, _BOTH), (228340, _CONTINUOUS)),
    "bumetanide": ((229639, _BOTH),),
    "heparin": (
        (225975, _INTERMITTENT),
        (225152, _BOTH),
        (229597, _BOTH),
        (230044, _CONTINUOUS),
    ),
    "argatroban": ((225147, _BOTH),),
    "eptifibatide": ((225151, _BOTH),),
    "amiodarone": (
        (221347, _BOTH),
        (228339, _CONTINUOUS),
        (229654, _CONTINUOUS),
        (230034, _CONTINUOUS),
    ),
    "lidocaine": ((225945, _BOTH),),
    "nicardipine": ((222042, _CONTINUOUS), (229624, _CONTINUOUS)),
    "clevidipine": ((229234, _CONTINUOUS),),
    "nitroprusside": ((222051, _CONTINUOUS),),
    "nitroglycerin": ((222056, _CONTINUOUS),),
    "esmolol": ((221429, _CONTINUOUS),),
    "diltiazem": ((221468, _BOTH),),
    "labetalol": ((225153, _BOTH),),
    "procainamide": ((222151, _CONTINUOUS),),
    "adenosine": ((221282, _INTERMITTENT),),
    "cisatracurium": ((221555, _BOTH),),
    "vecuronium": ((222062, _BOTH),),
    "rocuronium": ((229233, _BOTH),),
    "treprostinil": ((229066, _CONTINUOUS),),
    "epoprostenol": ((229760, _CONTINUOUS),),
    "octreotide": ((225155, _CONTINUOUS),),
    "pantoprazole": ((225910, _BOTH),),
    "esomeprazole": ((229615, _INTERMITTENT),),
    "insulin": (
        (223258, _BOTH),
        (223262, _INTERMITTENT),
        (223260, _INTERMITTENT),
        (223259, _INTERMITTENT),
        (229299, _INTERMITTENT),
        (223257, _INTERMITTENT),
        (223261, _INTERMITTENT),
        (229619, _INTERMITTENT),
    ),
    "sodium bicarbonate": ((220995, _CONTINUOUS), (227533, _INTERMITTENT)),
    "tpn": ((225916, _CONTINUOUS), (225917, _CONTINUOUS)),
    "magnesium": (
        (222011, _INTERMITTENT),
        (227523, _INTERMITTENT),
        (227524, _CONTINUOUS),
    ),
    # mCIDE categories (the consortium's demo): D5W, and dextrose for the others.
    "dextrose_in_water_d5w": ((220949, _BOTH),),
    "dextrose": (
        (220950, _BOTH),
        (220952, _INTERMITTENT),
        (225947, _CONTINUOUS),
        (228140, _CONTINUOUS),
        (228142, _CONTINUOUS),
        (228141, _CONTINUOUS),
    ),
    "aminocaproic": ((229058, _CONTINUOUS),),
    "aminophylline": ((221342, _CONTINUOUS),),
    "naloxone": ((222021, _BOTH),),
    "acetaminophen": ((228315, _BOTH),),
    "alteplase": ((221319, _CONTINUOUS),),
    "bivalirudin": ((225148, _CONTINUOUS), (229781, _CONTINUOUS)),
    "albumin_infusion": ((220864, _CONTINUOUS), (220862, _CONTINUOUS)),
    "sodium chloride": (
        (225158, _BOTH),
        (225159, _BOTH),
        (225161, _BOTH),
        (228341, _BOTH),
    ),
    "diazepam": ((221623, _INTERMITTENT),),
    # Antimicrobials, all intermittent.
    **{
        category: ((itemid, _INTERMITTENT),)
        for category, itemid in (
            ("acyclovir", 225837),
            ("amikacin", 225840),
            ("ampicillin", 225842),
            ("ampicillin_sulbactam", 225843),
            ("azithromycin", 225845),
            ("aztreonam", 225847),
            ("caspofungin", 225848),
            ("cefazolin", 225850),
            ("cefepime", 225851),
            ("ceftaroline", 229587),
            ("ceftazidime", 225853),
            ("ceftriaxone", 225855),
            ("ciprofloxacin", 225859),
            ("clindamycin", 225860),
            ("colistin", 225862),
            ("daptomycin", 225863),
            ("doxycycline", 225865),
            ("ertapenem", 229061),
            ("erythromycin", 225866),
            ("fluconazole", 225869),
            ("foscarnet", 225871),
            ("gentamicin", 225875),
            ("imipenem", 225876),
            ("levofloxacin", 225879),
            ("linezolid", 225881),
            ("meropenem", 225883),
            ("metronidazole", 225884),
            ("micafungin", 225885),
            ("moxifloxacin", 225886),
            ("nafcillin", 225888),
            ("penicillin", 225890),
            ("piperacillin_tazobactam", 225893),
            ("quinupristin_dalfopristin", 225900),
            ("rifampin", 225898),
            ("tigecycline", 229064),
            ("tobramycin", 225902),
            ("vancomycin", 225798),
            ("voriconazole", 225905),
        )
    },
}


def _medications() -> dict[int, ItemMapping]:
    out = {}
    for category, items in _MEDICATIONS.items():
        for itemid, delivery in items:
            domain = (
                Domain.MED_INTERMITTENT
                if delivery == _INTERMITTENT
                else Domain.MED_CONTINUOUS
            )
            out[itemid] = ItemMapping(domain, category, ACT, delivery=delivery)
    return out


# Fluids and blood products (section 12c) in CLIF input categories; the CRRT
# electrolyte infusions of section 11b as renal replacement fluids.
_FLUIDS = {
    225828: "iv_crystalloid",  # LR
    225823: "iv_crystalloid",  # D5 1/2NS
    225825: "iv_crystalloid",  # D5NS
    225827: "iv_crystalloid",  # D5LR
    225941: "iv_crystalloid",  # D5 1/4NS
    226364: "iv_crystalloid",  # OR Crystalloid Intake
    226375: "iv_crystalloid",  # PACU Crystalloid Intake
    225174: "iv_colloid",  # Hetastarch (Hespan) 6%
    225168: "blood_products",  # Packed Red Blood Cells
    220970: "blood_products",  # Fresh Frozen Plasma
    225170: "blood_products",  # Platelets
    225171: "blood_products",  # Cryoprecipitate
    226368: "blood_products",  # OR Packed RBC Intake
    227070: "blood_products",  # PACU Packed RBC Intake
    227536: "renal_replacement_fluids",  # KCl (CRRT)
    227525: "renal_replacement_fluids",  # Calcium Gluconate (CRRT)
}

INPUTEVENTS: dict[int, ItemMapping] = {
    **_items(Domain.INPUT, ACT, _FLUIDS),
    **_medications(),
}


@dataclass(frozen=True)
class RateConversion:
    """A rate becomes ``rate * factor`` (divided by the row's patientweight when
    ``per_weight``) in ``unit``."""

    unit: str
    factor: float = 1.0
    per_weight: bool = False
    weight_one_unchanged: bool = False


# (medication category, source rateuom) -> conversion, CLINICAL_CONCEPTS.md
# section 5. Norepinephrine rows in mg/kg/min with patientweight 1 keep their
# rate (taken as mcg/kg/min), as mimic-code does.
RATE_CONVERSIONS: dict[tuple[str, str], RateConversion] = {
    ("norepinephrine", "mg/kg/min"): RateConversion(
        "mcg/kg/min", 1000.0, weight_one_unchanged=True
    ),
    ("phenylephrine", "mcg/min"): RateConversion("mcg/kg/min", 1.0, per_weight=True),
    ("vasopressin", "units/min"): RateConversion("units/hour", 60.0),
}

# --- outputevents ---------------------------------------------------------------

# Urine output (section 3; consortium output.csv): CLIF output categories of the
# urine group. GU irrigant in is an input (consortium input.csv) that the urine
# output concept subtracts.
_URINE = {
    226559: "indwelling_urinary_catheter",  # Foley
    226560: "urethral",  # Void
    226561: "external_urinary_catheter",  # Condom Cath
    226584: "urostomy",  # Ileoconduit
    226563: "suprapubic_catheter",  # Suprapubic
    226564: "nephrostomy",  # R Nephrostomy
    226565: "nephrostomy",  # L Nephrostomy
    226567: "urethral",  # Straight Cath
    226557: "urinary_other",  # R Ureteral Stent
    226558: "urinary_other",  # L Ureteral Stent
    227489: "indwelling_urinary_catheter",  # GU Irrigant/Urine Volume Out
}
URINE_OUTPUT_CATEGORIES = frozenset(_URINE.values())

OUTPUTEVENTS: dict[int, ItemMapping] = {
    **_items(Domain.OUTPUT, OBS, {k: (v, "mL") for k, v in _URINE.items()}),
    227488: ItemMapping(
        Domain.INPUT, "flush_irrigation_urine", OBS, "mL"
    ),  # GU Irrigant In
}

# --- procedureevents ------------------------------------------------------------

_DIALYSIS_PROCEDURES = {  # section 11b
    225441: "hemodialysis",  # Hemodialysis (IHD)
    225802: "crrt",  # Dialysis - CRRT
    225803: "cvvhd",  # Dialysis - CVVHD
    225805: "peritoneal_dialysis",  # Peritoneal Dialysis
    225809: "cvvhdf",  # Dialysis - CVVHDF
    225955: "scuf",  # Dialysis - SCUF
    224270: "dialysis_catheter",  # Dialysis Catheter
    225436: "crrt_filter_change",  # CRRT Filter Change
}
_LINES = {  # section 12a: the line is in place from starttime to endtime
    227719: "ava_line",
    225752: "arterial_line",
    224269: "cco_pac",
    224267: "cordis_introducer",
    224272: "iabp_line",
    226124: "icp_catheter",
    228169: "impella_line",
    225202: "indwelling_port",
    228286: "intraosseous_device",
    225204: "midline",
    224263: "multi_lumen",
    224560: "pa_catheter",
    224264: "picc_line",
    225203: "pheresis_catheter",
    224273: "presep_catheter",
    225789: "sheath",
    225761: "sheath_insertion",
    228201: "tandem_heart_access_line",
    228202: "tandem_heart_return_line",
    224268: "trauma_line",
    225199: "triple_introducer",
    225315: "tunneled_line",
    225205: "ric_line",
}
_AIRWAY_PROCEDURES = {  # section 12b; tracheostomy from respiratory_support.csv
    224385: "intubation",
    227194: "extubation",
    225468: "unplanned_extubation_patient",
    225477: "unplanned_extubation_non_patient",
    225448: "tracheostomy",  # Percutaneous Tracheostomy
    226237: "tracheostomy",  # Open Tracheostomy
    225792: "invasive_ventilation",
    225794: "noninvasive_ventilation",
}

PROCEDUREEVENTS: dict[int, ItemMapping] = {
    **_items(Domain.CRRT, ACT, _DIALYSIS_PROCEDURES),
    **_items(Domain.PROCEDURES, ACT, _LINES),
    **_items(Domain.RESPIRATORY, ACT, _AIRWAY_PROCEDURES),
    # Epoprostenol (Inhaled): continuous medication (consortium, Sep 2025).
    229366: ItemMapping(
        Domain.MED_CONTINUOUS, "epoprostenol", ACT, delivery=_CONTINUOUS
    ),
}

# --- datetimeevents -------------------------------------------------------------

DATETIMEEVENTS: dict[int, ItemMapping] = _items(
    Domain.CRRT,
    OBS,
    {  # dialysis catheter dates (consortium dialysis.csv): RRT present
        225318: "",  # Dialysis Catheter Cap Change
        225319: "",  # Dialysis Catheter Change over Wire Date
        225321: "",  # Dialysis Catheter Dressing Change
        225322: "",  # Dialysis Catheter Insertion Date
        225324: "",  # Dialysis CatheterTubing Change
        225128: "",  # Last dialysis
    },
)

# --- transfers ------------------------------------------------------------------

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

# --- medication names (emar, prescriptions) -------------------------------------

# One-word CLIF medication categories, matched against the first word of a
# medication name ("Vancomycin", "Heparin 5000 UNIT/ML"); other names keep an
# empty category.
MEDICATION_WORDS: dict[str, str] = {
    category: category for category in _MEDICATIONS if category.isalpha()
}

ITEM_TABLES: dict[str, dict[int, ItemMapping]] = {
    "chartevents": CHARTEVENTS,
    "labevents": LABEVENTS,
    "inputevents": INPUTEVENTS,
    "outputevents": OUTPUTEVENTS,
    "procedureevents": PROCEDUREEVENTS,
    "datetimeevents": DATETIMEEVENTS,
}


@cache
def items_frame(table: str) -> pd.DataFrame:
    """The mapping of one source table as a frame indexed by itemid, for
    vectorized lookups: domain, category, kind, unit, factor, offset, delivery."""
    items = ITEM_TABLES[table]
    frame = pd.DataFrame(
        [vars(m) for m in items.values()], index=pd.Index(list(items), name="itemid")
    )
    frame["domain"] = frame["domain"].map(str)
    frame["kind"] = frame["kind"].map(str)
    return frame.astype({"factor": "float64", "offset": "float64"})
