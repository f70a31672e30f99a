"""The CLIF importer on small CLIF folders written by the tests, broken in each way
a real export can be broken: the error names file, row and column, and nothing is
written."""

from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.windows.clif_folders import (
    clif_csv_folder,
    clinical_counts,
    icu_hospitalizations,
)
from windows.importers.base import SourceDataError
from windows.importers.clif import clif_import
from windows.models import Event, Patient

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_clif(tmp_path, clif_demo_dir) -> Path:
    """Two hospitalizations of the demo, written as csv files."""
    hosp_ids = list(icu_hospitalizations(clif_demo_dir)[:2])
    return clif_csv_folder(tmp_path, clif_demo_dir, hosp_ids)


def _edit(folder: Path, name: str, change) -> None:
    path = folder / f"clif_{name}.csv"
    frame = pd.read_csv(path, dtype=str)
    change(frame)
    frame.to_csv(path, index=False)


def _assert_rejected(folder: Path, *parts: str) -> None:
    with pytest.raises(SourceDataError) as info:
        clif_import(directory=folder)
    for part in parts:
        assert part in str(info.value.message), info.value.message
    assert clinical_counts() == (0, 0, 0, 0)


def test_small_folder_imports(small_clif):
    summary = clif_import(directory=small_clif)
    assert summary.stays >= 2
    assert Event.objects.filter(source_table="clif_vitals").count() == len(
        pd.read_csv(small_clif / "clif_vitals.csv")
    )
    assert any("respiratory_support" in note for note in summary.notes)


def test_missing_file_is_named(small_clif):
    (small_clif / "clif_adt.csv").unlink()
    _assert_rejected(
        small_clif, "clif_adt.parquet", "required CLIF table adt not found"
    )


def test_missing_column_is_named(small_clif):
    _edit(small_clif, "vitals", lambda f: f.drop(columns=["vital_value"], inplace=True))
    _assert_rejected(small_clif, "clif_vitals.csv", "column vital_value", "missing")


def test_unparseable_time_names_file_row_and_column(small_clif):
    def break_row(frame):
        frame.loc[7, "recorded_dttm"] = "not a time"

    _edit(small_clif, "vitals", break_row)
    _assert_rejected(
        small_clif, "clif_vitals.csv", "row 8", "column recorded_dttm", "'not a time'"
    )


def test_outtime_before_intime_is_rejected(small_clif):
    def swap(frame):
        frame.loc[1, ["in_dttm", "out_dttm"]] = frame.loc[
            1, ["out_dttm", "in_dttm"]
        ].values

    _edit(small_clif, "adt", swap)
    _assert_rejected(
        small_clif, "clif_adt.csv", "row 2", "column out_dttm", "is before"
    )


def test_unknown_hospitalization_id_is_rejected(small_clif):
    def orphan(frame):
        frame.loc[0, "hospitalization_id"] = "99999999"

    _edit(small_clif, "adt", orphan)
    _assert_rejected(
        small_clif, "clif_adt.csv", "row 1", "unknown hospitalization_id '99999999'"
    )


def test_unknown_patient_id_is_rejected(small_clif):
    def orphan(frame):
        frame.loc[0, "patient_id"] = "nobody"

    _edit(small_clif, "hospitalization", orphan)
    _assert_rejected(
        small_clif, "clif_hospitalization.csv", "unknown patient_id 'nobody'"
    )


def test_error_late_in_the_files_writes_nothing(small_clif):
    """A bad time in the last rows of a late table: nothing of the earlier batches
    or tables is written either."""

    def break_last(frame):
        frame.loc[len(frame) - 1, "lab_result_dttm"] = "2180-13-45"

    _edit(small_clif, "labs", break_last)
    with pytest.raises(SourceDataError):
        clif_import(directory=small_clif, batch_stays=1)
    assert clinical_counts() == (0, 0, 0, 0)


def test_command_reports_errors_clearly(small_clif):
    (small_clif / "clif_patient.csv").unlink()
    with pytest.raises(CommandError, match="required CLIF table patient not found"):
        call_command("import_clif", str(small_clif))


def test_command_prints_progress_and_summary(small_clif, capsys):
    call_command("import_clif", str(small_clif))
    out = capsys.readouterr()
    assert f"{Patient.objects.count()} patients" in out.out
    assert "clif_vitals" in out.out
    assert "batch 1/1" in out.err  # the progress line
