"""Text normalization before semantic matching (REALICU_SPEC section 5).

Two free-text items that differ only in case, spacing, trailing punctuation or a
common ICU abbreviation normalize to the same string, so they share one cached
embedding and match exactly.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache

# Built-in ICU abbreviations, matched as whole words whatever their case. Admins
# add more (or override these) through ``evaluation.models.Abbreviation``.
# Deliberately left out: abbreviations that are also everyday words or clash
# with another common ICU meaning ("HIT", "SBP", "IV", "NA", "CT").
DEFAULT_ABBREVIATIONS: dict[str, str] = {
    "ABG": "arterial blood gas",
    "ABX": "antibiotics",
    "AF": "atrial fibrillation",
    "AFIB": "atrial fibrillation",
    "A-FIB": "atrial fibrillation",
    "AKI": "acute kidney injury",
    "ARDS": "acute respiratory distress syndrome",
    "BIPAP": "bilevel positive airway pressure",
    "BP": "blood pressure",
    "CAP": "community-acquired pneumonia",
    "CHF": "congestive heart failure",
    "CKD": "chronic kidney disease",
    "COPD": "chronic obstructive pulmonary disease",
    "CPAP": "continuous positive airway pressure",
    "CPR": "cardiopulmonary resuscitation",
    "CRRT": "continuous renal replacement therapy",
    "CVC": "central venous catheter",
    "DIC": "disseminated intravascular coagulation",
    "DKA": "diabetic ketoacidosis",
    "DNR": "do not resuscitate",
    "DVT": "deep vein thrombosis",
    "ECMO": "extracorporeal membrane oxygenation",
    "ESRD": "end-stage renal disease",
    "ETT": "endotracheal tube",
    "FFP": "fresh frozen plasma",
    "FIO2": "fraction of inspired oxygen",
    "GCS": "glasgow coma scale",
    "GI": "gastrointestinal",
    "GIB": "gastrointestinal bleeding",
    "GOC": "goals of care",
    "HAP": "hospital-acquired pneumonia",
    "HFNC": "high-flow nasal cannula",
    "HR": "heart rate",
    "HTN": "hypertension",
    "IABP": "intra-aortic balloon pump",
    "ICH": "intracranial hemorrhage",
    "ICP": "intracranial pressure",
    "ICU": "intensive care unit",
    "IVF": "intravenous fluids",
    "MAP": "mean arterial pressure",
    "MI": "myocardial infarction",
    "MODS": "multiple organ dysfunction syndrome",
    "MV": "mechanical ventilation",
    "NE": "norepinephrine",
    "NIV": "non-invasive ventilation",
    "NPO": "nothing by mouth",
    "NSTEMI": "non-st-elevation myocardial infarction",
    "PE": "pulmonary embolism",
    "PEEP": "positive end-expiratory pressure",
    "PNA": "pneumonia",
    "PRBC": "packed red blood cells",
    "ROSC": "return of spontaneous circulation",
    "RRT": "renal replacement therapy",
    "SAH": "subarachnoid hemorrhage",
    "SBT": "spontaneous breathing trial",
    "SIRS": "systemic inflammatory response syndrome",
    "SOFA": "sequential organ failure assessment",
    "SPO2": "oxygen saturation",
    "STEMI": "st-elevation myocardial infarction",
    "SVT": "supraventricular tachycardia",
    "TBI": "traumatic brain injury",
    "TPN": "total parenteral nutrition",
    "UGIB": "upper gastrointestinal bleeding",
    "UOP": "urine output",
    "UTI": "urinary tract infection",
    "VAP": "ventilator-associated pneumonia",
    "VF": "ventricular fibrillation",
    "VT": "ventricular tachycardia",
    "VTE": "venous thromboembolism",
}

_WHITESPACE = re.compile(r"\s+")
# Stripped from both ends: sentence punctuation, list bullets and quotes. Brackets
# stay ("norepinephrine (NE)" keeps its closing parenthesis), and so do signs that
# carry meaning ("FiO2 > 60%", "troponin+").
_END_PUNCTUATION = " .,;:!?*\u2022\u00b7\"'`\u201c\u201d\u2018\u2019-\u2013\u2014_/\\|~"


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def tidy_text(text: str) -> str:
    """The part of normalization that keeps a text's words as written: Unicode
    compatibility forms (NFKC), whitespace collapsed, sentence punctuation
    stripped from the ends. Case and abbreviations are left for the matcher, so
    a text cut out of a longer one (the action a red flag forbids) reaches it
    as the words its writer used, like every other item."""
    return _collapse(unicodedata.normalize("NFKC", text)).strip(_END_PUNCTUATION)


def merged_abbreviations(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The built-in list with ``extra`` laid over it (an admin's entry wins)."""
    merged = {k.lower(): v for k, v in DEFAULT_ABBREVIATIONS.items()}
    for short, expansion in (extra or {}).items():
        merged[_collapse(short).lower()] = expansion
    return merged


class Normalizer:
    """``normalize_text`` with its abbreviation pattern compiled once."""

    def __init__(self, abbreviations: Mapping[str, str] | None = None) -> None:
        source = DEFAULT_ABBREVIATIONS if abbreviations is None else abbreviations
        self.abbreviations: dict[str, str] = {}
        for short, expansion in source.items():
            key = _collapse(unicodedata.normalize("NFKC", short)).lower()
            value = _collapse(unicodedata.normalize("NFKC", expansion)).lower()
            if key and value:
                self.abbreviations[key] = value
        if self.abbreviations:
            # Longest first, so "a-fib" wins over a shorter key inside it.
            keys = sorted(self.abbreviations, key=len, reverse=True)
            alternation = "|".join(re.escape(k) for k in keys)
            # Whole words only: "map" in "mapping" or "pe" in "peep" stay as
            # written; "post-MI" still expands.
            self._pattern: re.Pattern[str] | None = re.compile(
                rf"(?<!\w)(?:{alternation})(?!\w)"
            )
        else:
            self._pattern = None

    def __call__(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"text to normalize must be a string, not {type(text)}")
        text = tidy_text(text).lower()
        if self._pattern is not None:
            text = self._pattern.sub(lambda m: self.abbreviations[m.group(0)], text)
        return _collapse(text)


@lru_cache(maxsize=8)
def _normalizer(items: tuple[tuple[str, str], ...] | None) -> Normalizer:
    return Normalizer(None if items is None else dict(items))


def normalize_text(text: str, abbreviations: Mapping[str, str] | None = None) -> str:
    """Lowercase, collapse whitespace, strip punctuation at the ends, and expand
    abbreviations as whole words, whatever their case.

    ``abbreviations`` maps short forms to expansions and replaces the built-in
    list; pass ``merged_abbreviations(extra)`` to extend it instead. ``None``
    uses ``DEFAULT_ABBREVIATIONS``.

    >>> normalize_text("  AKI on  CKD. ")
    'acute kidney injury on chronic kidney disease'
    """
    items = None if abbreviations is None else tuple(sorted(abbreviations.items()))
    return _normalizer(items)(text)
