"""``manage.py import_mimic DIR``: import a MIMIC-IV v2.x folder (hosp/, icu/);
``--cohort-size N --seed S`` or ``--stays FILE`` import a cohort of it first."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.progress import ConsoleProgress, Progress
from windows.importers.mimic import mimic_import


class Command(BaseCommand):
    help = (
        "Import a MIMIC-IV v2.x folder (hosp/ and icu/: csv, csv.gz, parquet or "
        "folders of parquet files), whole or a cohort of its stays chosen first. "
        "Each event file is read once. Admissions already imported are skipped, "
        "so a re-run after an error resumes."
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
        chosen = parser.add_mutually_exclusive_group()
        chosen.add_argument(
            "--cohort-size",
            type=int,
            default=None,
            help="Import only this many stays, drawn from patients, admissions and "
            "icustays as build_cohort draws (one per patient, outcome x length "
            "strata balanced).",
        )
        chosen.add_argument(
            "--stays",
            type=Path,
            default=None,
            help="Import only the stays listed in this file (stay_ids, one a line).",
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the --cohort-size draw."
        )

    def handle(
        self,
        *args,
        directory: Path,
        batch_stays: int | None,
        cohort_size: int | None = None,
        stays: Path | None = None,
        seed: int = 0,
        **options,
    ) -> None:
        # The progress line rewrites itself with "\r", which Django's output
        # wrapper would end with a newline, so it goes to the raw stream.
        progress = Progress(
            sinks=[ConsoleProgress(stream=options.get("stderr") or sys.stderr)]
        )
        try:
            summary = mimic_import(
                directory=directory,
                progress=progress,
                batch_stays=batch_stays,
                cohort_size=cohort_size,
                seed=seed,
                stays_file=stays,
            )
        except ValidationError as exc:  # SourceDataError included
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(str(summary))
