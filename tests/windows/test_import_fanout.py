"""A MIMIC-IV import fanned out on the workers (issue 36, windows.import_batches):
its batches, run by two real worker processes, write the database the one-process
import writes (the same rows per stay, compared by a hash over source ids); a
batch whose worker is killed mid-batch is re-queued by the reaper and imported
once; a batch's stored rows in S3 (moto's server) import as local ones do; a
malformed stored file fails the import with its key named."""

from __future__ import annotations

import io
import signal
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs.leases import job_claim
from jobs.progress import Progress
from jobs.reaper import jobs_reap
from tests.windows import mimic_roundtrip
from tests.windows.import_digest import database_digest
from tests.windows.mimic_files import mimic_tables, write_mimic
from windows.import_batches import import_batch_execute, import_run_fan_out_here
from windows.importers.mimic import mimic_import
from windows.models import (
    Admission,
    ImportBatch,
    ImportRun,
    ImportStatus,
    Patient,
    Stay,
)
from windows.services import import_run_create

# The parts of a summary that do not depend on how the admissions were batched.
SUMMARY_KEYS = (
    "patients",
    "admissions",
    "stays",
    "events",
    "total_events",
    "actions",
    "dropped",
    "data_sources",
)


def one_process(directory: Path, **options) -> tuple[dict, dict]:
    """The digest and summary of the one-process import, then its rows removed."""
    summary = mimic_import(directory=directory, **options).as_dict()
    digest = database_digest()
    Patient.objects.all().delete()
    assert Stay.objects.count() == 0
    return digest, {k: summary[k] for k in SUMMARY_KEYS}


@pytest.fixture(scope="module")
def demo_mimic(tmp_path_factory, clif_demo_dir):
    """The MIMIC-IV demo's patients as a MIMIC-IV folder (tests/windows/
    mimic_roundtrip.py), with the digest of its one-process import."""
    root = tmp_path_factory.mktemp("fanout-roots")
    folder = root / "mimic-demo"
    folder.mkdir()
    mimic_roundtrip.write_mimic_folder(clif_demo_dir, folder)
    return folder


@contextmanager
def patients_locked():
    """Hold a lock on the patient table from another connection: a batch
    writing its patients waits inside its transaction (mid-batch) until the
    block ends, whichever worker runs it."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
    ) as holder:
        holder.execute(f"LOCK TABLE {Patient._meta.db_table} IN EXCLUSIVE MODE")
        yield
        holder.rollback()


def batches_waiting() -> int:
    """Batches waiting on the patient table's lock, inside their transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
            [Patient._meta.db_table],
        )
        return cursor.fetchone()[0]


def _worker_env(settings, tmp_path, folder: Path) -> dict:
    return {
        "REALICU_IMPORT_ROOTS": str(folder.parent),
        "REALICU_IMPORT_FANOUT": "on",
        "REALICU_IMPORT_BATCH_STAYS": 20,
        "REALICU_VAR_DIR": str(tmp_path / "var"),
        # The key the pseudonymous patient ids are made with: this process's.
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "REALICU_JOB_HEARTBEAT_SECONDS": 0.5,
        "REALICU_JOB_STALE_SECONDS": 12,
        "HF_HUB_OFFLINE": "1",
    }


def _run_to_end(run: ImportRun, *, reap: bool = False) -> ImportRun:
    from tests.workers import wait_for

    def ended() -> bool:
        if reap:
            jobs_reap()
        run.refresh_from_db()
        return run.status in (ImportStatus.DONE, ImportStatus.FAILED)

    wait_for(ended, "the fanned-out import to end", 600)
    return run


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_workers_import_the_demo_as_one_process_does(
    demo_mimic, tmp_path, settings
):
    from tests.workers import start_worker, wait_for, worker_stop

    single, single_summary = one_process(demo_mimic, batch_stays=20)
    assert single["stays"] > 100 and single["events"] > 100_000
    settings.REALICU_IMPORT_ROOTS = [str(demo_mimic.parent)]
    env = _worker_env(settings, tmp_path, demo_mimic)
    workers = [start_worker(tmp_path / f"w{n}.log", **env) for n in (1, 2)]
    try:
        with patients_locked():
            run = import_run_create(source="mimic", path=str(demo_mimic))
            # Each worker holds a batch mid-transaction at once: both take part.
            wait_for(lambda: batches_waiting() >= 2, "a batch in each worker", 300)
        run = _run_to_end(run)
    finally:
        for worker in workers:
            worker_stop(worker)
    assert run.status == ImportStatus.DONE, run.error
    batches = list(run.batches.all())
    assert len(batches) > 2 and all(b.state == "done" for b in batches)
    pids = {b.worker.rsplit(":", 1)[1] for b in batches}
    assert pids == {str(w.pid) for w in workers}
    assert (run.progress_done, run.progress_total) == (len(batches), len(batches))
    assert database_digest() == single
    assert {k: run.summary[k] for k in SUMMARY_KEYS} == single_summary
    # Its stored batches are removed once it is done.
    assert not list((tmp_path / "var" / "import-spill").rglob("*.parquet"))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_batch_whose_worker_is_killed_mid_batch_is_imported_once(
    demo_mimic, tmp_path, settings
):
    from tests.workers import start_worker, wait_for, worker_stop

    single, _ = one_process(demo_mimic, batch_stays=20)
    settings.REALICU_IMPORT_ROOTS = [str(demo_mimic.parent)]
    settings.REALICU_JOB_STALE_SECONDS = 12
    env = _worker_env(settings, tmp_path, demo_mimic)
    doomed = start_worker(tmp_path / "doomed.log", **env)
    survivor = None
    try:
        with patients_locked():
            run = import_run_create(source="mimic", path=str(demo_mimic))
            wait_for(lambda: batches_waiting() >= 1, "a batch mid-transaction", 300)
            held = ImportBatch.objects.get(run=run, state="running")
            assert held.worker.endswith(f":{doomed.pid}")
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        survivor = start_worker(tmp_path / "survivor.log", **env)
        run = _run_to_end(run, reap=True)
    finally:
        worker_stop(doomed)
        if survivor is not None:
            worker_stop(survivor)
    assert run.status == ImportStatus.DONE, run.error
    held.refresh_from_db()
    assert held.state == "done" and held.attempts == 2
    assert held.worker.endswith(f":{survivor.pid}")
    assert database_digest() == single


def _planned(directory: Path) -> tuple[ImportRun, list[ImportBatch]]:
    """A run planned in this process (as import_mimic --fan-out plans one):
    its batches stored and queued."""
    run = import_run_fan_out_here(directory=directory, progress=Progress())
    return run, list(run.batches.order_by("index"))


@pytest.mark.django_db
def test_batches_stored_in_s3_import_as_one_process_does(
    s3,
    tmp_path,
    settings,
):
    folder = write_mimic(tmp_path / "m", mimic_tables())
    single, single_summary = one_process(folder, batch_stays=1)
    settings.REALICU_IMPORT_BATCH_STAYS = 1
    run, batches = _planned(folder)
    assert len(batches) == 2
    keys = s3.keys(f"imports/run-{run.pk}/")
    assert f"imports/run-{run.pk}/batch-0/batch.json" in keys
    assert any(k.endswith("rows-0.parquet") for k in keys)  # chartevents' rows
    assert run.batches.count() == 2 and Stay.objects.count() == 0
    for batch in batches:
        import_batch_execute(batch_id=batch.pk)
    run.refresh_from_db()
    assert run.status == ImportStatus.DONE, run.error
    assert database_digest() == single
    assert {k: run.summary[k] for k in SUMMARY_KEYS} == single_summary
    assert s3.keys(f"imports/run-{run.pk}/") == []
    # A batch delivered again after it is done writes nothing.
    import_batch_execute(batch_id=batches[0].pk)
    assert database_digest() == single


@pytest.mark.django_db
def test_a_malformed_batch_file_fails_the_import_naming_it(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    settings.REALICU_IMPORT_BATCH_STAYS = 1
    folder = write_mimic(tmp_path / "m", mimic_tables())
    run, (first, second) = _planned(folder)
    stored = tmp_path / "var" / "import-spill" / second.spill_prefix
    broken = stored / "rows-0.parquet"
    assert broken.exists()
    broken.write_bytes(b"not a parquet file")
    import_batch_execute(batch_id=first.pk)
    import_batch_execute(batch_id=second.pk)
    run.refresh_from_db()
    second.refresh_from_db()
    assert second.state == "failed"
    assert f"{second.spill_prefix}/rows-0.parquet is not a readable parquet" in (
        second.error
    )
    assert run.status == ImportStatus.FAILED
    assert "1 of 2 batches failed; batch 2: " in run.error
    assert "rows-0.parquet is not a readable parquet file" in run.error
    assert "resume the import" in run.error
    # The broken batch wrote nothing; the other one's admissions stay.
    assert sorted(Admission.objects.values_list("source_id", flat=True)) == [
        str(h) for h in first.hadm_ids
    ]


@pytest.mark.django_db
def test_a_cancelled_fanned_out_import_ends_its_batches_and_writes_nothing(
    tmp_path, settings, admin_user
):
    from windows.services import import_run_cancel

    settings.VAR_DIR = tmp_path / "var"
    settings.REALICU_IMPORT_BATCH_STAYS = 1
    run, batches = _planned(write_mimic(tmp_path / "m", mimic_tables()))
    run.refresh_from_db()
    assert run.status == ImportStatus.BATCHES and run.is_open
    import_run_cancel(admin=admin_user, import_run=run)
    assert run.status == ImportStatus.CANCELLED
    assert set(run.batches.values_list("state", "lease")) == {("failed", "")}
    # A batch's message arriving after the cancel finds nothing to take.
    for batch in batches:
        import_batch_execute(batch_id=batch.pk)
    assert Stay.objects.count() == 0 and Patient.objects.count() == 0
    run.refresh_from_db()
    assert run.status == ImportStatus.CANCELLED


@pytest.mark.django_db
def test_a_batch_the_reaper_gives_up_on_closes_its_run(
    tmp_path, settings, django_capture_on_commit_callbacks
):
    """The reaper fails a batch whose workers kept dying; with no batch left
    open the run is closed then, failed naming that batch, without a page or
    a batch's worker looking at it."""
    from jobs.registry import kind_for

    settings.VAR_DIR = tmp_path / "var"
    settings.REALICU_IMPORT_BATCH_STAYS = 1
    run, (first, second) = _planned(write_mimic(tmp_path / "m", mimic_tables()))
    import_batch_execute(batch_id=first.pk)
    lease = job_claim(model=ImportBatch, pk=second.pk)
    assert lease
    # Its last allowed worker went silent long ago.
    ImportBatch.objects.filter(pk=second.pk).update(
        attempts=kind_for(ImportBatch).max_attempts,
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    run.refresh_from_db()
    assert run.status == ImportStatus.BATCHES
    with django_capture_on_commit_callbacks(execute=True):
        jobs_reap()
    second.refresh_from_db()
    assert second.state == "failed" and "was not queued again" in second.error
    run.refresh_from_db()
    assert run.status == ImportStatus.FAILED
    assert run.error.startswith("1 of 2 batches failed; batch 2: ")
    assert (run.progress_done, run.progress_total) == (1, 2)
    # Its stored batches are removed, and their folders with them.
    assert not (tmp_path / "var" / "import-spill" / f"imports/run-{run.pk}").exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_import_mimic_fan_out_plans_here_and_the_worker_imports_the_batches(
    tmp_path, settings
):
    from django.core.management import call_command

    from tests.workers import start_worker, worker_stop

    folder = write_mimic(tmp_path / "m", mimic_tables())
    single, single_summary = one_process(folder, batch_stays=1)
    settings.VAR_DIR = tmp_path / "var"
    worker = start_worker(tmp_path / "w.log", **_worker_env(settings, tmp_path, folder))
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "import_mimic",
            str(folder),
            "--fan-out",
            "--batch-stays",
            "1",
            stdout=out,
            stderr=err,
        )
    finally:
        worker_stop(worker)
    run = ImportRun.objects.get()
    assert run.status == ImportStatus.DONE, run.error
    batches = list(run.batches.all())
    assert len(batches) == 2
    assert {b.worker.rsplit(":", 1)[1] for b in batches} == {str(worker.pid)}
    assert database_digest() == single
    assert {k: run.summary[k] for k in SUMMARY_KEYS} == single_summary
    assert f"import {run.pk}, 2 batches on the workers" in out.getvalue()
    assert f"{single_summary['stays']} ICU stays" in out.getvalue()
    assert "2/2 batches done" in err.getvalue()
    # Nothing is left in the spill folder: no file, no empty folder of the run.
    spill = tmp_path / "var" / "import-spill" / "imports"
    assert not spill.exists() or list(spill.iterdir()) == []


@pytest.mark.django_db
def test_import_mimic_fan_out_takes_no_cohort(tmp_path):
    from django.core.management import CommandError, call_command

    folder = write_mimic(tmp_path / "m", mimic_tables())
    with pytest.raises(CommandError, match="--fan-out imports the whole folder"):
        call_command("import_mimic", str(folder), "--fan-out", "--cohort-size", "1")
    assert not ImportRun.objects.exists()
