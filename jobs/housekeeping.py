"""Housekeeping on a path of its own: the reaper and the outbox dispatch
(jobs.reaper.jobs_reap) run in a loop that calls them directly, never as a task
on the queue, so they never wait behind the work they rescue (a worker busy
with, or stuck on, a long job; a queue that a broker outage filled).

Production runs the loop as its own service (``manage.py housekeeping``, the
compose file's ``housekeeping``); the embedded default runs it as a thread of
its worker (``REALICU_WORKER_HOUSEKEEPING_THREAD``, set by ``manage.py
serve``). Two loops at once do no harm: every step of the reaper is a
conditioned update."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)


def reap_seconds() -> float:
    return float(getattr(settings, "REALICU_JOB_REAP_SECONDS", 30))


def housekeeping_round() -> dict:
    """One round: the reaper (which sends due outbox messages), then old
    presence rows forgotten. Never raises: a failing round is logged and the
    next one runs."""
    from jobs.presence import presence_prune
    from jobs.reaper import jobs_reap

    close_old_connections()
    try:
        counts = jobs_reap()
        counts["presence_pruned"] = presence_prune()
    except Exception:
        logger.exception("housekeeping: the round failed; the next one runs")
        connection.close()
        return {"error": 1}
    if any(v for k, v in counts.items() if k not in ("alive", "waiting")):
        logger.info("housekeeping: %s", counts)
    return counts


def housekeeping_loop(*, stop: threading.Event, interval: float | None = None) -> None:
    """Rounds every ``interval`` seconds (REALICU_JOB_REAP_SECONDS) until
    ``stop`` is set; the first round runs at once."""
    every = reap_seconds() if interval is None else interval
    try:
        while not stop.is_set():
            started = time.monotonic()
            housekeeping_round()
            stop.wait(max(0.0, every - (time.monotonic() - started)))
    finally:
        connection.close()


class HousekeepingThread(threading.Thread):
    def __init__(self, interval: float | None = None):
        super().__init__(name="housekeeping", daemon=True)
        self.interval = interval
        self.stop_event = threading.Event()

    def run(self) -> None:
        housekeeping_loop(stop=self.stop_event, interval=self.interval)

    def stop(self) -> None:
        self.stop_event.set()
