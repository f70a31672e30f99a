"""build_concepts and build_windows queue their work and follow it: with no
worker running they say so within seconds, naming --inline, once and again
every minute, and keep following (the work is queued, not lost) until a
worker takes it (issue 29). The bounds are shortened here by their settings."""

import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from tests.factories import make_event, make_stay, make_user
from windows.builds import build_batch_execute, build_run_cancel
from windows.management.commands import _build_follow
from windows.models import BuildBatch, BuildRun, BuildState, StayTracks

pytestmark = pytest.mark.django_db(transaction=True)

NO_WORKER = "No worker has taken this build's work in 0.3 s: is a worker running?"
INLINE = (
    "Start one (`manage.py serve` or `celery -A realicu_web worker`), or run the "
    "build in this process with --inline."
)


@pytest.fixture(autouse=True)
def short_bounds(settings, monkeypatch):
    settings.REALICU_BUILD_NO_WORKER_SECONDS = 0.3
    settings.REALICU_BUILD_NO_WORKER_REMIND_SECONDS = 0.6
    monkeypatch.setattr(_build_follow, "FOLLOW_SECONDS", 0.05)


def _stays(n: int = 2):
    for _ in range(n):
        stay = make_stay(hours=6)
        make_event(admission=stay.admission, time=stay.intime + timedelta(hours=1))


class LateWorker(threading.Thread):
    """Takes the queued batches of the build the command starts, ``after``
    seconds after they are queued, in this process as a worker would."""

    def __init__(self, after: float, act=None):
        super().__init__(daemon=True)
        self.after, self.act = after, act or self.execute

    @staticmethod
    def execute(run: BuildRun) -> None:
        for pk in run.batches.values_list("pk", flat=True):
            build_batch_execute(batch_id=pk)

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 30
            while not BuildRun.objects.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(self.after)
            self.act(BuildRun.objects.get())
        finally:
            connection.close()


def test_no_worker_is_said_within_the_bound_and_again_while_following():
    _stays()
    # The command's modules (the concept tracks: pandas) imported before the
    # late worker's clock starts: run first in a process, their import took
    # most of the 1.5 s and the worker came before the first notice.
    load_command_class("windows", "build_concepts")
    import windows.concepts  # noqa: F401

    worker = LateWorker(after=1.5)
    worker.start()
    out, err = StringIO(), StringIO()

    call_command("build_concepts", "--batch-stays", "1", stdout=out, stderr=err)
    worker.join()

    said = err.getvalue()
    assert NO_WORKER in said and INLINE in said
    # Said at 0.3 s, then every 0.6 s until the worker came at 1.5 s: two or
    # three times, each on a line of its own.
    assert 2 <= said.count(NO_WORKER) <= 4
    assert f"\n{NO_WORKER}" in said
    # It kept following: the late worker's work finished the command.
    assert "2 stays computed" in out.getvalue()
    assert BuildRun.objects.get().state == BuildState.DONE
    assert StayTracks.objects.count() == 2


def test_a_worker_that_takes_the_work_at_once_leaves_nothing_to_say(settings):
    settings.REALICU_BUILD_NO_WORKER_SECONDS = 5
    _stays()
    worker = LateWorker(after=0)
    worker.start()
    err = StringIO()

    call_command("build_windows", "--all", stdout=StringIO(), stderr=err)
    worker.join()

    assert "No worker" not in err.getvalue()
    assert BuildRun.objects.get().state == BuildState.DONE


def test_workers_that_went_silent_on_the_build_are_named(settings):
    settings.REALICU_JOB_STALE_SECONDS = 0.2
    _stays(n=1)
    admin = make_user(staff=True, role="admin")

    def taken_then_cancelled(run: BuildRun) -> None:
        # A worker takes the batch and dies; an admin cancels after a while.
        BuildBatch.objects.filter(run=run).update(
            state=BuildState.RUNNING,
            lease="gone",
            worker="node-a:11",
            attempts=1,
            heartbeat_at=timezone.now(),
        )
        BuildRun.objects.filter(pk=run.pk).update(state=BuildState.RUNNING)
        time.sleep(1.0)
        build_run_cancel(admin=admin, run=run)

    worker = LateWorker(after=0, act=taken_then_cancelled)
    worker.start()
    err = StringIO()

    with pytest.raises(CommandError, match="Cancelled by"):
        call_command("build_concepts", stdout=StringIO(), stderr=err)
    worker.join()

    said = err.getvalue()
    assert "No worker has shown life on this build for" in said
    assert "(last: node-a:11)" in said and "--inline" in said
    assert "Resume on the import page" in said
