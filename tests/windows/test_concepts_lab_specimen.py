"""The specimen the CLIF importer keeps in a numeric lab's value_text, which the
P/F ratio reads (windows.importers.clif._labs; CLINICAL_CONCEPTS.md section 7).
Hand-built source rows, no database."""

import numpy as np
import pandas as pd
import pytest

from windows.importers.clif import _labs

COLLECTED = pd.Timestamp("2150-01-01 10:00", tz="UTC")
HOUR = pd.Timedelta(hours=1)


def lab(category, name, value, *, hosp="h1", collected=COLLECTED, specimen=None):
    return {
        "hospitalization_id": hosp,
        "lab_collect_dttm": collected,
        "lab_category": category,
        "lab_name": name,
        "lab_value": None if value is None else str(value),
        "lab_value_numeric": value,
        "reference_unit": "mmHg",
        "lab_specimen_category": specimen,
    }


def specimens(rows):
    chunk = pd.DataFrame(rows)
    chunk["_row"] = np.arange(1, len(chunk) + 1)
    chunk["_time"] = chunk["lab_collect_dttm"] + pd.Timedelta(minutes=5)
    return _labs(chunk)["value_text"].tolist()


def test_a_gas_charted_with_venous_results_is_venous():
    assert (
        specimens(
            [
                lab("po2_arterial", "pO2", 35.0),
                lab("pco2_arterial", "pCO2", 48.0),
                lab("pco2_venous", "Venous CO2 Pressure", 48.0),
                lab("ph_venous", "PH (Venous)", 7.33),
            ]
        )
        == ["venous"] * 4
    )


def test_a_gas_charted_with_results_named_arterial_is_arterial():
    assert specimens(
        [
            lab("po2_arterial", "pO2", 90.0),
            lab("po2_arterial", "Arterial O2 pressure", 90.0),
        ]
    ) == ["arterial", "arterial"]


@pytest.mark.parametrize(
    "rows",
    [
        [lab("po2_arterial", "pO2", 90.0)],  # nothing says
        [  # both say: an arterial and a venous sample drawn together
            lab("po2_arterial", "pO2", 90.0),
            lab("so2_arterial", "Arterial O2 Saturation", 97.0),
            lab("so2_mixed_venous", "SvO2", 65.0),
        ],
        [  # another collection's venous results say nothing of this one
            lab("po2_arterial", "pO2", 90.0),
            lab("ph_venous", "PH (Venous)", 7.3, collected=COLLECTED + HOUR),
        ],
        [  # nor another admission's
            lab("po2_arterial", "pO2", 90.0),
            lab("ph_venous", "PH (Venous)", 7.3, hosp="h2"),
        ],
    ],
)
def test_a_gas_whose_collection_says_neither_or_both_is_unknown(rows):
    assert specimens(rows)[0] == ""


def test_the_sources_specimen_wins_and_other_labs_keep_only_it():
    assert specimens(
        [
            lab("po2_arterial", "pO2", 90.0, specimen="venous blood"),
            lab("ph_venous", "PH (Venous)", 7.3),
            lab("creatinine", "Creatinine", 1.2),
            lab("sodium", "Sodium", 140.0, specimen="blood/plasma/serum"),
        ]
    ) == ["venous blood", "venous", "", "blood/plasma/serum"]


def test_a_text_result_keeps_its_text():
    row = lab("culture_note", "Comment", None)
    row["lab_value"] = "see report"
    assert specimens([row]) == ["see report"]


def test_a_gas_without_a_collection_time_is_judged_alone():
    assert specimens(
        [
            lab("po2_arterial", "pO2", 90.0, collected=pd.NaT),
            lab("ph_venous", "PH (Venous)", 7.3, collected=pd.NaT),
        ]
    ) == ["", "venous"]
