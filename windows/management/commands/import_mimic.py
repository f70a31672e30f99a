"""``manage.py import_mimic DIR``: import a MIMIC-IV v2.x folder (hosp/, icu/)."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.progress import ConsoleProgress, Progress
from windows.importers.mimic import mimic_import


class Command(BaseCommand):
    help = (
        "Import a MIMIC-IV v2.x folder (hosp/ and icu/, csv or csv.gz). Admissions "
        "already imported are skipped, so a re-run after an error resumes."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "directory", type=Path, help="The folder holding hosp/ and icu/."
        )
        parser.add_argument(
            "--batch-stays",
            type=int,
            default=None,
            help="ICU stays per transaction (default: REALICU_IMPORT_BATCH_STAYS).",
        )

    def handle(
        self, *args, directory: Path, batch_stays: int | None, **options
    ) -> None:
        # The progress line rewrites itself with "\r", which Django's output
        # wrapper would end with a newline, so it goes to the raw stream.
        progress = Progress(
            sinks=[ConsoleProgress(stream=options.get("stderr") or sys.stderr)]
        )
        try:
            summary = mimic_import(
                directory=directory, progress=progress, batch_stays=batch_stays
            )
        except ValidationError as exc:  # SourceDataError included
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(str(summary))
