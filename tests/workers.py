"""The one way the tests start and stop a real Celery worker process: on the
test database and a broker (the test broker unless told), logging to a file,
in a process group of its own, so that a stop, or a start that fails (the
worker too slow to say it is ready on a loaded machine), ends the worker and
any pool processes it forked: no orphan outlives its test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wait_for(predicate, what: str, timeout: float = 120.0):
    """``predicate()``'s first true value, polled every 0.1 s; AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def worker_env(*, broker_url: str | None = None, **extra) -> dict:
    """This process's environment for a worker: the test database (the one
    Django's test runner made), the test broker or ``broker_url``, the import
    roots, and ``extra`` (values as strings)."""
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}"
        f"/{db['NAME']}"
    )
    env["CELERY_BROKER_URL"] = broker_url or settings.CELERY_BROKER_URL
    env["REALICU_IMPORT_ROOTS"] = ",".join(settings.REALICU_IMPORT_ROOTS)
    env.update({key: str(value) for key, value in extra.items()})
    return env


def worker_start(
    log_path: Path,
    env: dict,
    *,
    pool: str = "solo",
    concurrency: int | None = None,
    broadcasts: bool = False,
    include: str = "",
    timeout: float = 60,
) -> subprocess.Popen:
    """A worker that has said it is ready, its output in ``log_path``. By
    default one solo pool without the broadcasts (heartbeat, gossip, mingle);
    ``broadcasts`` keeps them, as docker-compose.yml's worker. A worker that
    exits or is not ready within ``timeout`` seconds is killed with its group,
    and RuntimeError carries its log."""
    command = [sys.executable, "-m", "celery", "-A", "realicu_web", "worker"]
    command += ["--pool", pool, "--loglevel", "INFO"]
    if concurrency is not None:
        command += ["--concurrency", str(concurrency)]
    if not broadcasts:
        command += ["--without-heartbeat", "--without-gossip", "--without-mingle"]
    if include:
        command += ["--include", include]
    log = open(log_path, "w")
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: stopped with its pool processes
    )
    proc.log = log
    try:
        wait_for(
            lambda: " ready." in log_path.read_text() or proc.poll() is not None,
            "the worker to start",
            timeout,
        )
        if proc.poll() is not None:
            raise RuntimeError("the worker did not start:\n" + log_path.read_text())
    except BaseException as error:
        worker_stop(proc, timeout=0)
        if isinstance(error, AssertionError):
            raise RuntimeError(
                f"the worker was not ready within {timeout} s:\n" + log_path.read_text()
            ) from error
        raise
    return proc


def start_worker(log_path: Path, beat: bool = False, **env_extra) -> subprocess.Popen:
    """A worker (solo pool) on the test database and broker, ``env_extra`` added
    to its environment; with ``beat``, housekeeping inside it (the reaper every
    REALICU_JOB_REAP_SECONDS, as ``serve``'s worker runs it)."""
    if beat:
        env_extra["REALICU_WORKER_HOUSEKEEPING_THREAD"] = "1"
    return worker_start(log_path, worker_env(**env_extra))


def killed_mid_job(
    log_path: Path, start, under_way, what: str, timeout: float = 120.0, **env
):
    """A worker (``start_worker`` with ``env``) given a job by ``start()``,
    killed (SIGKILL: no acknowledgement, no cleanup) once ``under_way(job)``
    holds (``what``, within ``timeout`` seconds): the job, and the monotonic
    time of the kill."""
    worker = start_worker(log_path, **env)
    try:
        job = start()
        wait_for(lambda: under_way(job), what, timeout)
        worker.kill()
        killed_at = time.monotonic()
        worker.wait()
    finally:
        worker_stop(worker)
    return job, killed_at


def _group_kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone


def worker_stop(
    proc: subprocess.Popen, *, sig: int = signal.SIGTERM, timeout: float = 30
) -> None:
    """``sig`` to the worker (SIGTERM: Celery's warm shutdown, the task at hand
    finishes; SIGQUIT: cold), then wait up to ``timeout`` seconds; whatever of
    its group is still running then is killed. Safe on a worker already
    stopped or killed."""
    if proc.poll() is None and timeout > 0:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    _group_kill(proc)  # the worker, if still there, and any child it left
    proc.wait()
    log = getattr(proc, "log", None)
    if log is not None and not log.closed:
        log.close()
