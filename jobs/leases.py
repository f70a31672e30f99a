"""Leases and heartbeats on job rows.

A worker takes a job with ``job_claim`` (an atomic update of the row: queued, or
running under a lease whose heartbeat has gone stale), then works inside
``job_heartbeat``: a thread with its own database connection writes
``heartbeat_at`` and the latest progress onto the row every
``REALICU_JOB_HEARTBEAT_SECONDS``, outside the job's own transaction, so the
page and the reaper see them while the job's rows are still uncommitted. The
update is conditioned on the lease: when the lease is gone (the job was
cancelled, or the reaper gave it to another worker after this one went silent)
the next progress call raises ``JobLeaseLost`` and the job stops.

Bounds (README "Jobs"): a heartbeat every 5 s; a running job whose heartbeat is
older than ``REALICU_JOB_STALE_SECONDS`` (60 s) has lost its worker.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from jobs.liveness import consumer_alive, consumer_loop_thread
from jobs.registry import kind_for

logger = logging.getLogger(__name__)


class JobLeaseLost(Exception):
    """The job row no longer names this worker's lease: cancelled, or taken over."""


def heartbeat_seconds() -> float:
    return float(getattr(settings, "REALICU_JOB_HEARTBEAT_SECONDS", 5))


def stale_seconds() -> float:
    return float(getattr(settings, "REALICU_JOB_STALE_SECONDS", 60))


def stale_before(now=None):
    return (now or timezone.now()) - timedelta(seconds=stale_seconds())


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:255]


def is_live(row, now=None) -> bool:
    """True when the row's heartbeat is recent enough for a live worker."""
    return bool(row.heartbeat_at and row.heartbeat_at >= stale_before(now))


def job_claim(
    *,
    model,
    pk: int,
    claimable: tuple[str, ...] = (),
    running: str = "",
    state_field: str = "",
    started_field: str | None = "started_at",
    extra: dict | None = None,
) -> str | None:
    """Take the job for this worker: a row in one of the ``claimable`` states
    (queued), or in ``running`` whose heartbeat is stale (its worker died).
    Returns the new lease, or None when the job is finished, gone, or held by
    a live worker (the task then has nothing to do). What is not given comes
    from the job's kind (jobs.registry): its queued and running states."""
    kind = kind_for(model)
    claimable = claimable or (kind.queued,)
    running = running or kind.running
    state_field = state_field or (kind.state_field if kind else "state")
    now = timezone.now()
    token = uuid.uuid4().hex
    with transaction.atomic():
        row = model.objects.select_for_update().filter(pk=pk).first()
        if row is None:
            return None
        state = getattr(row, state_field)
        takeover = state == running and not is_live(row, now)
        if state not in claimable and not takeover:
            return None
        setattr(row, state_field, running)
        row.lease = token
        row.heartbeat_at = now
        row.worker = worker_name()
        row.attempts = (row.attempts or 0) + 1
        fields = [state_field, "lease", "heartbeat_at", "worker", "attempts"]
        if started_field and getattr(row, started_field) is None:
            setattr(row, started_field, now)
            fields.append(started_field)
        for name, value in (extra or {}).items():
            setattr(row, name, value)
            fields.append(name)
        row.save(update_fields=fields)
    return token


def job_take(row, **claim) -> str | None:
    """``job_claim`` of ``row``'s job, ``row`` read fresh first. None when the
    job is finished or held by a live worker: ``row`` is then read again, for
    the task to return as it now is."""
    row.refresh_from_db()
    lease = job_claim(model=type(row), pk=row.pk, **claim)
    if lease is None:
        row.refresh_from_db()
    return lease


def job_release(*, model, pk: int, lease: str, **fields) -> bool:
    """End this worker's hold with the final fields (state, error, progress),
    if the lease is still its own. Returns False when it was lost meanwhile."""
    return bool(model.objects.filter(pk=pk, lease=lease).update(lease="", **fields))


def error_text(error: BaseException) -> str:
    """The reason an error gives, in words: an OS error as its message and path
    ("permission denied: /srv/releases/.x.partial"), a validation error as its
    messages, anything else with its type."""
    if isinstance(error, OSError) and error.strerror:
        text = error.strerror[0].lower() + error.strerror[1:]
        return f"{text}: {error.filename}" if error.filename else text
    if isinstance(error, ValidationError):
        return "; ".join(error.messages)
    return f"{type(error).__name__}: {error}"


def job_fail(
    *, model, pk: int, lease: str, error: BaseException | str, label="failed", **fields
) -> str:
    """End this worker's hold on a job that failed (``job_release``): its kind's
    failed state (jobs.registry), the reason (a sentence, or an error in words:
    ``error_text``), ``label`` as its progress and any other final ``fields``.
    Returns the reason, for the log."""
    message = error if isinstance(error, str) else error_text(error)
    failure = kind_for(model).failure(message, label, timezone.now())
    job_release(model=model, pk=pk, lease=lease, **{**failure, **fields})
    return message


class job_heartbeat:
    """Context manager: a heartbeat thread for the job row, and a progress sink
    (``self(done, total, label)``, the ``Progress`` sink protocol) whose figures
    the thread writes onto the row. Raises ``JobLeaseLost`` from the sink when
    the row's lease is no longer ``lease``."""

    def __init__(self, *, model, pk: int, lease: str, interval: float | None = None):
        self.model, self.pk, self.lease = model, pk, lease
        self.interval = heartbeat_seconds() if interval is None else interval
        self.progress: tuple[int, int, str] | None = None
        self.lost = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._owner: int | None = None

    # The sink ----------------------------------------------------------------
    def __call__(self, done: int, total: int, label: str = "") -> None:
        with self._lock:
            self.progress = (done, total, label[:255])
        if self.lost:
            raise JobLeaseLost(
                f"{self.model.__name__} {self.pk}: the job was cancelled or taken over"
            )

    # The thread --------------------------------------------------------------
    def beat(self) -> None:
        """One heartbeat (and progress) write; run by the thread, callable by hand.
        Nothing is written while this process's consumer loop is stale
        (jobs.liveness): a worker that no longer takes messages is not alive,
        whatever its threads still do, and its job goes to the reaper. A job
        run inside the loop's own thread (the solo pool) is what holds the
        loop: its heartbeat goes on, as a pool child's does."""
        if self._owner != consumer_loop_thread() and not consumer_alive():
            logger.warning(
                "heartbeat of %s %s withheld: this worker's consumer loop has stopped",
                self.model.__name__,
                self.pk,
            )
            return
        fields = {"heartbeat_at": timezone.now()}
        with self._lock:
            if self.progress is not None:
                done, total, label = self.progress
                fields.update(
                    progress_done=done, progress_total=total, progress_label=label
                )
        try:
            updated = self.model.objects.filter(pk=self.pk, lease=self.lease).update(
                **fields
            )
        except Exception as error:  # a locked SQLite file, a lost connection
            logger.warning(
                "heartbeat of %s %s not written: %s",
                self.model.__name__,
                self.pk,
                error,
            )
            return
        if not updated:
            # Lost only when the row names another lease (a row this
            # connection cannot see yet is not a lost lease).
            self.lost = (
                self.model.objects.filter(pk=self.pk).exclude(lease=self.lease).exists()
            )

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self.beat()
                if self.lost:
                    return
        finally:
            connection.close()

    def __enter__(self) -> job_heartbeat:
        self._owner = threading.get_ident()
        self._thread = threading.Thread(
            target=self._run,
            name=f"heartbeat-{self.model.__name__}-{self.pk}",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
