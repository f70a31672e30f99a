"""The Celery application; configuration comes from Django settings (CELERY_*).
A worker loads the embedding model as it starts (``_model_warm_up``), records
its consumer loop's liveness (``LoopLiveness``, ``_side_threads_start``) and may
run housekeeping in a thread."""

import logging
import os
import threading

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
# thread, rather than by its first agreement task: loading takes seconds
# (importing torch, reading the weights), and a task that needs the model
# meanwhile simply waits for the same load (evaluation.matcher.load_model's
# lock), holding no database lock. With the prefork pool each child process
# loads its own copy, once it is forked; with the threads or solo pool the
# worker's one process loads it once it is ready, after the embedded beat
# process has been forked, so beat does not start with a copy.
_worker_main_pid: int | None = None


def _model_warm_up() -> None:
    from django.conf import settings

    if not getattr(settings, "REALICU_MATCHER_WARM_UP", True):
        return

    def load() -> None:
        from evaluation.matcher import model_warm_up
        from evaluation.reference_calibration import reference_pairs_embed

        logger.info("worker %s: %s", os.getpid(), model_warm_up())
        # The reference calibration page reads these embeddings from the cache.
        logger.info("worker %s: %s", os.getpid(), reference_pairs_embed())

    threading.Thread(target=load, name="matcher-warm-up", daemon=True).start()


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
def _side_threads_start(**kwargs) -> None:
    from django.conf import settings

    from jobs.housekeeping import HousekeepingThread
    from jobs.presence import PresenceThread

    if _side_threads:
        return
    _side_threads.append(PresenceThread())
    if getattr(settings, "REALICU_WORKER_HOUSEKEEPING_THREAD", False):
        _side_threads.append(HousekeepingThread())
        logger.info("housekeeping runs in a thread of worker %s", os.getpid())
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
