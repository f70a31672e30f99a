"""An import queued from the web runs in a real Celery worker (Redis broker, as in
production) and reports its progress on the run row."""

import re
import time

import pytest
from django.core.exceptions import ValidationError

from windows.models import ImportRun, ImportStatus, Stay
from windows.services import import_run_create

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(celery_worker_process):
    return celery_worker_process


def _wait(run: ImportRun, timeout: float = 180) -> ImportRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in (ImportStatus.DONE, ImportStatus.FAILED):
            return run
        time.sleep(0.3)
    raise AssertionError(f"import run still {run.status} after {timeout}s")


def test_demo_import_runs_in_the_worker_with_progress(worker):
    run = import_run_create(source="clif", path="")
    assert run.status == ImportStatus.QUEUED
    run = _wait(run)
    assert run.status == ImportStatus.DONE, run.error
    assert run.progress_total > 0 and run.progress_done == run.progress_total
    assert run.percent == 100
    assert run.summary["stays"] == Stay.objects.count() > 0
    assert run.started_at <= run.finished_at

    again = _wait(import_run_create(source="clif", path=""))
    assert again.status == ImportStatus.DONE
    assert again.summary["total_events"] == 0
    assert again.summary["skipped_admissions"] == run.summary["admissions"]


def test_failed_import_keeps_its_message(worker, tmp_path, settings):
    settings.REALICU_IMPORT_ROOTS = [str(tmp_path)]
    (tmp_path / "clif_patient.csv").write_text(
        "patient_id,sex_category,death_dttm\n1,F,\n"
    )
    run = _wait(import_run_create(source="clif", path=str(tmp_path)))
    assert run.status == ImportStatus.FAILED
    assert "required CLIF table hospitalization not found" in run.error
    assert Stay.objects.count() == 0


def test_folder_outside_the_import_roots_is_refused(settings, tmp_path):
    settings.REALICU_IMPORT_ROOTS = [str(tmp_path / "allowed")]
    with pytest.raises(ValidationError, match="outside the import folders"):
        import_run_create(source="clif", path="/etc")
    with pytest.raises(ValidationError, match="needs a folder"):
        import_run_create(source="mimic", path="")
    assert ImportRun.objects.count() == 0


def test_running_import_shows_the_progress_its_heartbeat_wrote(admin_client):
    """The worker's heartbeat writes its progress onto the row outside the
    import's transaction; the page reads it from there."""
    from jobs.leases import job_heartbeat

    run = ImportRun.objects.create(
        source="clif", status=ImportStatus.RUNNING, lease="L1", worker="host:42"
    )
    heartbeat = job_heartbeat(model=ImportRun, pk=run.pk, lease="L1")
    heartbeat(3, 4, "batch 1/1: labs")
    heartbeat.beat()
    run = ImportRun.objects.get(pk=run.pk)
    assert run.percent == 75 and run.heartbeat_at is not None
    page = admin_client.get(f"/imports/{run.pk}/progress/").content.decode()
    assert 'value="75"' in page and "batch 1/1: labs" in page
    assert 'hx-trigger="every 1s"' in page
    assert re.search(r"last heartbeat \d+ s ago · worker host:42", page)
