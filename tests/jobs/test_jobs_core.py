"""The job mechanism (jobs/): leases, heartbeats, the outbox and the reaper, on
a real job model (an import run) and PostgreSQL. The worker-level fault tests
are beside each job kind (tests/*/test_*worker*.py, tests/*/test_*_jobs.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerDown

from jobs.leases import JobLeaseLost, is_live, job_claim, job_heartbeat, job_release
from jobs.models import OutboxMessage
from jobs.outbox import outbox_dispatch_due, outbox_send
from jobs.reaper import job_check, jobs_reap
from windows.models import ImportRun, ImportStatus, Source

pytestmark = pytest.mark.django_db

TASK = "windows.tasks.import_run_execute_task"


@pytest.fixture
def sent(monkeypatch):
    """What reached the broker: (task, args) per message. ``sent.down = True``
    makes the broker refuse, as a stopped Redis does."""
    from realicu_web.celery import app

    class Broker(list):
        down = False

    broker = Broker()

    def send_task(name, args=None, **kwargs):
        if broker.down:
            raise BrokerDown(
                "Error 111 connecting to 127.0.0.1:6379. Connection refused."
            )
        broker.append((name, list(args or [])))

    monkeypatch.setattr(app, "send_task", send_task)
    return broker


def make_run(**fields) -> ImportRun:
    return ImportRun.objects.create(source=Source.CLIF, **fields)


def claim(run):
    return job_claim(model=ImportRun, pk=run.pk)


# Leases ------------------------------------------------------------------------


def test_a_queued_job_is_claimed_once_and_a_stale_one_taken_over(settings):
    settings.REALICU_JOB_STALE_SECONDS = 60
    run = make_run()
    lease = claim(run)
    run.refresh_from_db()
    assert lease and run.lease == lease and run.status == ImportStatus.RUNNING
    assert run.attempts == 1 and run.started_at and run.worker
    # A second delivery of the task while the first worker beats: nothing to do.
    assert claim(run) is None
    # The first worker went silent: the next delivery takes the job over.
    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    second = claim(run)
    run.refresh_from_db()
    assert second and second != lease and run.lease == second and run.attempts == 2
    # The first worker, if it wakes up, cannot write its end over the second's.
    assert not job_release(
        model=ImportRun, pk=run.pk, lease=lease, status=ImportStatus.DONE
    )
    assert job_release(
        model=ImportRun, pk=run.pk, lease=second, status=ImportStatus.DONE
    )
    run.refresh_from_db()
    assert run.status == ImportStatus.DONE and run.lease == ""
    assert claim(run) is None  # finished


def test_the_heartbeat_writes_progress_and_stops_the_job_when_its_lease_goes():
    run = make_run()
    lease = claim(run)
    with job_heartbeat(model=ImportRun, pk=run.pk, lease=lease, interval=3600) as beat:
        beat(3, 10, "batch 1/3")
        beat.beat()
        run.refresh_from_db()
        assert (run.progress_done, run.progress_total, run.progress_label) == (
            3,
            10,
            "batch 1/3",
        )
        assert is_live(run)
        # Cancelled from the page: the lease is cleared.
        ImportRun.objects.filter(pk=run.pk).update(lease="", status=ImportStatus.FAILED)
        beat.beat()
        with pytest.raises(JobLeaseLost):
            beat(4, 10, "batch 2/3")
    run.refresh_from_db()
    assert run.progress_done == 3  # nothing written after the lease went


# The outbox ----------------------------------------------------------------------


def test_the_outbox_sends_after_commit_and_keeps_what_the_broker_refused(
    sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        outbox_send(task=TASK, args=[1], key="k1")
        assert sent == []  # nothing before the commit
    assert sent == [(TASK, [1])] and not OutboxMessage.objects.exists()

    sent.down = True
    with django_capture_on_commit_callbacks(execute=True):
        outbox_send(task=TASK, args=[2], key="k2")
        outbox_send(task=TASK, args=[2], key="k2")  # the same work, once
    waiting = OutboxMessage.objects.get()
    assert waiting.args == [2] and waiting.attempts == 1
    assert "Connection refused" in waiting.last_error
    assert outbox_dispatch_due(older_than_seconds=0) == {"sent": 0, "failed": 1}

    sent.down = False
    assert outbox_dispatch_due(older_than_seconds=0) == {"sent": 1, "failed": 0}
    assert sent[-1] == (TASK, [2]) and not OutboxMessage.objects.exists()


# The reaper ----------------------------------------------------------------------


def test_the_reaper_requeues_a_silent_job_and_fails_it_after_three_workers(
    sent, settings, django_capture_on_commit_callbacks
):
    settings.REALICU_JOB_STALE_SECONDS = 60
    alive = make_run()
    claim(alive)
    silent = make_run()
    claim(silent)
    ImportRun.objects.filter(pk=silent.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=90)
    )
    with django_capture_on_commit_callbacks(execute=True):
        counts = jobs_reap()
    assert counts.get("requeued") == 1
    silent.refresh_from_db()
    alive.refresh_from_db()
    assert silent.status == ImportStatus.QUEUED and silent.lease == ""
    assert "re-queued" in silent.progress_label
    assert (TASK, [silent.pk]) in sent and (TASK, [alive.pk]) not in sent
    assert alive.status == ImportStatus.RUNNING

    # Two more workers take it and die: the third loss fails it with the reason.
    for _ in range(2):
        claim(silent)
        ImportRun.objects.filter(pk=silent.pk).update(
            heartbeat_at=timezone.now() - timedelta(seconds=90)
        )
        silent.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            outcome = job_check(silent)
    assert outcome == "failed"
    silent.refresh_from_db()
    assert silent.status == ImportStatus.FAILED and silent.attempts == 3
    assert "worker stopped" in silent.error and "3 workers" in silent.error
    assert silent.finished_at is not None


def test_a_queued_job_nobody_took_is_sent_again_after_the_redispatch_bound(
    sent, settings, django_capture_on_commit_callbacks
):
    settings.REALICU_JOB_REDISPATCH_SECONDS = 300
    run = make_run()
    with django_capture_on_commit_callbacks(execute=True):
        assert job_check(run) == "waiting"  # just queued: its message is on its way
    assert sent == []
    ImportRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(seconds=301)
    )
    run.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        assert job_check(run) == "redispatched"
        assert job_check(run) == "waiting"  # once per bound, not per page load
    assert sent == [(TASK, [run.pk])]
