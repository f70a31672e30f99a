"""The MIMIC-IV importer's item mapping agrees with the CLIF consortium's mapping
tables and mCIDE categories (../shared/clif-mimic-mappings), and maps every
itemid the clinical concepts name."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from windows.importers.mimic_mapping import (
    CHARTEVENTS,
    DATETIMEEVENTS,
    INPUTEVENTS,
    LABEVENTS,
    OUTPUTEVENTS,
    PROCEDUREEVENTS,
    TEMPERATURE_SITE_ITEM,
)
from windows.models import Domain

MAPPINGS = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "clif-mimic-mappings"
    / "mappings"
)


def _consortium(name: str) -> list[dict]:
    path = MAPPINGS / name
    if not path.exists():
        pytest.skip(
            f"{path} not found (the shared mapping tables sit beside the repository)"
        )
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _unit(text: str) -> str:
    return (
        text.strip().lower().replace("*", "^").replace("µ", "u").replace("hr", "hour")
    )


def test_vitals_mapping_agrees_with_the_consortium():
    rows = [
        r
        for r in _consortium("vitals.csv")
        if r["vital_category"] not in ("", "NO MAPPING", "MAPPED ELSEWHERE")
    ]
    assert rows
    for r in rows:
        if int(r["itemid"]) == TEMPERATURE_SITE_ITEM:
            continue  # the site of a temperature: its meas_site_name, not a vital
        item = CHARTEVENTS[int(r["itemid"])]
        assert (item.domain, item.category) == (Domain.VITALS, r["vital_category"]), r[
            "itemid"
        ]


def test_labs_mapping_agrees_with_the_consortium():
    rows = [
        r
        for r in _consortium("labs.csv")
        if r["itemid"] and r["decision"] not in ("NO MAPPING", "NOT AVAILABLE")
    ]
    assert rows
    for r in rows:
        table = CHARTEVENTS if r["fluid"] == "chartevents" else LABEVENTS
        item = table[int(r["itemid"])]
        assert (item.domain, item.category) == (Domain.LABS, r["lab_category"]), r[
            "itemid"
        ]
        assert item.factor == float(r["conversion_multiplier"] or 1), r["itemid"]
        if r["target_uom"].strip():
            assert _unit(item.unit) == _unit(r["target_uom"]), r["itemid"]


# Categories of the consortium's med_category.csv that its CLIF demo and the
# mCIDE list (mcide/clif_medication_admin_*_med_categories.csv) name otherwise.
MCIDE_MEDICATION_NAMES = {
    "dextrose_5_water": "dextrose_in_water_d5w",
    "dextrose_10_water": "dextrose",
    "dextrose_other": "dextrose",
}


def test_medication_and_urine_mapping_agrees_with_the_consortium():
    for r in _consortium("med_category.csv"):
        if r["linksto"] == "inputevents" and r["decision"] in (
            "CONTINUOUS",
            "INTERMITTENT",
            "BOTH",
        ):
            item = INPUTEVENTS[int(r["itemid"])]
            category = MCIDE_MEDICATION_NAMES.get(r["med_category"], r["med_category"])
            assert (item.category, item.delivery) == (
                category,
                r["decision"].lower(),
            ), r["itemid"]
    for r in _consortium("output.csv"):
        if r["decision"] == "TO MAP":
            item = OUTPUTEVENTS[int(r["itemid"])]
            assert item.category == r["output_category"], r["itemid"]


def _mcide(name: str) -> set[str]:
    path = MAPPINGS.parent / "mcide" / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {next(iter(r.values())) for r in rows}


def test_medication_assessment_input_and_output_categories_are_mcide_categories():
    medications = _mcide(
        "clif_medication_admin_continuous_med_categories.csv"
    ) | _mcide("clif_medication_admin_intermittent_med_categories.csv")
    mapped = [*INPUTEVENTS.values(), *CHARTEVENTS.values(), *OUTPUTEVENTS.values()]
    assert {
        m.category for m in mapped if m.domain.startswith("medication_admin")
    } <= medications
    assert {m.category for m in mapped if m.domain == Domain.ASSESSMENTS} <= _mcide(
        "clif_patient_assessment_categories.csv"
    )
    assert {m.category for m in mapped if m.domain == Domain.INPUT} <= _mcide(
        "clif_input_category.csv"
    )
    assert {m.category for m in mapped if m.domain == Domain.OUTPUT} <= _mcide(
        "clif_output_categories.csv"
    )


def test_every_itemid_named_in_clinical_concepts_is_mapped():
    concepts = MAPPINGS.parent.parent / "CLINICAL_CONCEPTS.md"
    if not concepts.exists():
        pytest.skip(f"{concepts} not found")
    tables = (
        CHARTEVENTS,
        LABEVENTS,
        INPUTEVENTS,
        OUTPUTEVENTS,
        PROCEDUREEVENTS,
        DATETIMEEVENTS,
    )
    known = {itemid for table in tables for itemid in table}
    text = concepts.read_text(encoding="utf-8")
    named = {int(m) for m in re.findall(r"\b(2\d{5}|5\d{4})\b", text)}
    assert sorted(named - known) == []
