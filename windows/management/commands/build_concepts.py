"""manage.py build_concepts [--stay ID] [--force] [--inline]: compute and store
concept tracks, in batches of stays shared by the workers (followed with a
progress line), or here with --inline."""

from django.core.management.base import BaseCommand

from accounts.commands import command_row
from jobs.progress import command_progress
from windows.management.commands._build_follow import (
    build_on_workers,
    build_options_add,
)
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
        build_options_add(parser, inline_help="Compute here, without a worker.")

    def handle(
        self, *args, stay=None, force=False, inline=False, batch_stays=None, **options
    ):
        stays = Stay.objects.order_by("pk")
        if stay is not None:
            stays = stays.filter(pk=command_row(Stay, stay, "stay").pk)
        if inline:
            progress = command_progress(self)
            built = tracks_build_all(stays=stays, progress=progress, force=force)
            total = stays.count()
        else:
            run = build_on_workers(
                self,
                kind=BuildKind.TRACKS,
                stays=stays,
                params={"force": force},
                batch_stays=batch_stays,
            )
            built = run.summary.get("computed", 0)
            total = run.stays_total
        self.stdout.write(
            f"Concept tracks: {built} stays computed, {total - built} already current."
        )
