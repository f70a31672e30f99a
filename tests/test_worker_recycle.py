"""A worker gives the embedding model's memory back once idle (issue 35): with
REALICU_WORKER_MODEL_IDLE_SECONDS, a threads pool worker that holds the model
and has no task ends with realicu_web.celery.RECYCLE_EXIT_CODE, after the task
it runs, and manage.py serve's supervisor starts it again at once, without the
backoff of a crash."""

import os
import signal
import sys
from pathlib import Path

import pytest
from celery import shared_task

from realicu_web.celery import (
    RECYCLE_EXIT_CODE,
    ModelIdleClock,
    _holds_what_idle_gives_back,
)
from tests.supervised import pids_written, supervisor_start, supervisor_stop
from tests.workers import wait_for


@shared_task
def model_task(marker: str) -> None:
    """Loads the configured embedding model, as a matching task does."""
    from evaluation.matcher import configured_model_name, load_model

    load_model(configured_model_name())
    Path(marker).write_text("done")


def test_the_idle_clock_is_due_only_after_the_limit_idle_with_the_model():
    clock = ModelIdleClock(300)

    assert not clock.due(now=0, model_loaded=False, busy=False)
    assert not clock.due(now=1000, model_loaded=False, busy=False)
    # The model is loaded at 1000: idle from then.
    assert not clock.due(now=1000, model_loaded=True, busy=False)
    assert not clock.due(now=1299, model_loaded=True, busy=False)
    # A task at 1299 starts the count again when it is over.
    assert not clock.due(now=1299.5, model_loaded=True, busy=True)
    assert not clock.due(now=1400, model_loaded=True, busy=False)
    assert not clock.due(now=1699, model_loaded=True, busy=False)
    assert clock.due(now=1700, model_loaded=True, busy=False)


def test_an_idle_worker_gives_back_the_model_or_what_a_task_imported(monkeypatch):
    """pandas that a task imported is given back like the model (issue 35);
    a library the worker had at its start is not: a new process would import
    it again, and end again, forever."""
    import types

    from evaluation import matcher

    monkeypatch.setattr(matcher, "_loaded", {})
    for name in ("pandas", "pyarrow", "torch"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert not _holds_what_idle_gives_back(frozenset())

    monkeypatch.setitem(sys.modules, "pandas", types.ModuleType("pandas"))
    assert _holds_what_idle_gives_back(frozenset())
    assert not _holds_what_idle_gives_back(frozenset({"pandas"}))

    monkeypatch.setattr(matcher, "_loaded", {"a model": object()})
    assert _holds_what_idle_gives_back(frozenset({"pandas"}))


def test_the_idle_clock_with_no_limit_is_never_due():
    clock = ModelIdleClock(0)

    assert not clock.due(now=0, model_loaded=True, busy=False)
    assert not clock.due(now=10**9, model_loaded=True, busy=False)


# A worker stand-in that recycles (exits with the recycle code) on its first
# three starts, then stays up.
RECYCLING_WORKER = """
import os, sys, time
path = sys.argv[1]
open(path, "a").write(f"{os.getpid()}\\n")
if len(open(path).read().split()) <= 3:
    sys.exit(int(sys.argv[2]))
while True:
    time.sleep(0.2)
"""


def test_a_recycled_worker_is_started_again_at_once_without_backoff(tmp_path):
    pids = tmp_path / "worker.pids"
    worker = {
        "argv": [
            sys.executable,
            "-c",
            RECYCLING_WORKER,
            str(pids),
            str(RECYCLE_EXIT_CODE),
        ],
        "recycle_exit_code": RECYCLE_EXIT_CODE,
    }
    proc = supervisor_start(tmp_path, worker)
    log_path = tmp_path / "supervisor.log"
    try:
        wait_for(lambda: len(pids_written(pids)) == 4, "three recycles", 30)
        # A crash after the recycles backs off by the first step, not the fourth.
        os.kill(pids_written(pids)[-1], signal.SIGKILL)
        wait_for(lambda: len(pids_written(pids)) == 5, "the start after the crash", 30)
    finally:
        supervisor_stop(proc)
    log = log_path.read_text()
    assert log.count(f"worker recycled (exit code {RECYCLE_EXIT_CODE})") == 3, log
    assert "starting it again in" not in log.split("exit code -9")[0], log
    assert "stopped by itself (exit code -9); starting it again in 1 s" in log, log
    assert len(pids_written(tmp_path / "web.pids")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_holding_the_model_ends_with_the_recycle_code_once_idle(tmp_path):
    """A real threads pool worker (manage.py serve's) with a 2 s idle bound:
    the task that loads the model finishes, then the worker ends with the
    recycle code."""
    from realicu_web.celery import app
    from tests.workers import worker_env, worker_start, worker_stop

    marker = tmp_path / "task-done"
    log = tmp_path / "worker.log"
    env = worker_env(
        REALICU_MATCHER_WARM_UP="false", REALICU_WORKER_MODEL_IDLE_SECONDS="2"
    )
    env.setdefault("HF_HUB_OFFLINE", "1")
    worker = worker_start(
        log, env, pool="threads", concurrency=2, include="tests.test_worker_recycle"
    )
    try:
        app.send_task("tests.test_worker_recycle.model_task", args=[str(marker)])
        wait_for(lambda: worker.poll() is not None, "the worker to end", 300)
    finally:
        worker_stop(worker, timeout=5)
    text = log.read_text()
    assert worker.returncode == RECYCLE_EXIT_CODE, text[-4000:]
    assert marker.read_text() == "done"
    succeeded = text.index("tests.test_worker_recycle.model_task[")
    assert "succeeded" in text[succeeded:], text[-4000:]
    assert text.index("ending to give its memory back") > text.index(
        "succeeded", succeeded
    ), text[-4000:]
