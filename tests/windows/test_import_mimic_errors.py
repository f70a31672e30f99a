"""The MIMIC-IV importer run again, in batches and by its command, and every error
it gives: the message names the file, row and column, and nothing is written."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs.progress import Progress
from tests.windows.clif_folders import clinical_counts as counts
from tests.windows.mimic_files import (
    IMPORTED_ROWS,
    event_counts,
    mimic_tables,
    write_mimic,
)
from windows.importers.base import SourceDataError
from windows.importers.mimic import ChartEventsStep, EventStep, mimic_import
from windows.models import Admission


@pytest.mark.django_db
def test_rerun_imports_nothing_twice(mimic_dir):
    mimic_import(directory=mimic_dir)
    before = (counts(), event_counts())

    summary = mimic_import(directory=mimic_dir)

    assert (counts(), event_counts()) == before
    assert (
        summary.patients,
        summary.admissions,
        summary.stays,
        summary.total_events,
    ) == (0, 0, 0, 0)
    assert summary.skipped_admissions == 2
    assert "2 admissions already imported, skipped" in str(summary)


@pytest.mark.django_db
def test_batches_of_one_stay_import_the_same_and_report_progress(mimic_dir):
    seen = []
    progress = Progress(
        sinks=[lambda done, total, label: seen.append((done, total, label))]
    )

    summary = mimic_import(directory=mimic_dir, progress=progress, batch_stays=1)

    assert event_counts() == IMPORTED_ROWS and summary.events == IMPORTED_ROWS
    steps = 1 + 9  # patients/admissions/stays, then nine event files
    assert seen[0][:2] == (0, 2 * steps)
    assert seen[-1][:2] == (2 * steps, 2 * steps)
    assert any(label == "chartevents: 11 rows" for _, _, label in seen)


@pytest.mark.django_db
def test_an_error_in_a_later_batch_says_what_was_imported_and_a_rerun_completes_it(
    tmp_path,
):
    """MIMIC-IV commits batch by batch (a full copy is too large for one
    transaction): the error names the row, says which batches stay, and a re-run
    after the fix imports the rest."""
    tables = mimic_tables()
    last = max(tables["hosp/admissions"], key=lambda a: a["admittime"])["hadm_id"]
    row = next(
        i for i, r in enumerate(tables["icu/chartevents"]) if r["hadm_id"] == last
    )
    good = tables["icu/chartevents"][row]["charttime"]
    tables["icu/chartevents"][row]["charttime"] = "2151-03-01 25:99"
    directory = write_mimic(tmp_path / "m", tables)
    with pytest.raises(SourceDataError) as info:
        mimic_import(directory=directory, batch_stays=1)
    message = str(info.value.messages[0])
    assert f"row {row + 1}" in message and "column charttime" in message
    assert "batch 2 of 2 rolled back" in message
    assert "1 earlier batch(es), 1 admissions, were imported" in message
    assert "running the import again skips them" in message
    assert Admission.objects.count() == 1
    assert not Admission.objects.filter(source_id=str(last)).exists()

    tables["icu/chartevents"][row]["charttime"] = good
    summary = mimic_import(
        directory=write_mimic(tmp_path / "fixed", tables), batch_stays=1
    )
    assert summary.skipped_admissions == 1 and summary.admissions == 1
    assert event_counts() == IMPORTED_ROWS


@pytest.mark.django_db
def test_command_prints_progress_and_summary(mimic_dir):
    out, err = io.StringIO(), io.StringIO()

    call_command(
        "import_mimic", str(mimic_dir), "--batch-stays", "1", stdout=out, stderr=err
    )

    assert (
        "MIMIC-IV import: 2 patients, 2 admissions, 2 ICU stays, 37 events"
        in out.getvalue()
    )
    assert "chartevents" in out.getvalue()
    assert "[" in err.getvalue() and "/20" in err.getvalue()


@pytest.mark.django_db
def test_command_turns_a_data_error_into_a_command_error(tmp_path):
    tables = mimic_tables()
    tables["icu/icustays"][1]["hadm_id"] = 29999
    with pytest.raises(CommandError, match="column hadm_id"):
        call_command(
            "import_mimic",
            str(write_mimic(tmp_path / "m", tables)),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert counts() == (0, 0, 0, 0)


def assert_rejected(directory: Path, *parts: str) -> None:
    with pytest.raises(SourceDataError) as info:
        mimic_import(directory=directory)
    message = str(info.value.messages[0])
    for part in parts:
        assert part in message, message
    assert counts() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_missing_required_file_is_rejected(tmp_path):
    tables = mimic_tables()
    del tables["icu/icustays"]
    assert_rejected(
        write_mimic(tmp_path / "m", tables), "icu/icustays", "required file is missing"
    )


@pytest.mark.django_db
def test_missing_column_of_an_event_file_is_rejected_before_any_write(tmp_path):
    directory = write_mimic(tmp_path / "m", mimic_tables())
    path = directory / "hosp" / "labevents.csv.gz"
    with gzip.open(path, "rt") as fh:
        text = fh.read().replace(",valuenum,", ",value_number,", 1)
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    assert_rejected(directory, "labevents.csv.gz", "column valuenum", "missing")


def _field_added(path, *, line: int) -> None:
    """One field more on the gzipped CSV's line ``line`` (0: the header)."""
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    lines[line] += ",an extra field"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_a_chartevents_line_with_an_extra_field_is_rejected_naming_its_line(
    tmp_path, monkeypatch, reader
):
    """A line with more fields than the header is an error on either reader
    (pandas reading only some columns would take it without a word), and
    nothing of its batch is written."""
    directory = write_mimic(tmp_path / "m", mimic_tables())
    _field_added(directory / "icu" / "chartevents.csv.gz", line=3)
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)

    with pytest.raises(SourceDataError, match="Expected 11 fields in line 4, saw 12"):
        mimic_import(directory=directory)
    assert counts() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_a_labevents_line_with_an_extra_field_is_rejected_naming_its_line(tmp_path):
    directory = write_mimic(tmp_path / "m", mimic_tables())
    _field_added(directory / "hosp" / "labevents.csv.gz", line=2)

    with pytest.raises(SourceDataError, match="Expected 16 fields in line 3, saw 17"):
        mimic_import(directory=directory)
    assert counts() == (0, 0, 0, 0)


# A bad value in one row: the file, the row and the column are named, and
# nothing is written (the batch rolled back).
BAD_ROWS = {
    "unparseable time in an event row": (
        "icu/chartevents",
        4,
        {"charttime": "2151-03-01 25:99"},
        ("chartevents.csv.gz", "row 5", "column charttime", "2151-03-01 25:99"),
    ),
    "an infusion ending before it starts": (
        "icu/inputevents",
        0,
        {"endtime": "2151-03-01 13:00:00"},
        ("inputevents.csv.gz", "row 1", "column endtime", "is before starttime"),
    ),
    "unparseable admission time": (
        "hosp/admissions",
        1,
        {"admittime": "yesterday"},
        ("admissions.csv", "row 2", "column admittime"),
    ),
    "icu outtime before intime": (
        "icu/icustays",
        1,
        {"outtime": "2161-05-01 09:00:00"},
        ("icustays.csv", "row 2", "column outtime"),
    ),
    "icu stay of an unknown admission": (
        "icu/icustays",
        1,
        {"hadm_id": 29999},
        ("icustays.csv", "row 2", "column hadm_id", "29999"),
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_a_bad_value_in_a_row_is_rejected(tmp_path, case):
    table, row, values, parts = BAD_ROWS[case]
    tables = mimic_tables()
    tables[table][row].update(values)
    assert_rejected(write_mimic(tmp_path / "m", tables), *parts)


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_a_date_without_a_time_in_a_time_column_is_rejected(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    tables["icu/chartevents"][4]["charttime"] = "2151-03-01"
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    assert_rejected(
        write_mimic(tmp_path / "m", tables),
        "chartevents.csv.gz",
        "row 5",
        "column charttime",
        "'2151-03-01' is a date without a time",
    )


@pytest.mark.django_db
def test_icu_stay_of_an_unknown_patient_is_rejected(tmp_path):
    tables = mimic_tables()
    del tables["hosp/patients"][1]
    assert_rejected(
        write_mimic(tmp_path / "m", tables),
        "icustays.csv",
        "row 2",
        "column subject_id",
        "10002",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("age", ["40000", "-3", "61.5"])
def test_an_age_that_is_no_whole_human_age_is_rejected_before_any_write(tmp_path, age):
    tables = mimic_tables()
    tables["hosp/patients"][1]["anchor_age"] = age
    assert_rejected(
        write_mimic(tmp_path / "m", tables), "patients", "row 2", "column anchor_age"
    )
