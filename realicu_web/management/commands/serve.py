"""manage.py serve: the web server (gunicorn) and a Celery worker together, in the
foreground, kept up by a supervisor that imports nothing of the project
(``_supervisor.py``): a process that exits, or a worker whose consumer loop
stops, is started again with backoff while the other serves on. Ctrl-C (or
SIGTERM) stops both. The worker runs its tasks in threads of one process by
default, so the embedding model is in memory once, and only while needed: it
is loaded by the first task that matches texts (no warm-up) and given back by
the worker ending after REALICU_WORKER_MODEL_IDLE_SECONDS idle (300 here),
which the supervisor takes as a recycle and starts it again at once."""

import json
import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from realicu_web.celery import RECYCLE_EXIT_CODE

# The worker's memory on an embedded platform (issue 35): no model at start, and
# the model given back after five idle minutes; the environment may say otherwise.
WORKER_MODEL_DEFAULTS = {
    "REALICU_MATCHER_WARM_UP": "false",
    "REALICU_WORKER_MODEL_IDLE_SECONDS": "300",
}
# glibc gives each thread that allocates its own malloc arena (up to 8 per core),
# and an arena keeps what its thread freed: the worker's task threads and side
# threads and the web's request threads each held their own heap's leftovers.
# Two arenas per process (issue 35); the environment may say otherwise.
PROCESS_MEMORY_DEFAULTS = {"MALLOC_ARENA_MAX": "2"}


def _defaults(values: dict[str, str]) -> dict[str, str]:
    """``values``, each replaced by the environment's value when it has one."""
    return {key: os.environ.get(key, value) for key, value in values.items()}


def web_command(*, bind: str, workers: int, threads: int) -> list[str]:
    """The web server's command line: gunicorn with the project's
    gunicorn.conf.py, whose uvicorn worker reads headers and bodies on its
    loop within deadlines before a request takes one of the ``threads``
    (realicu_web.webserver), so stalled clients cannot hold them all."""
    return [
        os.path.join(os.path.dirname(sys.executable), "gunicorn"),
        "-c",
        os.path.join(settings.BASE_DIR, "gunicorn.conf.py"),
        "--bind",
        bind,
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--access-logfile",
        "-",
    ]


class Command(BaseCommand):
    help = "Run the web server and a Celery worker, kept up; Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", default=os.environ.get("REALICU_BIND", "127.0.0.1:8000")
        )
        # One web process with four threads: each process holds the project
        # (Django, numpy: about 150 MB PSS after a while), and the embedded
        # default serves one machine's team; measured on 160 windows by three
        # physicians (benchmarks/embedded_pipeline_bench.py), web and worker
        # once came to about 1 GB RSS this way and 1.2 GB with two processes,
        # with no slower saves; now 343 MB PSS in all (issue 35). Production
        # sizes gunicorn by gunicorn.conf.py.
        parser.add_argument("--web-workers", type=int, default=1)
        parser.add_argument("--web-threads", type=int, default=4)
        parser.add_argument(
            "--concurrency",
            type=int,
            default=2,
            help="Tasks the Celery worker runs at once.",
        )
        parser.add_argument(
            "--pool",
            choices=("threads", "prefork", "solo"),
            default="threads",
            help="Celery pool. threads (the default): one worker process, so one "
            "embedding model in memory however many tasks run at once; prefork "
            "loads one per process.",
        )

    def handle(
        self, *args, bind, web_workers, web_threads, concurrency, pool, **options
    ):
        if settings.CELERY_BROKER_URL.startswith("filesystem://"):
            for key in ("data_folder_in", "processed_folder", "control_folder"):
                os.makedirs(
                    settings.CELERY_BROKER_TRANSPORT_OPTIONS[key], exist_ok=True
                )
        os.makedirs(settings.CELERY_BROKER_DIR, exist_ok=True)
        bin_dir = os.path.dirname(sys.executable)
        web = web_command(bind=bind, workers=web_workers, threads=web_threads)
        worker = [
            os.path.join(bin_dir, "celery"),
            "-A",
            "realicu_web",
            "worker",
            "--loglevel",
            "INFO",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
        ]
        # Housekeeping (reaper, outbox) as a thread of the worker, whatever
        # its pool; production runs `manage.py housekeeping` instead.
        worker_env = {
            "REALICU_WORKER_HOUSEKEEPING_THREAD": "1",
            **_defaults(WORKER_MODEL_DEFAULTS),
            **_defaults(PROCESS_MEMORY_DEFAULTS),
        }
        worker_spec = {
            "name": "worker",
            "argv": worker,
            "env": worker_env,
            "recycle_exit_code": RECYCLE_EXIT_CODE,
        }
        if pool != "solo":
            # The consumer loop touches this file (jobs.liveness); the solo
            # pool runs each task inside that loop, so a long task would look
            # like a hang there.
            liveness = os.path.join(settings.CELERY_BROKER_DIR, "worker.alive")
            worker_env["REALICU_WORKER_LIVENESS_FILE"] = liveness
            worker_spec.update(
                liveness_file=liveness,
                liveness_stale=settings.REALICU_WORKER_HANG_SECONDS,
                liveness_grace=max(180.0, settings.REALICU_WORKER_HANG_SECONDS),
            )
        spec = {
            "address": bind,
            "commands": [
                {"name": "web", "argv": web, "env": _defaults(PROCESS_MEMORY_DEFAULTS)},
                worker_spec,
            ],
        }
        # This process has the whole project imported; the supervisor that
        # replaces it (same pid, so Ctrl-C and SIGTERM reach it) does not.
        sys.stdout.flush()
        sys.stderr.flush()
        supervisor = os.path.join(os.path.dirname(__file__), "_supervisor.py")
        os.execv(sys.executable, [sys.executable, supervisor, json.dumps(spec)])
