"""The Celery application; configuration comes from Django settings (CELERY_*).
A worker loads the embedding model as it starts (``_model_warm_up``) unless
told not to, may end itself to give the model's memory back once idle
(``ModelIdleClock``, ``ModelRecycleThread``), records its consumer loop's
liveness (``LoopLiveness``, ``_side_threads_start``) and may run housekeeping
in a thread."""

import logging
import os
import sys
import threading
import time

from celery import Celery, bootsteps
from celery.signals import (
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

from realicu_web.worker_watchdog import PoolWatchdog

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

app = Celery("realicu_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _filesystem_broker_folders(sender, **kwargs) -> None:
    """The embedded filesystem broker needs its folders before anyone publishes."""
    options = sender.conf.broker_transport_options or {}
    if str(sender.conf.broker_url).startswith("filesystem://"):
        for key in (
            "data_folder_in",
            "data_folder_out",
            "processed_folder",
            "control_folder",
        ):
            if options.get(key):
                os.makedirs(options[key], exist_ok=True)


# The embedding model is loaded by a worker as it starts, in a background
# thread, rather than by its first agreement task: loading took seconds with
# torch (the packaged model now runs on numpy, evaluation.bert_numpy: a tenth
# of a second; other models still load torch), and a task that needs the model
# meanwhile simply waits for the same load (evaluation.matcher.load_model's
# lock), holding no database lock. With the prefork pool each child process
# loads its own copy, once it is forked; with the threads or solo pool the
# worker's one process loads it once it is ready, after the embedded beat
# process has been forked, so beat does not start with a copy. Without warm-up
# (manage.py serve's worker) the first task that matches texts loads it.
_worker_main_pid: int | None = None
# The warm-up threads of this process: a worker does not end while one runs.
_warm_up_threads: list[threading.Thread] = []


def _model_warm_up() -> None:
    from django.conf import settings

    warm_up = getattr(settings, "REALICU_MATCHER_WARM_UP", True)
    recycles = getattr(settings, "REALICU_WORKER_MODEL_IDLE_SECONDS", 0) > 0
    if not warm_up and not recycles:
        return

    def load() -> None:
        from evaluation.matcher import MatcherUnavailable, model_warm_up
        from evaluation.reference_calibration import (
            reference_pairs_embed,
            reference_report_for,
        )

        if warm_up:
            logger.info("worker %s: %s", os.getpid(), model_warm_up())
        else:
            # A worker that gives the model back when idle loads it at start
            # only when the reference pairs are not embedded yet (the first
            # start on a database), and ends once idle as after any task.
            try:
                reference_report_for(embedded_only=True)
                return
            except MatcherUnavailable:
                pass
        # The reference calibration page reads these embeddings from the cache.
        logger.info("worker %s: %s", os.getpid(), reference_pairs_embed())

    thread = threading.Thread(target=load, name="matcher-warm-up", daemon=True)
    _warm_up_threads.append(thread)
    thread.start()


# A worker that holds the embedding model (the packaged one on numpy: about
# 30 MB PSS, its weights mapped from their file; with torch, about 400 MB more)
# and has had no task for REALICU_WORKER_MODEL_IDLE_SECONDS ends with this exit
# code, so that an idle platform's worker is back to its light footprint;
# manage.py serve's supervisor starts it again at once, with no backoff (a
# recycle, not a crash). It ends only with no task running or reserved, by
# Celery's warm shutdown; a message it took meanwhile goes back to the broker
# unacknowledged (acks_late), and a job's lease and the reaper cover the rest.
RECYCLE_EXIT_CODE = 75


class ModelIdleClock:
    """Whether a worker process should end to give its model back: it holds the
    model, runs and holds no task, and has been so for ``limit`` seconds
    (0: never). ``due`` is asked with the time of a monotonic clock."""

    def __init__(self, limit: float):
        self.limit = limit
        self.idle_since: float | None = None

    def due(self, *, now: float, model_loaded: bool, busy: bool) -> bool:
        if self.limit <= 0 or not model_loaded or busy:
            self.idle_since = None
            return False
        if self.idle_since is None:
            self.idle_since = now
        return now - self.idle_since >= self.limit


# Libraries a task imports that an idle worker gives back with the model:
# pandas (and the pyarrow it loads) compute an import's tracks and write a
# release's Parquet file, about 50 MB PSS once imported, more with the frames'
# leftovers; torch, for a model that does not run on numpy.
RECYCLED_LIBRARIES = ("pandas", "pyarrow", "torch")


def _holds_what_idle_gives_back(libraries_at_start: frozenset[str]) -> bool:
    """Whether this process holds the embedding model, or a library of
    RECYCLED_LIBRARIES that a task imported (not one it had at its start,
    which a new process would import again)."""
    # Only the modules that load the model import evaluation.matcher in a worker
    # that has not loaded it; not imported means not loaded.
    matcher = sys.modules.get("evaluation.matcher")
    if matcher is not None and matcher.model_loaded():
        return True
    return any(
        name in sys.modules and name not in libraries_at_start
        for name in RECYCLED_LIBRARIES
    )


class ModelRecycleThread(threading.Thread):
    """Asks the worker's consumer loop for a warm shutdown with
    RECYCLE_EXIT_CODE once ``ModelIdleClock`` says so; ``stop()`` ends it.
    For the threads and solo pools, whose one process holds the model."""

    def __init__(self, limit: float):
        super().__init__(name="model-idle-recycle", daemon=True)
        self.clock = ModelIdleClock(limit)
        self.libraries_at_start = frozenset(
            name for name in RECYCLED_LIBRARIES if name in sys.modules
        )
        self.period = min(5.0, max(0.2, limit / 4))
        self._stop_event = threading.Event()

    def run(self) -> None:
        from celery.worker import state

        while not self._stop_event.wait(self.period):
            busy = bool(
                state.active_requests
                or state.reserved_requests
                or any(thread.is_alive() for thread in _warm_up_threads)
            )
            held = _holds_what_idle_gives_back(self.libraries_at_start)
            if self.clock.due(now=time.monotonic(), model_loaded=held, busy=busy):
                logger.info(
                    "worker %s: idle for %g s with the embedding model or pandas "
                    "loaded: ending to give its memory back (exit code %s)",
                    os.getpid(),
                    self.clock.limit,
                    RECYCLE_EXIT_CODE,
                )
                state.should_stop = RECYCLE_EXIT_CODE
                return

    def stop(self) -> None:
        self._stop_event.set()


@worker_init.connect
def _remember_worker_main_process(**kwargs) -> None:
    global _worker_main_pid
    _worker_main_pid = os.getpid()


@worker_process_init.connect
def _warm_up_pool_child(**kwargs) -> None:
    # Sent in each prefork child, and in the main process by the solo pool
    # (which worker_ready below covers).
    if _worker_main_pid is not None and os.getpid() != _worker_main_pid:
        # A child forked later (a replaced pool process) must not inherit the
        # parent's loop time: it has no consumer loop of its own.
        from jobs.liveness import consumer_forget

        consumer_forget()
        _model_warm_up()


@worker_ready.connect
def _warm_up_single_process_pool(sender=None, **kwargs) -> None:
    from celery.concurrency.prefork import TaskPool as PreforkPool

    if not isinstance(getattr(sender, "pool", None), PreforkPool):
        _model_warm_up()


# Housekeeping (jobs.housekeeping: the reaper and the outbox) as a thread of
# ``manage.py serve``'s worker (REALICU_WORKER_HOUSEKEEPING_THREAD), calling
# the reaper directly rather than queueing it behind the work it rescues;
# production runs ``manage.py housekeeping`` as a service. Every worker also
# records its consumer loop's last pass (jobs.presence), so pages and commands
# can tell whether any worker takes work.
_side_threads: list = []


@worker_ready.connect
def _side_threads_start(sender=None, **kwargs) -> None:
    from celery.concurrency.prefork import TaskPool as PreforkPool
    from django.conf import settings

    from jobs.housekeeping import HousekeepingThread
    from jobs.presence import PresenceThread

    if _side_threads:
        return
    _side_threads.append(PresenceThread())
    if getattr(settings, "REALICU_WORKER_HOUSEKEEPING_THREAD", False):
        _side_threads.append(HousekeepingThread())
        logger.info("housekeeping runs in a thread of worker %s", os.getpid())
    idle = getattr(settings, "REALICU_WORKER_MODEL_IDLE_SECONDS", 0)
    # A prefork worker's model is in its pool processes, not in this one; and
    # a worker that warms the model up at start wants it resident.
    if (
        idle > 0
        and not getattr(settings, "REALICU_MATCHER_WARM_UP", True)
        and not isinstance(getattr(sender, "pool", None), PreforkPool)
    ):
        _side_threads.append(ModelRecycleThread(idle))
    for thread in _side_threads:
        thread.start()


@worker_shutdown.connect
def _side_threads_stop(**kwargs) -> None:
    for thread in _side_threads:
        thread.stop()


class LoopLiveness(bootsteps.StartStopStep):
    """The event loop's timer that tells jobs.liveness the consumer loop runs
    (Redis and other asynchronous transports; the filesystem broker's
    ``drain_events`` tells it itself, realicu_web.broker)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent, **kwargs):
        super().__init__(parent, **kwargs)
        self.timer = None

    def start(self, parent) -> None:
        from jobs.liveness import consumer_beat

        hub = getattr(parent.controller, "hub", None)
        if hub is not None and self.timer is None:
            consumer_beat()
            self.timer = hub.call_repeatedly(1.0, consumer_beat)

    def stop(self, parent) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


app.steps["consumer"].add(LoopLiveness)

# After a broker outage a prefork worker must not hold a task behind one that
# still runs while another process idles (issue 29): the pool's busy marks are
# repaired as the consumer reconnects, and a watchdog hands back to the broker
# any task held REALICU_WORKER_STUCK_SECONDS while pool processes are free.
app.steps["consumer"].add(PoolWatchdog)
