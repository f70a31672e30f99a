"""A CLIF import is atomic: a value error anywhere is found before the first
write and names file, row and column, and a failure in the last batch of a
multi-batch import leaves the database exactly as it was; a re-run then imports
everything (issue 14, item 2)."""

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
from windows.importers.clif import importing as clif_module
from windows.models import (
    Admission,
    ImportRun,
    ImportStatus,
    Source,
)
from windows.services import import_run_execute

pytestmark = pytest.mark.django_db

HOSPITALIZATIONS = 4


@pytest.fixture
def clif_folder(tmp_path, clif_demo_dir) -> Path:
    """Four hospitalizations of the demo as csv files: four batches at one stay
    per batch."""
    hosp_ids = sorted(icu_hospitalizations(clif_demo_dir))[:HOSPITALIZATIONS]
    return clif_csv_folder(tmp_path, clif_demo_dir, hosp_ids)


def _break_last_age(folder: Path, value: str = "abc") -> int:
    """Puts ``value`` as the age of the hospitalization imported last; returns
    its row number in the file (1 = first data row)."""
    path = folder / "clif_hospitalization.csv"
    frame = pd.read_csv(path, dtype=str)
    last = frame["hospitalization_id"].max()
    pos = int((frame["hospitalization_id"] == last).to_numpy().nonzero()[0][0])
    frame.loc[pos, "age_at_admission"] = value
    frame.to_csv(path, index=False)
    return pos + 1


@pytest.mark.parametrize(
    "value, why",
    [
        ("abc", "'abc' is not a number"),
        ("70.5", "'70.5' is not a whole number"),
        ("-3", "'-3' is below 0"),
        ("99999", "'99999' is above 130"),
    ],
)
def test_bad_age_on_the_last_stay_names_file_row_and_column_and_writes_nothing(
    clif_folder, value, why
):
    row = _break_last_age(clif_folder, value)
    with pytest.raises(SourceDataError) as info:
        clif_import(directory=clif_folder, batch_stays=1)
    message = info.value.message
    assert "clif_hospitalization.csv" in message
    assert f"row {row}" in message and "column age_at_admission" in message
    assert why in message
    assert clinical_counts() == (0, 0, 0, 0)


def test_command_refuses_the_bad_age_with_its_place(clif_folder):
    row = _break_last_age(clif_folder)
    with pytest.raises(CommandError, match=rf"row {row}, column age_at_admission"):
        call_command("import_clif", str(clif_folder), "--batch-stays", "1")
    assert clinical_counts() == (0, 0, 0, 0)


def test_import_page_run_shows_the_place_of_the_bad_age(clif_folder):
    row = _break_last_age(clif_folder)
    run = ImportRun.objects.create(source=Source.CLIF, path=str(clif_folder))
    with pytest.raises(SourceDataError):
        import_run_execute(import_run=run)
    run.refresh_from_db()
    assert run.status == ImportStatus.FAILED
    assert f"row {row}, column age_at_admission: 'abc' is not a number" in run.error
    assert clinical_counts() == (0, 0, 0, 0)


def test_failure_in_the_last_batch_rolls_back_every_batch_and_a_rerun_completes(
    clif_folder, monkeypatch
):
    """Something the validation pass cannot foresee (here the action derivation
    of the last batch) fails after three batches were written: none of them
    stays, and the same import run again imports all four."""
    real = clif_module.actions_derive
    calls = []

    def failing_on_the_last_batch(*, admission_ids):
        calls.append(admission_ids)
        if len(calls) == HOSPITALIZATIONS:
            raise RuntimeError("worker lost in the last batch")
        return real(admission_ids=admission_ids)

    monkeypatch.setattr(clif_module, "actions_derive", failing_on_the_last_batch)
    with pytest.raises(RuntimeError):
        clif_import(directory=clif_folder, batch_stays=1)
    assert len(calls) == HOSPITALIZATIONS  # three batches had been written
    assert clinical_counts() == (0, 0, 0, 0)

    monkeypatch.setattr(clif_module, "actions_derive", real)
    summary = clif_import(directory=clif_folder, batch_stays=1)
    assert summary.admissions == HOSPITALIZATIONS
    assert Admission.objects.count() == HOSPITALIZATIONS


def test_a_duplicate_hospitalization_is_refused_with_its_row(clif_folder):
    path = clif_folder / "clif_hospitalization.csv"
    frame = pd.read_csv(path, dtype=str)
    frame = pd.concat([frame, frame.iloc[[0]]], ignore_index=True)
    frame.to_csv(path, index=False)
    with pytest.raises(SourceDataError) as info:
        clif_import(directory=clif_folder, batch_stays=1)
    assert (
        f"row {len(frame)}, column hospitalization_id: duplicate" in info.value.message
    )
    assert clinical_counts() == (0, 0, 0, 0)
