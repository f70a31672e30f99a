"""The Celery worker processes the benchmarks start and stop: one ``celery
worker --pool solo`` per process, named, logging to a file, without the
broadcasts (heartbeat, gossip, mingle) that only cost time on one machine."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker_start(
    name: str, env: dict, log_path: Path, *, loglevel: str = "INFO"
) -> subprocess.Popen:
    """A worker named ``name@<host>`` with ``env``, its output in ``log_path``."""
    log = open(log_path, "w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "realicu_web",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            loglevel,
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def workers_stop(procs: list[subprocess.Popen], *, timeout: float = 60) -> None:
    """SIGTERM (Celery's warm shutdown: the task at hand finishes) to every
    worker, then wait; one still running after ``timeout`` seconds is killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
