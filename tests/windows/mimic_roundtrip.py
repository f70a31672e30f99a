"""A MIMIC-IV-shaped folder generated from the CLIF demo by inverting the CLIF
consortium's MIMIC-IV -> CLIF conversion, so that the same real patients can be
imported by both importers and compared (tests/windows/test_mimic_clif_roundtrip.py).

The demo is the MIMIC-IV demo converted by the consortium's pipeline; the
consortium's mapping tables (``../shared/clif-mimic-mappings``) say which itemid,
label, source unit and multiplier each CLIF category came from; the facts read
from them are kept in tests/windows/clif_mimic_facts.py, so the round trip runs
wherever the repository does (``python -m tests.windows.mimic_roundtrip``
writes that file again from the tables). Where a CLIF
category has several source items, the one whose label is the CLIF ``*_name`` is
used, else the first. Times are written as the CLIF demo's UTC times without an
offset (MIMIC-IV's are naive; the importer reads them as UTC).

The hospital files are written by mimic_roundtrip_hosp.py, chartevents (and
labevents) by mimic_roundtrip_chart.py, inputevents by mimic_roundtrip_inputs.py.
What the inversion cannot give back is listed by the round-trip test.
"""

from __future__ import annotations

import ast
import csv
import os
from pathlib import Path

from tests.windows.mimic_roundtrip_chart import (
    POSITION_ITEM,
    ChartEvents,
    chart_assessments,
    chart_code_status,
    chart_crrt,
    chart_labs,
    chart_respiratory,
    chart_vitals,
)
from tests.windows.mimic_roundtrip_hosp import MimicFolder, write_hospital_files
from tests.windows.mimic_roundtrip_inputs import inputevents

MAPPINGS = (
    Path(
        os.environ.get(
            "CLIF_MIMIC_MAPPINGS",
            Path(__file__).resolve().parents[3] / "shared" / "clif-mimic-mappings",
        )
    )
    / "mappings"
)


def _first_unit(instances: str) -> str:
    """The most frequent source unit of labs.csv's ``uom_instances``:
    ``{'K/uL': 123}`` or ``K/uL: 847472; : 1``."""
    text = (instances or "").strip()
    if not text or text in ("{}", "None"):
        return ""
    if text.startswith("{"):
        units = ast.literal_eval(text)
        return max(units, key=units.get) if units else ""
    if ":" in text:
        return text.split(";")[0].rsplit(":", 1)[0].strip()
    return text


def inversion_facts_from_tables(mappings: Path = MAPPINGS) -> dict:
    """CLIF name/category -> MIMIC-IV item, as read from the consortium's tables
    (tests/windows/clif_mimic_facts.py holds the result, checked against the
    tables by the round-trip test wherever they are)."""

    def rows(name: str) -> list[dict]:
        with open(mappings / name, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))

    vitals = {}
    for r in rows("vitals.csv"):
        if r["vital_category"] in ("NO MAPPING", "MAPPED ELSEWHERE", ""):
            continue
        unit = r["unitname"] if r["unitname"] not in ("NaN", "None") else ""
        vitals[r["label = vital_name"]] = (int(r["itemid"]), unit)
    labs = {}
    for r in rows("labs.csv"):
        if not r["itemid"].isdigit() or "NO MAPPING" in r["decision"]:
            continue
        key = (r["label"], r["lab_category"])
        if key in labs:
            continue
        multiplier = float(r["conversion_multiplier"] or 1.0)
        chart = r["fluid"] == "chartevents"
        unit = r["uom_instances"] if chart else _first_unit(r["uom_instances"])
        unit = "" if unit in ("None", "NaN") else unit
        labs[key] = (int(r["itemid"]), unit, multiplier, chart, r["fluid"])
    meds = {}
    for r in rows("med_category.csv"):
        if r["linksto"] != "inputevents" or not r["itemid"].isdigit():
            continue
        meds.setdefault(r["label"], int(r["itemid"]))
    modes: dict[str, list[int]] = {}
    for r in rows("mode_category.csv"):
        if r["itemid"].isdigit():
            modes.setdefault(r["mode_name"], []).append(int(r["itemid"]))
    return {"vitals": vitals, "labs": labs, "meds": meds, "modes": modes}


class Inversion:
    """The consortium's mapping facts (tests/windows/clif_mimic_facts.py, so the
    round trip runs wherever the repository is): CLIF name/category -> MIMIC-IV
    item."""

    def __init__(self) -> None:
        from tests.windows import clif_mimic_facts as facts

        self.vitals = dict(facts.VITALS)
        self.vitals["Admission Weight (lbs.)"] = (226531, "lbs")
        self.labs = dict(facts.LABS)
        self.meds = dict(facts.MEDS)
        self.modes = {name: list(items) for name, items in facts.MODES.items()}

    def mode_item(self, name: str, brand: str) -> int:
        items = self.modes.get(name, [223849])
        if brand == "Hamilton" and 229314 in items:
            return 229314
        return items[0]


def write_mimic_folder(clif_dir: Path, out: Path) -> dict:
    """Write ``out/hosp`` and ``out/icu`` (CSV) from the CLIF demo in ``clif_dir``;
    returns counts of what was written per file."""
    inv = Inversion()
    folder = MimicFolder(clif_dir, out)
    hosp, subject_of, stay_of = write_hospital_files(folder)
    charts = ChartEvents(subject_of, stay_of)
    vitals = chart_vitals(folder, charts, inv)
    chart_labs(folder, charts, inv)
    chart_respiratory(folder, charts, inv)
    chart_assessments(folder, charts)
    charts.text(folder.read("position"), POSITION_ITEM, "position_name")
    chart_code_status(folder, charts, hosp)
    chart_crrt(folder, charts)
    folder.write(charts.frame(), "icu/chartevents.csv")
    folder.write(
        inputevents(folder.read, inv, subject_of, stay_of, vitals, charts.d_items),
        "icu/inputevents.csv",
    )
    folder.write(charts.d_items_frame(), "icu/d_items.csv")
    return folder.counts


# CLIF device categories (mCIDE): the device rows of respiratory_support.
DEVICE_CATEGORIES_OF_DEMO = [
    "IMV",
    "NIPPV",
    "CPAP",
    "High Flow NC",
    "Face Mask",
    "Trach Collar",
    "Nasal Cannula",
    "Room Air",
    "Other",
]


def write_facts(path: Path, mappings: Path = MAPPINGS) -> None:
    """Write the facts module (tests/windows/clif_mimic_facts.py) from the tables."""
    facts = inversion_facts_from_tables(mappings)
    lines = [
        '"""The CLIF consortium\'s MIMIC-IV -> CLIF mapping facts that the round trip',
        "inverts (tests/windows/mimic_roundtrip.py), read from its mapping tables",
        "(release 1.2.0, MIT licence, copyright 2025 CLIF Consortium;",
        "../shared/clif-mimic-mappings) by ``python -m tests.windows.mimic_roundtrip``",
        "(then ``ruff format``). Generated: edit the tables' reading, not this file.",
        'The round-trip test checks it against the tables wherever they are."""',
        "",
    ]
    for name in ("vitals", "labs", "meds", "modes"):
        lines.append(f"{name.upper()} = {facts[name]!r}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_facts(Path(__file__).with_name("clif_mimic_facts.py"))
