"""manage.py build_cohort --name N --size 94 --seed 0: select and save a cohort."""

from django.core.management.base import BaseCommand

from accounts.commands import service_refusals
from windows.cohort import STRATA, cohort_build
from windows.models import CohortStratum


class Command(BaseCommand):
    help = (
        "Select a cohort: one ICU stay per patient, short stays dropped, balanced by "
        "outcome and length of stay, reproducible from the seed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--size", type=int, default=94, help="Target number of stays."
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--min-hours", type=float, default=4, help="Drop stays shorter than this."
        )
        parser.add_argument(
            "--long-stay-hours",
            type=float,
            default=96,
            help="Stays at least this long form the long strata.",
        )

    def handle(self, *args, name, size, seed, min_hours, long_stay_hours, **options):
        with service_refusals():
            cohort = cohort_build(
                name=name,
                target_size=size,
                seed=seed,
                min_hours=min_hours,
                long_stay_hours=long_stay_hours,
            )
        summary = cohort.summary
        self.stdout.write(
            f"Cohort {cohort.pk} {cohort.name!r}: {summary['size']} stays of target "
            f"{cohort.target_size}, seed {cohort.seed}; {summary['patients']} patients "
            f"with an eligible stay (>= {cohort.settings['min_hours']:g} h)"
        )
        self.stdout.write(f"  {'stratum':<24} {'available':>10} {'selected':>10}")
        for stratum in STRATA:
            row = summary["strata"][stratum]
            label = CohortStratum(stratum).label
            self.stdout.write(
                f"  {label:<24} {row['available']:>10} {row['selected']:>10}"
            )
        total_available = sum(r["available"] for r in summary["strata"].values())
        self.stdout.write(
            f"  {'total':<24} {total_available:>10} {summary['size']:>10}"
        )
