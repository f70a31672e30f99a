"""manage.py build_concepts [--stay ID] [--force] [--inline]: compute and store
concept tracks, in batches of stays shared by the workers (followed with a
progress line), or here with --inline."""

import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.progress import ConsoleProgress, Progress
from windows.builds import build_run_create
from windows.management.commands._build_follow import build_run_follow
from windows.models import BuildKind, Stay
from windows.tracks import tracks_build_all


class Command(BaseCommand):
    help = (
        "Compute the hourly clinical concept tracks of every stay (or one), on the "
        "workers; --inline computes them in this process."
    )

    def add_arguments(self, parser):
        parser.add_argument("--stay", type=int, help="Only this stay id.")
        parser.add_argument(
            "--force", action="store_true", help="Recompute current tracks."
        )
        parser.add_argument(
            "--inline", action="store_true", help="Compute here, without a worker."
        )
        parser.add_argument(
            "--batch-stays",
            type=int,
            default=None,
            help="Stays per worker batch (default: REALICU_BUILD_BATCH_STAYS).",
        )

    def handle(
        self, *args, stay=None, force=False, inline=False, batch_stays=None, **options
    ):
        stays = Stay.objects.order_by("pk")
        if stay is not None:
            stays = stays.filter(pk=stay)
            if not stays.exists():
                raise CommandError(f"No stay with id {stay}.")
        stream = getattr(self.stderr, "_out", None) or sys.stderr
        if inline:
            progress = Progress(sinks=[ConsoleProgress(stream=stream)])
            built = tracks_build_all(stays=stays, progress=progress, force=force)
            total = stays.count()
        else:
            try:
                run = build_run_create(
                    kind=BuildKind.TRACKS,
                    stays=stays,
                    params={"force": force},
                    batch_stays=batch_stays,
                )
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from exc
            run = build_run_follow(run=run, stdout=self.stdout, stream=stream)
            built = run.summary.get("computed", 0)
            total = run.stays_total
        self.stdout.write(
            f"Concept tracks: {built} stays computed, {total - built} already current."
        )
