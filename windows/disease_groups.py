"""Disease group of a stay from an ICD-9-CM or ICD-10-CM diagnosis code.

Groups follow the ICD chapters, with sepsis codes taken out as their own group,
as in the RealICU paper (Figure 8: "rule-based grouping based on ICD chapters,
with sepsis-related codes grouped into a dedicated Sepsis and Severe Infection
category"). Chapter boundaries are those of ICD-9-CM and ICD-10-CM.
"""

from __future__ import annotations

from windows.models import DiseaseGroup as G

# Sepsis codes. ICD-10-CM: A40 streptococcal and A41 other sepsis, R65.2 severe
# sepsis, R57.2 septic shock, T81.12 postprocedural septic shock, O85 puerperal
# sepsis, A02.1/A22.7/A26.7/A32.7/A42.7/B37.7 organism-specific sepsis, P36
# neonatal sepsis. ICD-9-CM: 038 septicemia, 995.91/995.92 (severe) sepsis,
# 785.52 septic shock, 003.1/020.2/036.2/054.5/112.5 organism-specific
# septicemia, 771.81 newborn septicemia.
_SEPSIS_ICD10 = (
    "A40",
    "A41",
    "R652",
    "R572",
    "T8112",
    "O85",
    "A021",
    "A227",
    "A267",
    "A327",
    "A427",
    "B377",
    "P36",
)
_SEPSIS_ICD9 = (
    "038",
    "99591",
    "99592",
    "78552",
    "0031",
    "0202",
    "0362",
    "0545",
    "1125",
    "77181",
)

# ICD-9-CM chapters by the numeric value of the three-digit category.
_ICD9_CHAPTERS = [
    (1, 139, G.INFECTIOUS),
    (140, 239, G.ONCOLOGY),
    (240, 279, G.ENDOCRINE),
    (280, 289, G.HEMATOLOGIC),
    (290, 319, G.PSYCHIATRIC),
    (320, 359, G.NEUROLOGICAL),
    (360, 389, G.EYE_EAR),
    (390, 459, G.CARDIOVASCULAR),
    (460, 519, G.RESPIRATORY),
    (520, 579, G.GI_HEPATIC),
    (580, 629, G.RENAL_GU),
    (630, 679, G.PREGNANCY),
    (680, 709, G.SKIN),
    (710, 739, G.MUSCULOSKELETAL),
    (740, 759, G.CONGENITAL),
    (760, 779, G.PREGNANCY),
    (780, 799, G.SIGNS_SYMPTOMS),
    (800, 999, G.INJURY_POISONING),
]

# ICD-10-CM chapters by the first three characters (letter + two digits).
_ICD10_CHAPTERS = [
    ("A00", "B99", G.INFECTIOUS),
    ("C00", "D49", G.ONCOLOGY),
    ("D50", "D89", G.HEMATOLOGIC),
    ("E00", "E89", G.ENDOCRINE),
    ("F01", "F99", G.PSYCHIATRIC),
    ("G00", "G99", G.NEUROLOGICAL),
    ("H00", "H95", G.EYE_EAR),
    ("I00", "I99", G.CARDIOVASCULAR),
    ("J00", "J99", G.RESPIRATORY),
    ("K00", "K95", G.GI_HEPATIC),
    ("L00", "L99", G.SKIN),
    ("M00", "M99", G.MUSCULOSKELETAL),
    ("N00", "N99", G.RENAL_GU),
    ("O00", "O9A", G.PREGNANCY),
    ("P00", "P96", G.PREGNANCY),
    ("Q00", "Q99", G.CONGENITAL),
    ("R00", "R99", G.SIGNS_SYMPTOMS),
    ("S00", "T88", G.INJURY_POISONING),
    ("V00", "Y99", G.INJURY_POISONING),
    ("Z00", "Z99", G.OTHER),
    ("U00", "U99", G.OTHER),
]


def normalize_code(code: str) -> str:
    return "".join(ch for ch in str(code).upper() if ch.isalnum())


def disease_group(code: str, version: int | None) -> G:
    """The group of one diagnosis code; ``version`` is 9 or 10."""
    code = normalize_code(code)
    if not code or version not in (9, 10):
        return G.UNKNOWN
    if version == 10:
        if code.startswith(_SEPSIS_ICD10):
            return G.SEPSIS
        head = code[:3]
        for low, high, group in _ICD10_CHAPTERS:
            if low <= head <= high:
                return group
        return G.UNKNOWN
    if code.startswith(_SEPSIS_ICD9):
        return G.SEPSIS
    if code.startswith("V"):
        return G.OTHER
    if code.startswith("E"):
        return G.INJURY_POISONING
    try:
        category = int(code[:3])
    except ValueError:
        return G.UNKNOWN
    for low, high, group in _ICD9_CHAPTERS:
        if low <= category <= high:
            return group
    return G.UNKNOWN


def first_ranked(diagnoses: list[dict]) -> dict | None:
    """The diagnosis that stands for the admission: the lowest rank (primary first)."""
    ranked = [d for d in diagnoses if d.get("code")]
    if not ranked:
        return None
    return min(ranked, key=lambda d: (d.get("rank") is None, d.get("rank") or 0))
