"""MIMIC-IV-Note in the MIMIC-IV import (issue 21): radiology reports as bedside
events at their stored time with their findings, discharge summaries as
hindsight records, limited to the imported admissions; and the report parser."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.windows.mimic_files import A1, A_NO_ICU, mimic_tables, write_mimic
from tests.windows.notes_files import (
    radiology_row,
    radiology_text,
)
from tests.windows.notes_folder import FINDINGS, IMPRESSION, mimic_with_notes
from windows.importers.base import SourceDataError
from windows.importers.mimic import mimic_import
from windows.importers.mimic.notes import TRUNCATION_MARK, report_findings
from windows.models import Admission, Domain, Event, EventKind, Stay
from windows.selectors_context import bedside_events
from windows.windowing import windows_build


@pytest.mark.django_db
def test_radiology_reports_import_at_their_stored_time_with_findings(tmp_path):
    summary = mimic_import(directory=mimic_with_notes(tmp_path))
    assert summary.events["radiology"] == 3
    assert summary.events["discharge"] == 1
    reports = {e.source_key: e for e in Event.objects.filter(source_table="radiology")}
    assert set(reports) == {"10001-RR-1", "10001-RR-2", "10002-RR-1"}
    first = reports["10001-RR-1"]
    assert first.admission.source_id == str(A1)
    assert first.time == datetime(2151, 3, 2, 9, 10, tzinfo=UTC)  # storetime
    assert first.kind == EventKind.OBSERVATION
    assert first.domain == Domain.NOTES
    assert first.category == "radiology_report"
    assert first.name == "CHEST (PORTABLE AP)"
    assert first.value_text == f"FINDINGS: {FINDINGS} IMPRESSION: {IMPRESSION}"
    assert "INDICATION" not in first.value_text
    orphan = reports["10001-RR-2"]
    assert orphan.admission.source_id == str(A1)
    assert orphan.name == "CT HEAD W/O CONTRAST"
    # No storetime: charttime; no detail row: named as a report.
    other = reports["10002-RR-1"]
    assert other.time == datetime(2161, 5, 2, 10, 0, tzinfo=UTC)
    assert other.name == "Radiology report"
    assert other.value_text == (
        "FINDINGS: Left lower lobe consolidation. IMPRESSION: Pneumonia."
    )
    assert not Admission.objects.filter(source_id=str(A_NO_ICU)).exists()


@pytest.mark.django_db
def test_discharge_summary_is_hindsight_only(tmp_path):
    mimic_import(directory=mimic_with_notes(tmp_path))
    summary = Event.objects.get(source_table="discharge")
    assert summary.kind == EventKind.OUTCOME
    assert summary.category == "discharge_summary"
    assert summary.domain == Domain.NOTES
    assert summary.time == datetime(2151, 3, 10, 0, 0, tzinfo=UTC)
    assert "Brief Hospital Course" in summary.value_text
    stay = Stay.objects.get(admission__source_id=str(A1))
    windows = windows_build(stay=stay, window_minutes=30, stride_hours=4)
    assert windows
    last = stay.windows.order_by("-index").first()
    seen = set(bedside_events(window=last).values_list("source_table", flat=True))
    assert "radiology" in seen
    assert "discharge" not in seen


@pytest.mark.django_db
def test_reports_without_detail_and_reruns(tmp_path):
    directory = mimic_with_notes(tmp_path, with_detail=False)
    summary = mimic_import(directory=directory)
    assert any("radiology_detail not found" in n for n in summary.notes)
    names = set(
        Event.objects.filter(source_table="radiology").values_list("name", flat=True)
    )
    assert names == {"Radiology report"}
    again = mimic_import(directory=directory)
    assert again.events.get("radiology", 0) == 0
    assert Event.objects.filter(source_table="radiology").count() == 3


@pytest.mark.django_db
def test_no_note_folder_imports_no_notes(tmp_path):
    directory = write_mimic(tmp_path / "mimic", mimic_tables())
    summary = mimic_import(directory=directory)
    assert not Event.objects.filter(domain=Domain.NOTES).exists()
    assert not any("note/" in n for n in summary.notes)


@pytest.mark.django_db
def test_bad_note_time_names_file_and_row(tmp_path):
    bad = radiology_row(
        "10001-RR-9", 10001, A1, "yesterday", "", radiology_text("X", "a", "b")
    )
    directory = mimic_with_notes(tmp_path, radiology=[bad])
    with pytest.raises(SourceDataError) as err:
        mimic_import(directory=directory)
    assert "radiology" in str(err.value) and "yesterday" in str(err.value)
    assert not Event.objects.exists()


def test_sections_in_case_and_spacing_variants():
    text = (
        "EXAMINATION: CHEST\nindication: fever\n  findings  :\n  Small   effusion.\n"
        "Heart size: normal.\nImpressions:\nEffusion.\nRECOMMENDATION(S): follow up\n"
    )
    assert report_findings(text) == (
        "FINDINGS: Small effusion. Heart size: normal. IMPRESSION: Effusion."
    )
    # Impression alone, and no section at all: the whole text, collapsed.
    assert report_findings("IMPRESSION: No change.") == "IMPRESSION: No change."
    assert report_findings("  Portable chest.\n\nNo change.  ") == (
        "Portable chest. No change."
    )


def test_long_report_is_truncated_with_a_marker():
    text = "FINDINGS: " + "opacity " * 2000
    out = report_findings(text, limit=500)
    assert len(out) <= 500
    assert out.endswith(TRUNCATION_MARK)
    assert out.startswith("FINDINGS: opacity")
