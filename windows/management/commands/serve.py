"""manage.py serve: the web server (gunicorn) and a Celery worker together, in the
foreground. Ctrl-C (or SIGTERM) stops both."""

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the web server and a Celery worker together; Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", default=os.environ.get("REALICU_BIND", "127.0.0.1:8000")
        )
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument(
            "--concurrency", type=int, default=2, help="Celery worker processes."
        )

    def handle(self, *args, bind, web_workers, concurrency, **options):
        if settings.CELERY_BROKER_URL.startswith("filesystem://"):
            for key in ("data_folder_in", "processed_folder", "control_folder"):
                os.makedirs(
                    settings.CELERY_BROKER_TRANSPORT_OPTIONS[key], exist_ok=True
                )
        bin_dir = os.path.dirname(sys.executable)
        config = os.path.join(settings.BASE_DIR, "gunicorn.conf.py")
        web = [
            os.path.join(bin_dir, "gunicorn"),
            "-c",
            config,
            "--bind",
            bind,
            "--workers",
            str(web_workers),
            "--access-logfile",
            "-",
        ]
        worker = [
            os.path.join(bin_dir, "celery"),
            "-A",
            "realicu_web",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(concurrency),
            # beat inside this one worker: the reaper (jobs.reaper) on its
            # schedule; production runs beat as its own service.
            "--beat",
            "--schedule",
            settings.CELERY_BEAT_SCHEDULE_FILENAME,
        ]
        procs = [subprocess.Popen(web), subprocess.Popen(worker)]
        self.stdout.write(
            f"RealICU Web at http://{bind}/  (Ctrl-C stops web and worker)"
        )

        stopping = False
        interrupted = False

        def on_signal(*_):
            nonlocal interrupted
            interrupted = True
            stop()

        def stop():
            nonlocal stopping
            if stopping:
                return
            stopping = True
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        try:
            while not stopping and all(p.poll() is None for p in procs):
                time.sleep(0.5)
        finally:
            stop()
            deadline = time.monotonic() + 20
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
        code = max((p.returncode or 0) for p in procs)
        if not interrupted:
            self.stderr.write("A process stopped by itself; both are stopped now.")
            raise SystemExit(code or 1)
