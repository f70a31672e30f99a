"""CLIF sites' optional clinical_notes table (issue 21): radiology notes as
bedside reports with their findings, discharge notes hindsight only, other
types left out, and a time error named by file, row and column."""

from pathlib import Path

import pandas as pd
import pytest

from tests.windows.notes_files import discharge_text, radiology_text
from windows.importers.base import SourceDataError
from windows.importers.clif import clif_import
from windows.models import Domain, Event, EventKind, Stay

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_clif(tmp_path, clif_demo_dir) -> Path:
    """Two hospitalizations of the demo as csv files, with clinical notes."""
    adt = pd.read_parquet(clif_demo_dir / "clif_adt.parquet")
    icu = adt[adt.location_category == "icu"]
    hosp_ids = list(icu.hospitalization_id.astype(str).unique()[:2])
    for name in ["patient", "hospitalization", "adt", "vitals"]:
        frame = pd.read_parquet(clif_demo_dir / f"clif_{name}.parquet")
        if "hospitalization_id" in frame:
            frame = frame[frame.hospitalization_id.astype(str).isin(hosp_ids)]
        frame.to_csv(tmp_path / f"clif_{name}.csv", index=False)
    first_in = pd.Timestamp(
        icu[icu.hospitalization_id.astype(str) == hosp_ids[0]].in_dttm.min()
    )
    at = [str(first_in + pd.Timedelta(hours=h)) for h in (3, 5, 6)]
    pd.DataFrame(
        {
            "hospitalization_id": [hosp_ids[0]] * 3,
            "note_dttm": at,
            "note_type": ["Radiology", "discharge", "progress"],
            "note_name": ["CHEST (PORTABLE AP)", "", ""],
            "note_text": [
                radiology_text("CHEST (PORTABLE AP)", "Left effusion.", "Effusion."),
                discharge_text(),
                "Progress note: doing well.",
            ],
        }
    ).to_csv(tmp_path / "clif_clinical_notes.csv", index=False)
    return tmp_path


def test_clinical_notes_import(small_clif):
    clif_import(directory=small_clif)
    notes = {
        e.category: e for e in Event.objects.filter(source_table="clif_clinical_notes")
    }
    assert set(notes) == {"radiology_report", "discharge_summary"}
    report = notes["radiology_report"]
    assert report.domain == Domain.NOTES and report.kind == EventKind.OBSERVATION
    assert report.name == "CHEST (PORTABLE AP)"
    assert report.value_text == "FINDINGS: Left effusion. IMPRESSION: Effusion."
    assert report.time - Stay.objects.get(
        admission=report.admission_id
    ).intime == pd.Timedelta(hours=3)
    summary = notes["discharge_summary"]
    assert summary.kind == EventKind.OUTCOME
    assert "Brief Hospital Course" in summary.value_text


def test_clinical_notes_bad_time_is_named(small_clif):
    path = small_clif / "clif_clinical_notes.csv"
    frame = pd.read_csv(path, dtype=str)
    frame.loc[1, "note_dttm"] = "not a time"
    frame.to_csv(path, index=False)
    with pytest.raises(SourceDataError) as info:
        clif_import(directory=small_clif)
    assert "clinical_notes" in str(info.value) and "note_dttm" in str(info.value)
    assert not Event.objects.exists()
