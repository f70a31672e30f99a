"""The reaper's round (jobs.reaper) recovers each job on its own: a job whose
recovery raises is failed with the reason, and every other job of the round,
of any kind, is still recovered (issue 29). The release build's own case, an
unremovable folder, is in tests/exports/test_release_recovery.py."""

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import registry
from jobs.models import OutboxMessage
from jobs.reaper import error_text, job_check, jobs_reap
from tests.factories import make_silent_import
from windows.models import (
    BuildBatch,
    BuildRun,
    BuildState,
    ImportStatus,
)

pytestmark = pytest.mark.django_db


def _silent_batch() -> BuildBatch:
    run = BuildRun.objects.create(kind="tracks", stays_total=1)
    return BuildBatch.objects.create(
        run=run,
        index=0,
        stay_ids=[1],
        state=BuildState.RUNNING,
        lease="gone",
        worker="elsewhere:1",
        attempts=1,
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )


@pytest.fixture
def build_requeue_raises(monkeypatch):
    def requeue(row):
        raise RuntimeError("the broker refused the message shape")

    kind = registry._KINDS["build"]
    monkeypatch.setitem(registry._KINDS, "build", replace(kind, requeue=requeue))


def test_a_job_whose_recovery_raises_is_failed_and_the_others_are_recovered(
    build_requeue_raises,
):
    before = make_silent_import()
    batch = _silent_batch()
    after = make_silent_import()
    OutboxMessage.objects.all().delete()

    counts = jobs_reap()

    batch.refresh_from_db()
    assert batch.state == BuildState.FAILED and batch.lease == ""
    assert batch.finished_at is not None
    assert batch.error == (
        "Re-queueing it after its worker stopped failed: RuntimeError: the broker "
        "refused the message shape. The job was stopped, not queued again."
    )
    for run in (before, after):
        run.refresh_from_db()
        assert run.status == ImportStatus.QUEUED
    assert counts["requeued"] == 2 and counts["failed"] == 1
    assert jobs_reap().get("failed") is None  # failed once, then left alone


def test_a_page_check_of_a_job_whose_recovery_raises_answers_failed(
    build_requeue_raises,
):
    batch = _silent_batch()
    assert job_check(batch) == "failed"
    assert batch.state == BuildState.FAILED and "broker refused" in batch.error


def test_a_job_a_live_worker_took_meanwhile_is_not_failed(build_requeue_raises):
    from jobs.reaper import _fail_unrecovered

    batch = _silent_batch()
    stale = BuildBatch.objects.get(pk=batch.pk)
    BuildBatch.objects.filter(pk=batch.pk).update(heartbeat_at=timezone.now())
    kind = registry._KINDS["build"]
    outcome = _fail_unrecovered(
        kind, stale, timezone.now(), RuntimeError("late"), "Re-queueing it"
    )
    assert outcome == "alive"
    batch.refresh_from_db()
    assert batch.state == BuildState.RUNNING and batch.error == ""


def test_an_os_error_reads_as_its_message_and_path():
    error = PermissionError(13, "Permission denied", "/srv/releases/.x.partial")
    assert error_text(error) == "permission denied: /srv/releases/.x.partial"
    assert error_text(RuntimeError("boom")) == "RuntimeError: boom"
