"""``manage.py import_mimic DIR``: import a MIMIC-IV v2.x folder (hosp/, icu/);
``--cohort-size N --seed S`` or ``--stays FILE`` import a cohort of it first;
``--fan-out`` plans the import here and leaves its batches to the workers
(windows.import_batches), following them to the end."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import service_refusals
from jobs.progress import bar_line, command_progress, command_stream, percent_of
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
        parser.add_argument(
            "--fan-out",
            action="store_true",
            help="Read the folder and store each batch's rows here (in the object "
            "store when one is set), then let the Celery workers import the "
            "batches, on as many machines as share the database and the store; "
            "follows them to the end. The whole folder, no cohort.",
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
        progress = command_progress(self)
        if options.get("fan_out"):
            if cohort_size is not None or stays is not None:
                raise CommandError(
                    "--fan-out imports the whole folder: choose the cohort with "
                    "build_cohort after the import, or import it without --fan-out."
                )
            self._fan_out(directory, batch_stays, progress)
            return
        with service_refusals():
            summary = mimic_import(
                directory=directory,
                progress=progress,
                batch_stays=batch_stays,
                cohort_size=cohort_size,
                seed=seed,
                stays_file=stays,
            )
        self.stdout.write(str(summary))

    def _fan_out(self, directory, batch_stays, progress) -> None:
        from windows.import_batches import import_run_fan_out_here, import_run_follow
        from windows.importers.base import ImportSummary
        from windows.models import BuildState, ImportStatus

        with service_refusals():
            run = import_run_fan_out_here(
                directory=directory, progress=progress, batch_stays=batch_stays
            )
        stream = command_stream(self)
        started = time.monotonic()
        told = False
        while run.status == ImportStatus.BATCHES:
            time.sleep(FOLLOW_SECONDS)
            run = import_run_follow(run_id=run.pk)
            taken = run.batches.exclude(state=BuildState.QUEUED).exists()
            stream.write(
                bar_line(
                    percent_of(run.progress_done, run.progress_total),
                    f"import {run.pk}: {run.progress_done}/{run.progress_total} "
                    f"batches done · {time.monotonic() - started:6.1f}s",
                )
            )
            stream.flush()
            if not taken and not told and time.monotonic() - started > NO_WORKER:
                stream.write(
                    f"\nNo worker has taken a batch of import {run.pk} in "
                    f"{NO_WORKER:g} s: is a worker running? Start one (`manage.py "
                    "serve` or `celery -A realicu_web worker`); the batches wait "
                    "for it. Or import without --fan-out.\n"
                )
                told = True
        stream.write("\n")
        if run.status != ImportStatus.DONE:
            raise CommandError(f"Import {run.pk} {run.status}: {run.error}")
        fields = {k: v for k, v in run.summary.items() if k != "total_events"}
        self.stdout.write(
            f"import {run.pk}, {run.progress_total} batches on the workers\n"
            + str(ImportSummary(**fields))
        )


FOLLOW_SECONDS = 1.0
NO_WORKER = 10.0
