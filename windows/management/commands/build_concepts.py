"""manage.py build_concepts [--stay ID] [--force]: compute and store concept tracks."""

from django.core.management.base import BaseCommand, CommandError

from jobs.progress import ConsoleProgress, Progress
from windows.models import Stay
from windows.tracks import tracks_build_all


class Command(BaseCommand):
    help = "Compute the hourly clinical concept tracks of every stay (or one)."

    def add_arguments(self, parser):
        parser.add_argument("--stay", type=int, help="Only this stay id.")
        parser.add_argument(
            "--force", action="store_true", help="Recompute current tracks."
        )

    def handle(self, *args, stay=None, force=False, **options):
        stays = Stay.objects.order_by("pk")
        if stay is not None:
            stays = stays.filter(pk=stay)
            if not stays.exists():
                raise CommandError(f"No stay with id {stay}.")
        progress = Progress(sinks=[ConsoleProgress(stream=self.stderr._out)])
        built = tracks_build_all(stays=stays, progress=progress, force=force)
        self.stdout.write(
            f"Concept tracks: {built} stays computed, "
            f"{stays.count() - built} already current."
        )
