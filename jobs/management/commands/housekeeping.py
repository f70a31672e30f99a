"""manage.py housekeeping: the reaper and the outbox dispatch in a loop of their
own (jobs.housekeeping), the production service that replaces beat. Ctrl-C or
SIGTERM stops it after the round under way."""

import signal
import threading

from django.core.management.base import BaseCommand

from jobs.housekeeping import housekeeping_loop, housekeeping_round, reap_seconds


class Command(BaseCommand):
    help = "Re-queue jobs that lost their worker and send the outbox, in a loop."

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="Seconds between rounds (REALICU_JOB_REAP_SECONDS, 30).",
        )
        parser.add_argument("--once", action="store_true", help="One round, then exit.")

    def handle(self, *args, interval=None, once=False, **options):
        if once:
            self.stdout.write(str(housekeeping_round()))
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(
            f"housekeeping: a round every {interval or reap_seconds():g} s"
        )
        housekeeping_loop(stop=stop, interval=interval)
