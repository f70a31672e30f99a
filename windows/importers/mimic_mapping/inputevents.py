"""inputevents items in CLIF's vocabulary: medications (continuous, intermittent
or both), fluids and blood products, the vasoactive rate conversions, and the
medication words that name emar and prescriptions categories."""

from __future__ import annotations

from dataclasses import dataclass

from windows.importers.mimic_mapping.items import ACT, ItemMapping, _items
from windows.models import Domain

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


# One-word CLIF medication categories, matched against the first word of a
# medication name ("Vancomycin", "Heparin 5000 UNIT/ML"); other names keep an
# empty category.
MEDICATION_WORDS: dict[str, str] = {
    category: category for category in _MEDICATIONS if category.isalpha()
}
