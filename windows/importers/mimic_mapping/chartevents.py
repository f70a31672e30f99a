"""chartevents items in CLIF's vocabulary: vitals, assessments, respiratory
support, bedside blood gases, renal replacement, position and code status, and
the items categorized by their charted text."""

from __future__ import annotations

from windows.importers.mimic_mapping.items import ACT, OBS, ItemMapping, _items
from windows.models import Domain

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
