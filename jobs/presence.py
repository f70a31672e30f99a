"""Which workers are taking work: each worker writes the time its consumer loop
last passed (jobs.liveness) onto its ``WorkerPresence`` row every few seconds,
from a thread; the time written is the loop's, so a worker whose loop hung
stops looking alive even though this thread still runs."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from jobs.leases import worker_name
from jobs.liveness import LOOP_STALE_SECONDS, consumer_last_beat
from jobs.models import WorkerPresence

logger = logging.getLogger(__name__)

PRESENCE_SECONDS = 5.0
# A loop that passed within its own stale bound, written at most
# PRESENCE_SECONDS late.
ALIVE_SECONDS = LOOP_STALE_SECONDS + 2 * PRESENCE_SECONDS


def presence_write(*, name: str, started_at: datetime) -> bool:
    """Record this process's loop time; False when it has no loop yet."""
    beat = consumer_last_beat()
    if beat is None:
        return False
    WorkerPresence.objects.update_or_create(
        name=name,
        defaults={
            "started_at": started_at,
            "beat_at": datetime.fromtimestamp(beat, tz=UTC),
        },
    )
    return True


def workers_alive(*, now: datetime | None = None):
    """Presence rows of workers whose loop passed recently."""
    cutoff = (now or timezone.now()) - timedelta(seconds=ALIVE_SECONDS)
    return WorkerPresence.objects.filter(beat_at__gte=cutoff)


def presence_prune(*, older_than: timedelta = timedelta(days=1)) -> int:
    """Forget workers silent for a day (the housekeeping round calls it)."""
    deleted, _ = WorkerPresence.objects.filter(
        beat_at__lt=timezone.now() - older_than
    ).delete()
    return deleted


class PresenceThread(threading.Thread):
    """The worker's presence writer; ``stop()`` ends it."""

    def __init__(self, interval: float = PRESENCE_SECONDS):
        super().__init__(name="worker-presence", daemon=True)
        self.interval = interval
        self.name_ = worker_name()
        self.started_at = timezone.now()
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                try:
                    presence_write(name=self.name_, started_at=self.started_at)
                except Exception as error:  # a locked SQLite file, a lost link
                    logger.warning("worker presence not written: %s", error)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop_event.set()
