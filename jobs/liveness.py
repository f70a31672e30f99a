"""Worker liveness from the loop that takes messages, not from a side thread.

The consumer loop of a worker calls ``consumer_beat`` on every pass (the
filesystem broker's ``drain_events``, or a timer of the event loop for Redis:
``realicu_web.celery``). Everything that says a worker is alive reads that
timestamp:

- ``job_heartbeat`` (jobs.leases) writes a job's heartbeat only while the
  loop of its process is fresh, so the job of a worker whose loop died or hung
  goes stale and the reaper re-queues it, even though its heartbeat thread
  still runs;
- the liveness file named by ``REALICU_WORKER_LIVENESS_FILE`` (set by
  ``manage.py serve`` for its worker) is touched at most once a second; the
  supervisor restarts a worker whose file stops moving;
- a presence row per worker (``WorkerPresence``), written every few seconds by
  a thread with the loop's last timestamp, tells a page or a command whether
  any worker is taking work.

A process that never ran a consumer loop (a command running a job inline, the
tests) counts as alive: its jobs run in the calling thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time

logger = logging.getLogger(__name__)

_last_beat: float | None = None
_loop_thread: int | None = None
_last_touch = 0.0
_touch_lock = threading.Lock()

# A consumer loop waits at most 2 s per pass (Celery's synloop) or runs its
# timers every second (the event loop); 30 s without a pass is a loop that has
# stopped taking messages.
LOOP_STALE_SECONDS = 30.0


def consumer_beat() -> None:
    """Called by the consumer loop on every pass."""
    global _last_beat, _last_touch, _loop_thread
    now = time.time()
    _last_beat = now
    _loop_thread = threading.get_ident()
    path = os.environ.get("REALICU_WORKER_LIVENESS_FILE")
    if path and now - _last_touch >= 1.0:
        with _touch_lock:
            _last_touch = now
            try:
                os.utime(path, (now, now))
            except FileNotFoundError:
                try:
                    with open(path, "a"):
                        pass
                except OSError as error:
                    logger.warning("liveness file %s not written: %s", path, error)
            except OSError as error:
                logger.warning("liveness file %s not written: %s", path, error)


def consumer_last_beat() -> float | None:
    """When this process's consumer loop last passed (None: it has none)."""
    return _last_beat


def consumer_alive(*, stale_seconds: float = LOOP_STALE_SECONDS) -> bool:
    """True when this process's consumer loop passed recently, or when the
    process has no consumer loop at all (a job run inline)."""
    if _last_beat is None:
        return True
    return time.time() - _last_beat <= stale_seconds


def consumer_loop_thread() -> int | None:
    """The thread that runs this process's consumer loop (None: it has none).
    A solo pool runs each task in that very thread, so the loop does not pass
    while one of its jobs works: the job, not a hang, holds it."""
    return _loop_thread


def consumer_forget() -> None:
    """This process has no consumer loop (a pool child; tests)."""
    global _last_beat, _last_touch, _loop_thread
    _last_beat = None
    _loop_thread = None
    _last_touch = 0.0
