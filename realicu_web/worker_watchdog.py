"""A worker that holds task messages it does not run, after a broker outage
(issue 29): the pool is put right as the consumer reconnects, and a watchdog
finds any message held REALICU_WORKER_STUCK_SECONDS without starting while pool
processes are free, logs it and sends it back to the broker.

The cause, in Celery 5.6.3's prefork pool: on a lost broker connection the
consumer flushes the pool (``AsynPool.flush``), which forgets which processes
are busy (``_busy_workers``) although a task of before the outage still runs in
one. The first task received after the reconnection is then written into that
process's pipe, behind the long task, while another process is idle; with the
prefetch lowered to one message after the reconnection (Celery's prefetch
reduction) and raised only when that task is acknowledged, the worker took
nothing else until the long task ended (18 minutes). Celery's main branch keeps
the busy marks (celery/celery#10346, not in a release yet); ``pool_busy_repair``
does the same at each (re)start of the consumer. The watchdog covers whatever
else leaves a message held and unstarted.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import bootsteps

logger = logging.getLogger(__name__)


def stuck_seconds() -> float:
    """REALICU_WORKER_STUCK_SECONDS: how long a message may wait for a pool
    process while one is free (0: no watchdog)."""
    from django.conf import settings

    return float(getattr(settings, "REALICU_WORKER_STUCK_SECONDS", 60))


def pool_busy_repair(task_pool) -> list[int]:
    """Mark as busy every prefork process that runs a task its pool accepted,
    so that no new task is written behind it. Returns the pids marked again
    (none when nothing was forgotten, or for another pool)."""
    pool = getattr(task_pool, "_pool", None)
    busy = getattr(pool, "_busy_workers", None)
    cache = getattr(pool, "_cache", None)
    if busy is None or cache is None:
        return []
    marked = []
    for job in list(cache.values()):
        if not getattr(job, "_accepted", False):
            continue
        process = getattr(job, "_write_to", None) or getattr(
            job, "_scheduled_for", None
        )
        if process is None or not process._is_alive():
            continue
        if process.inqW_fd not in busy:
            busy.add(process.inqW_fd)  # in place: the pool holds its discard
            marked.append(process.pid)
    return marked


def requests_waiting() -> list:
    """Requests this worker received and has not started, nor handed back:
    not active, not acknowledged, not waiting for their ETA (a retry's
    countdown)."""
    from celery.worker import state as worker_state

    now = datetime.now(UTC)
    active = worker_state.active_requests
    return [
        request
        for request in list(worker_state.reserved_requests)
        if request not in active
        and not request.acknowledged
        and (request.eta is None or request.eta <= now)
    ]


def _describe(request) -> str:
    return f"{request.name}[{request.id}] args {request.argsrepr or '()'}"


class PoolWatchdog(bootsteps.StartStopStep):
    """A consumer step: repairs the pool's busy marks each time the consumer
    (re)starts, and checks every few seconds, on the worker's event loop, for
    requests that waited ``stuck_seconds()`` while pool processes were free.

    Those are logged as an error and rejected with requeue: the broker has the
    message back at once, and this worker (or another) starts it on a free
    process. A copy already written into a busy process's pipe cannot be taken
    back and runs once that process is free; every task is idempotent (STYLE),
    and its acknowledgement is not sent twice. Then the prefetch is raised to
    the pool's size if it was lower. Workers without an event loop (the
    filesystem broker of ``manage.py serve``) get the repair only."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    #: Repair the busy marks at each (re)start of the consumer; the watchdog
    #: alone is tested with it off.
    repair_on_connect = True

    def __init__(self, parent, **kwargs):
        super().__init__(parent, **kwargs)
        self.timer = None
        self.waiting_since: dict[str, float] = {}

    def start(self, consumer) -> None:
        if self.repair_on_connect:
            marked = pool_busy_repair(consumer.pool)
            if marked:
                logger.warning(
                    "worker watchdog: pool processes %s still run a task of before "
                    "the broker connection was lost: marked busy again, so no new "
                    "task is written behind theirs",
                    marked,
                )
        self.stop(consumer)
        hub = getattr(consumer.controller, "hub", None)
        limit = stuck_seconds()
        if hub is None or limit <= 0:
            return
        self.waiting_since = {}
        self.timer = hub.call_repeatedly(
            max(1.0, min(5.0, limit / 4)), self.check, consumer, limit
        )

    def stop(self, consumer) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def check(self, consumer, limit: float) -> None:
        try:
            self._check(consumer, limit)
        except Exception:  # the event loop must go on whatever happens here
            logger.exception("worker watchdog: the check failed")

    def _check(self, consumer, limit: float) -> None:
        # Imported here: celery.worker costs a web process 0.15 s to import.
        from celery.worker import state as worker_state

        now = time.monotonic()
        processes = consumer.pool.num_processes
        free = processes - len(worker_state.active_requests)
        waiting = {r.id: r for r in requests_waiting()} if free > 0 else {}
        self.waiting_since = {
            task_id: self.waiting_since.get(task_id, now) for task_id in waiting
        }
        stuck = [
            waiting[task_id]
            for task_id, since in self.waiting_since.items()
            if now - since >= limit
        ]
        if stuck:
            self.recover(consumer, stuck, free=free, processes=processes, limit=limit)

    def recover(
        self, consumer, stuck: list, *, free: int, processes: int, limit: float
    ) -> None:
        logger.error(
            "worker watchdog: %d task(s) held for %.0f s or more without starting "
            "while %d of %d pool processes were free: %s; sent back to the broker",
            len(stuck),
            limit,
            free,
            processes,
            ", ".join(_describe(r) for r in stuck),
        )
        marked = pool_busy_repair(consumer.pool)
        if marked:
            logger.error(
                "worker watchdog: pool processes %s run a task but were not marked "
                "busy: marked",
                marked,
            )
        for request in stuck:
            request.reject(requeue=True)
            self.waiting_since.pop(request.id, None)
        wanted = consumer.pool.num_processes * consumer.prefetch_multiplier
        qos = consumer.qos
        if 0 < qos.value < wanted:  # 0 is no limit
            logger.error(
                "worker watchdog: prefetch raised from %s to %s", qos.value, wanted
            )
            qos.increment_eventually(wanted - qos.value)
