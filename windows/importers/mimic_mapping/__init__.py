"""MIMIC-IV items in CLIF's vocabulary: for each itemid of chartevents, labevents,
inputevents, outputevents, procedureevents and datetimeevents, the event domain,
CLIF category, kind, target unit and conversion; one module per source table.

The facts come from the CLIF consortium's MIMIC-IV to CLIF mapping (release 1.2.0,
MIT licensed: vitals, labs, med_category, respiratory_support, device_category,
mode_category, dialysis, output, input, adt) and from the concept definitions in
CLINICAL_CONCEPTS.md. Items CLINICAL_CONCEPTS.md names that CLIF has no category for
get a category of this project (marked "project" below), or only their domain
where the concept reads them as a group. Items missing here keep their source label
and an empty category on import, and the import summary lists them with their row
counts; nothing is dropped silently.
"""

from windows.importers.mimic_mapping.chartevents import (
    CHARTEVENTS,
    CODE_STATUS_CATEGORIES,
    CODE_STATUS_ITEM,
    CRRT_MODE_ITEM,
    DEVICE_CATEGORIES,
    FRACTION_ITEMS,
    MODE_CATEGORIES,
    MODE_ITEMS,
    POSITION_ITEM,
    TEMPERATURE_SITE_ITEM,
    VALUE_CATEGORY_ITEMS,
    value_categories,
)
from windows.importers.mimic_mapping.hospital import (
    ADMISSION_TYPE_CATEGORIES,
    ADT_LOCATION_CATEGORIES,
    DISCHARGE_CATEGORIES,
    DISCHARGE_EXPIRED,
    DISCHARGE_MISSING,
    SEX_CATEGORIES,
)
from windows.importers.mimic_mapping.inputevents import (
    INPUTEVENTS,
    MEDICATION_WORDS,
    RATE_CONVERSIONS,
    RateConversion,
)
from windows.importers.mimic_mapping.items import ACT, OBS, ItemMapping
from windows.importers.mimic_mapping.labevents import LABEVENTS
from windows.importers.mimic_mapping.lookup import ITEM_TABLES, items_frame
from windows.importers.mimic_mapping.outputs_procedures import (
    DATETIMEEVENTS,
    OUTPUTEVENTS,
    PROCEDUREEVENTS,
    URINE_OUTPUT_CATEGORIES,
)

__all__ = [
    "OBS",
    "ACT",
    "ItemMapping",
    "TEMPERATURE_SITE_ITEM",
    "POSITION_ITEM",
    "CODE_STATUS_ITEM",
    "CRRT_MODE_ITEM",
    "CHARTEVENTS",
    "FRACTION_ITEMS",
    "DEVICE_CATEGORIES",
    "MODE_CATEGORIES",
    "CODE_STATUS_CATEGORIES",
    "MODE_ITEMS",
    "value_categories",
    "VALUE_CATEGORY_ITEMS",
    "LABEVENTS",
    "INPUTEVENTS",
    "RateConversion",
    "RATE_CONVERSIONS",
    "MEDICATION_WORDS",
    "URINE_OUTPUT_CATEGORIES",
    "OUTPUTEVENTS",
    "PROCEDUREEVENTS",
    "DATETIMEEVENTS",
    "ADT_LOCATION_CATEGORIES",
    "SEX_CATEGORIES",
    "DISCHARGE_CATEGORIES",
    "DISCHARGE_MISSING",
    "DISCHARGE_EXPIRED",
    "ADMISSION_TYPE_CATEGORIES",
    "ITEM_TABLES",
    "items_frame",
]
