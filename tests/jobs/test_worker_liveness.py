"""Worker liveness comes from the loop that takes messages (jobs.liveness): a
job's heartbeat is withheld once its process's consumer loop has stopped,
presence rows say which workers take work, and the housekeeping loop
(jobs.housekeeping) runs the reaper directly and survives a failing round."""

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import liveness
from jobs.housekeeping import housekeeping_loop, housekeeping_round
from jobs.leases import job_claim, job_heartbeat
from jobs.models import WorkerPresence
from jobs.presence import presence_write, workers_alive
from windows.models import ImportRun, ImportStatus, Source

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_loop():
    liveness.consumer_forget()
    yield
    liveness.consumer_forget()


def _running_run() -> tuple[ImportRun, str]:
    run = ImportRun.objects.create(source=Source.CLIF)
    lease = job_claim(model=ImportRun, pk=run.pk)
    return run, lease


def test_a_process_without_a_consumer_loop_counts_as_alive():
    assert liveness.consumer_last_beat() is None
    assert liveness.consumer_alive()


def test_the_heartbeat_is_written_while_the_loop_passes_and_withheld_once_it_stops(
    monkeypatch,
):
    run, lease = _running_run()
    old = timezone.now() - timedelta(minutes=5)
    ImportRun.objects.filter(pk=run.pk).update(heartbeat_at=old)
    beat = job_heartbeat(model=ImportRun, pk=run.pk, lease=lease)

    liveness.consumer_beat()
    beat.beat()
    run.refresh_from_db()
    assert run.heartbeat_at > old

    # The loop stopped passing 40 s ago: its worker's threads still run, but
    # the job is no longer heard from, so the reaper will take it.
    ImportRun.objects.filter(pk=run.pk).update(heartbeat_at=old)
    monkeypatch.setattr(liveness, "_last_beat", time.time() - 40)
    assert not liveness.consumer_alive()
    beat.beat()
    run.refresh_from_db()
    assert run.heartbeat_at == old


def test_a_job_run_inside_the_loops_own_thread_keeps_its_heartbeat(monkeypatch):
    """The solo pool runs a task in the consumer loop's own thread, so the loop
    does not pass while the job works: a release build over 30 s on a solo
    worker had its heartbeat withheld and lost its lease to the reaper, which
    then removed the folder the build was still writing. A job entered in any
    other thread (a threads-pool task) is still judged by the loop."""
    run, lease = _running_run()
    old = timezone.now() - timedelta(minutes=5)
    ImportRun.objects.filter(pk=run.pk).update(heartbeat_at=old)

    liveness.consumer_beat()  # this thread runs the loop, then the job
    monkeypatch.setattr(liveness, "_last_beat", time.time() - 40)
    assert not liveness.consumer_alive()
    with job_heartbeat(model=ImportRun, pk=run.pk, lease=lease, interval=3600) as b:
        b.beat()
    run.refresh_from_db()
    assert run.heartbeat_at > old

    ImportRun.objects.filter(pk=run.pk).update(heartbeat_at=old)
    monkeypatch.setattr(liveness, "_loop_thread", threading.get_ident() + 1)
    with job_heartbeat(model=ImportRun, pk=run.pk, lease=lease, interval=3600) as b:
        b.beat()
    run.refresh_from_db()
    assert run.heartbeat_at == old


def test_the_liveness_file_is_touched_by_the_loop(tmp_path, monkeypatch):
    path = tmp_path / "worker.alive"
    monkeypatch.setenv("REALICU_WORKER_LIVENESS_FILE", str(path))
    liveness.consumer_beat()
    assert path.exists()
    first = path.stat().st_mtime
    monkeypatch.setattr(liveness, "_last_touch", 0.0)
    time.sleep(0.05)
    liveness.consumer_beat()
    assert path.stat().st_mtime >= first


def test_presence_records_the_loops_time_not_the_threads():
    started = timezone.now()
    assert not presence_write(name="w1", started_at=started)  # no loop yet
    liveness.consumer_beat()
    assert presence_write(name="w1", started_at=started)
    assert list(workers_alive().values_list("name", flat=True)) == ["w1"]

    # A loop silent for two minutes: the row is written, but not alive.
    liveness._last_beat = time.time() - 120
    assert presence_write(name="w1", started_at=started)
    assert WorkerPresence.objects.get(name="w1").beat_at < timezone.now() - timedelta(
        seconds=100
    )
    assert not workers_alive().exists()


def test_housekeeping_reaps_directly_and_a_failing_round_does_not_stop_the_loop(
    monkeypatch, settings
):
    settings.REALICU_JOB_STALE_SECONDS = 60
    run, _ = _running_run()
    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=10)
    )
    from jobs import reaper

    calls = {"n": 0}
    real = reaper.jobs_reap

    def flaky():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("database is locked")
        return real()

    monkeypatch.setattr(reaper, "jobs_reap", flaky)
    # The loop closes its connections between rounds, as a long-running
    # process must; inside this test's transaction it keeps the one it has.
    monkeypatch.setattr("jobs.housekeeping.close_old_connections", lambda: None)
    monkeypatch.setattr("jobs.housekeeping.connection.close", lambda: None)
    assert housekeeping_round() == {"error": 1}
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    housekeeping_loop(stop=stop, interval=0.05)
    run.refresh_from_db()
    assert calls["n"] >= 2
    assert run.status == ImportStatus.QUEUED
    assert "re-queued" in run.progress_label
