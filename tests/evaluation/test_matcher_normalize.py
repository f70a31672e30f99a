"""Text normalization before matching: pure functions, no database."""

import pytest

from evaluation.normalize import (
    DEFAULT_ABBREVIATIONS,
    Normalizer,
    merged_abbreviations,
    normalize_text,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("AKI", "acute kidney injury"),
        ("  aki on   CKD. ", "acute kidney injury on chronic kidney disease"),
        ("Worsening ARDS", "worsening acute respiratory distress syndrome"),
        (
            "Start NE to keep MAP > 65",
            "start norepinephrine to keep mean arterial pressure > 65",
        ),
        ("- wean CRRT;", "wean continuous renal replacement therapy"),
        ("AFib with RVR", "atrial fibrillation with rvr"),
        ("post-MI, A-fib", "post-myocardial infarction, atrial fibrillation"),
        ("FiO2 > 60%", "fraction of inspired oxygen > 60%"),
        ("Norepinephrine (NE)", "norepinephrine (norepinephrine)"),
    ],
)
def test_text_is_lowercased_trimmed_and_abbreviations_expanded(text, expected):
    assert normalize_text(text) == expected


def test_abbreviations_are_expanded_only_as_whole_words():
    assert (
        normalize_text("Mapping the pelvis, no need") == "mapping the pelvis, no need"
    )
    assert normalize_text("PEEP") == "positive end-expiratory pressure"


def test_texts_differing_in_case_whitespace_and_abbreviation_normalize_alike():
    forms = ["AKI", " aki. ", "Acute   Kidney Injury", "acute kidney injury;"]
    assert {normalize_text(f) for f in forms} == {"acute kidney injury"}


def test_extra_abbreviations_extend_and_override_the_built_in_list():
    abbreviations = merged_abbreviations(
        {"RVR": "rapid ventricular response", "ne": "noradrenaline"}
    )
    assert normalize_text("AF with RVR, NE", abbreviations) == (
        "atrial fibrillation with rapid ventricular response, noradrenaline"
    )
    # A given mapping replaces the built-in list rather than extending it.
    assert normalize_text("AKI, RVR", {"RVR": "rapid ventricular response"}) == (
        "aki, rapid ventricular response"
    )


def test_empty_mapping_expands_nothing():
    assert Normalizer({})(" AKI. ") == "aki"


def test_built_in_list_covers_the_issue_examples():
    for short in ["AKI", "ARDS", "MAP", "NE", "CRRT", "SOFA", "GCS", "HFNC", "PEEP"]:
        assert short in DEFAULT_ABBREVIATIONS


def test_non_text_is_rejected():
    with pytest.raises(TypeError, match="must be a string"):
        normalize_text(None)
