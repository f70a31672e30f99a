"""outputevents, procedureevents and datetimeevents items in CLIF's vocabulary:
urine output, dialysis, lines and airway procedures, charted dates."""

from __future__ import annotations

from windows.importers.mimic_mapping.inputevents import _CONTINUOUS
from windows.importers.mimic_mapping.items import ACT, OBS, ItemMapping, _items
from windows.models import Domain

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
