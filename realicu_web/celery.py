"""The Celery application; configuration comes from Django settings (CELERY_*).
A worker loads the embedding model as it starts (``_model_warm_up``), and may run
beat in a thread (``_beat_thread_start``)."""

import logging
import os
import threading

from celery import Celery
from celery.signals import (
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

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

        logger.info("worker %s: %s", os.getpid(), model_warm_up())

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
        _model_warm_up()


@worker_ready.connect
def _warm_up_single_process_pool(sender=None, **kwargs) -> None:
    from celery.concurrency.prefork import TaskPool as PreforkPool

    if not isinstance(getattr(sender, "pool", None), PreforkPool):
        _model_warm_up()


# Beat in a thread of the worker, for ``manage.py serve``'s one-process worker
# (REALICU_WORKER_BEAT_THREAD): the schedule is the reaper's, a few light tasks
# a minute, which does not need the 100+ MB process ``worker --beat`` forks.
_beat = None


@worker_ready.connect
def _beat_thread_start(**kwargs) -> None:
    global _beat
    from celery.beat import EmbeddedService
    from django.conf import settings

    if not getattr(settings, "REALICU_WORKER_BEAT_THREAD", False) or _beat:
        return
    _beat = EmbeddedService(
        app, thread=True, schedule_filename=settings.CELERY_BEAT_SCHEDULE_FILENAME
    )
    _beat.start()
    logger.info("beat runs in a thread of worker %s", os.getpid())


@worker_shutdown.connect
def _beat_thread_stop(**kwargs) -> None:
    if _beat is not None:
        _beat.stop()
