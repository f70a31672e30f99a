"""Cohort-first MIMIC-IV import (issue 17): stays chosen from patients, admissions
and icustays before any event file is read, as build_cohort draws them or from a
file of stay_ids; every event file read once, whatever the number of batches; the
same rows from csv, csv.gz, parquet and folders of parquet files; bad inputs
refused before anything is written."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count

from windows.importers.base import SourceDataError
from windows.importers.mimic import mimic_import
from windows.importers.mimic.reading import MimicTable
from windows.models import Admission, Event, Patient, Stay

from .mimic_files import IMPORTED_ROWS, mimic_tables, write_mimic

COPIES = 6  # the two ICU patients of mimic_files, six times over
ID_COLUMNS = (
    "subject_id",
    "hadm_id",
    "stay_id",
    "labevent_id",
    "specimen_id",
    "microevent_id",
    "micro_specimen_id",
    "orderid",
    "linkorderid",
    "transfer_id",
)
EVENT_FILES = (
    "icu/chartevents",
    "hosp/labevents",
    "icu/inputevents",
    "icu/outputevents",
    "icu/procedureevents",
    "icu/datetimeevents",
    "hosp/emar",
    "hosp/emar_detail",
    "hosp/microbiologyevents",
    "hosp/transfers",
)


def many_tables() -> dict[str, list[dict]]:
    """mimic_files.py's tables with every patient copied ``COPIES`` times, the
    ids of copy k shifted by k * 1,000,000 (emar ids prefixed): 12 ICU stays."""
    base = mimic_tables()
    out: dict[str, list[dict]] = {}
    for name, rows in base.items():
        if name.startswith(("icu/d_", "hosp/d_")):
            out[name] = rows
            continue
        out[name] = []
        for k in range(COPIES):
            for row in rows:
                row = copy.deepcopy(row)
                for column in ID_COLUMNS:
                    if str(row.get(column, "")).strip().isdigit():
                        row[column] = int(row[column]) + k * 1_000_000
                if row.get("emar_id"):
                    row["emar_id"] = f"{k}-{row['emar_id']}"
                out[name].append(row)
    return out


def to_parquet(csv_dir: Path, out: Path, *, folders: bool) -> Path:
    """The same files as parquet (text columns, as a CSV holds them); with
    ``folders``, each table a folder of two parquet files."""
    for path in csv_dir.rglob("*.csv*"):
        name = path.name.split(".")[0]
        frame = pd.read_csv(path, dtype=str)
        target = out / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        if folders:
            (target / name).mkdir()
            half = len(frame) // 2
            frame.iloc[:half].to_parquet(target / name / "part-0.parquet")
            frame.iloc[half:].to_parquet(target / name / "part-1.parquet")
        else:
            frame.to_parquet(target / f"{name}.parquet")
    return out


@pytest.fixture
def many_dir(tmp_path):
    return write_mimic(tmp_path / "mimic", many_tables())


def imported() -> dict:
    """What is in the database, keyed by source ids (not database keys)."""
    events = (
        Event.objects.values_list(
            "admission__source_id",
            "source_table",
            "source_key",
            "category",
            "name",
            "value_num",
            "value_text",
            "unit",
            "time",
        )
        .order_by()
        .distinct()
    )
    return {
        "stays": sorted(Stay.objects.values_list("source_id", flat=True)),
        "admissions": sorted(Admission.objects.values_list("source_id", flat=True)),
        "events": sorted(events, key=repr),
        "n_events": Event.objects.count(),
    }


def per_table() -> dict[str, int]:
    return dict(
        Event.objects.values_list("source_table").annotate(n=Count("id")).order_by()
    )


def nothing_imported() -> bool:
    return not (
        Patient.objects.exists() or Admission.objects.exists() or Event.objects.exists()
    )


@pytest.mark.django_db
def test_csv_parquet_and_parquet_folders_import_the_same_rows(many_dir, tmp_path):
    seen = {}
    for kind, directory in (
        ("csv", many_dir),
        ("parquet", to_parquet(many_dir, tmp_path / "pq", folders=False)),
        ("folders", to_parquet(many_dir, tmp_path / "pqdir", folders=True)),
    ):
        summary = mimic_import(directory=directory, batch_stays=5)
        seen[kind] = imported()
        assert summary.stays == 2 * COPIES
        Patient.objects.all().delete()
    expected = {table: n * COPIES for table, n in IMPORTED_ROWS.items()}
    assert seen["csv"]["n_events"] == sum(expected.values())
    assert seen["parquet"] == seen["csv"]
    assert seen["folders"] == seen["csv"]


@pytest.mark.django_db
def test_batches_import_the_rows_of_one_batch_and_read_each_file_once(many_dir):
    MimicTable.reads.clear()
    mimic_import(directory=many_dir, batch_stays=1)  # twelve batches
    many = imported()
    reads = dict(MimicTable.reads)
    Patient.objects.all().delete()
    mimic_import(directory=many_dir, batch_stays=100)  # one batch
    assert imported() == many
    assert per_table() == {t: n * COPIES for t, n in IMPORTED_ROWS.items()}
    for name in EVENT_FILES:
        (path,) = [p for p in reads if f"/{name}." in p]
        assert reads[path] == 1, (name, reads)


@pytest.mark.django_db
def test_cohort_size_imports_only_the_drawn_stays_and_their_events(many_dir):
    MimicTable.reads.clear()
    summary = mimic_import(directory=many_dir, cohort_size=4, seed=7, batch_stays=1)
    stays = sorted(Stay.objects.values_list("source_id", flat=True))
    assert len(stays) == 4 and summary.stays == 4
    admissions = set(Stay.objects.values_list("admission__source_id", flat=True))
    assert set(Admission.objects.values_list("source_id", flat=True)) == admissions
    kept = set(Event.objects.values_list("admission__source_id", flat=True))
    assert kept == admissions
    # Each copy holds the same rows: four stays' worth of events, no more.
    assert Event.objects.count() == sum(IMPORTED_ROWS.values()) * 4 // 2
    assert any("cohort first: 4 of 12 eligible stays" in n for n in summary.notes)
    assert all(n == 1 for p, n in MimicTable.reads.items() if "/icu/chart" in p)

    # The same seed draws the same stays; a draw is balanced: one died per copy
    # (A2) and one survived (A1), so two of each when both strata can give two.
    Patient.objects.all().delete()
    mimic_import(directory=many_dir, cohort_size=4, seed=7)
    assert sorted(Stay.objects.values_list("source_id", flat=True)) == stays
    assert sorted(Stay.objects.values_list("hospital_outcome", flat=True)) == [
        "died",
        "died",
        "survived",
        "survived",
    ]
    Patient.objects.all().delete()
    draws = set()
    for seed in range(8):
        mimic_import(directory=many_dir, cohort_size=4, seed=seed)
        draws.add(tuple(sorted(Stay.objects.values_list("source_id", flat=True))))
        Patient.objects.all().delete()
    assert len(draws) > 1  # the seed matters


@pytest.mark.django_db
def test_stays_file_imports_the_listed_stays(many_dir, tmp_path):
    listed = tmp_path / "stays.txt"
    listed.write_text("stay_id\n30002\n2030001\n\n", encoding="utf-8")
    call_command("import_mimic", str(many_dir), "--stays", str(listed))
    assert sorted(Stay.objects.values_list("source_id", flat=True)) == [
        "2030001",
        "30002",
    ]
    assert set(Event.objects.values_list("admission__source_id", flat=True)) == {
        "20002",
        "2020001",
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "content, error",
    [
        ("30001\n99999\n", "1 stay_id(s) not in icu/icustays: 99999"),
        ("30001\nabc\n", "row 2: 'abc' is not a stay_id"),
        ("\n", "holds no stay_id"),
    ],
)
def test_a_bad_stays_file_is_refused_and_changes_nothing(
    many_dir, tmp_path, content, error
):
    listed = tmp_path / "stays.txt"
    listed.write_text(content, encoding="utf-8")
    with pytest.raises(CommandError, match=re.escape(error)):
        call_command("import_mimic", str(many_dir), "--stays", str(listed))
    assert nothing_imported()


@pytest.mark.django_db
def test_missing_stays_file_and_bad_sizes_are_refused(many_dir, tmp_path):
    with pytest.raises(CommandError, match="stays file not found"):
        call_command("import_mimic", str(many_dir), "--stays", str(tmp_path / "no"))
    with pytest.raises(CommandError, match="at least 1"):
        call_command("import_mimic", str(many_dir), "--cohort-size", "0")
    with pytest.raises(CommandError):
        call_command(
            "import_mimic", str(many_dir), "--cohort-size", "2", "--stays", "x"
        )
    assert nothing_imported()


@pytest.mark.django_db
def test_a_missing_or_malformed_event_file_with_many_batches_changes_nothing(
    tmp_path,
):
    tables = many_tables()
    del tables["icu/icustays"]
    with pytest.raises(SourceDataError, match="icustays.*required file is missing"):
        mimic_import(directory=write_mimic(tmp_path / "a", tables), cohort_size=3)
    assert nothing_imported()

    tables = many_tables()
    tables["icu/outputevents"][-1]["hadm_id"] = "twenty"
    with pytest.raises(SourceDataError) as caught:
        mimic_import(
            directory=write_mimic(tmp_path / "b", tables),
            cohort_size=12,
            seed=1,
            batch_stays=2,
        )
    message = str(caught.value)
    assert "outputevents" in message and "'twenty' is not a number" in message
    assert "nothing was imported" in message
    assert nothing_imported()

    directory = write_mimic(tmp_path / "c", many_tables())
    chart = directory / "icu" / "chartevents.csv.gz"
    chart.write_bytes(b"not gzip at all")
    with pytest.raises(SourceDataError, match="chartevents"):
        mimic_import(directory=directory, cohort_size=12, batch_stays=2)
    assert nothing_imported()


def _reltuples() -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
            [Event._meta.db_table],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_statistics_of_the_event_table_are_kept_while_batches_grow_it(
    many_dir, monkeypatch
):
    """A growing event table is analyzed between batches (log2 times), so each
    batch's queries are planned on its size, not as an empty table's."""
    from windows.importers.writing import EventStatistics

    seen: list[tuple[int, int, bool]] = []
    original = EventStatistics.committed

    def committed(self, rows):
        held = self.held
        ran = original(self, rows)
        seen.append((rows, held, ran))
        return ran

    monkeypatch.setattr(EventStatistics, "MIN_ROWS", 1)
    monkeypatch.setattr(EventStatistics, "committed", committed)
    summary = mimic_import(directory=many_dir, batch_stays=1)  # twelve batches

    # Every batch but the last reports its events; the total is the import's
    # less the last batch's.
    assert len(seen) == 11
    assert all(rows > 0 for rows, _, _ in seen)
    assert sum(rows for rows, _, _ in seen) < summary.total_events
    # ANALYZE ran after the first batch and again each time the table doubled:
    # never after a batch that left the rows since the last one below those
    # held then.
    ran = [held for _, held, did in seen if did]
    assert 2 <= len(ran) <= 6
    assert _reltuples() == pytest.approx(Event.objects.count(), rel=0.5)


@pytest.mark.django_db
def test_event_statistics_analyze_when_the_table_doubled():
    from windows.importers.writing import EventStatistics

    statistics = EventStatistics()
    statistics.held, statistics.MIN_ROWS = 1_000, 10
    assert not statistics.committed(400)
    assert not statistics.committed(599)
    assert statistics.committed(1)  # 1,000 written since: as many as held
    assert (statistics.held, statistics.written, statistics.analyzed) == (2_000, 0, 1)
    assert _reltuples() == Event.objects.count()  # ANALYZE ran (0 rows here)


@pytest.mark.django_db
def test_batch_queries_are_planned_on_the_index(many_dir, monkeypatch):
    """Inside each batch (and only there) sequential scans and JIT are off: the
    batch's own admissions are newer than any statistics."""
    from django.db import connection

    import windows.importers.mimic.importing as importing

    seen = []
    original = importing.actions_derive

    def actions_derive(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SHOW enable_seqscan")
            seqscan = cursor.fetchone()[0]
            cursor.execute("SHOW jit")
            seen.append((seqscan, cursor.fetchone()[0]))
        return original(**kwargs)

    monkeypatch.setattr(importing, "actions_derive", actions_derive)
    mimic_import(directory=many_dir, batch_stays=4)  # three batches
    assert seen == [("off", "off")] * 3
