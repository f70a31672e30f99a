"""manage.py build_windows (--cohort ID | --all) [--seed S] [--inline]: candidate
windows and the Gold draw of each stay, in batches of stays shared by the workers
(followed with a progress line), or here with --inline. Both give the same
windows and the same Gold draw: the draw is per stay (windows.builds)."""

from django.core.management.base import BaseCommand

from accounts.commands import command_row, service_refusals
from jobs.progress import command_progress
from windows.management.commands._build_follow import (
    build_on_workers,
    build_options_add,
)
from windows.models import BuildKind, Cohort, Stay
from windows.windowing import WindowsBuildSummary, windows_build_many


class Command(BaseCommand):
    help = (
        "Build the candidate windows of a cohort's stays (or of every stay) and draw "
        "their Gold windows. Safe to rerun."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--cohort", type=int, help="Cohort id.")
        which.add_argument("--all", action="store_true", help="Every imported stay.")
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the Gold draw."
        )
        parser.add_argument("--window-minutes", type=float, default=None)
        parser.add_argument("--stride-hours", type=float, default=None)
        parser.add_argument(
            "--per-stay", type=int, default=None, help="Gold windows per stay."
        )
        parser.add_argument(
            "--high-share",
            type=float,
            default=None,
            help="Share of Gold windows from the high-density regime.",
        )
        build_options_add(parser, inline_help="Build here, without a worker.")

    def handle(
        self,
        *args,
        cohort=None,
        all=False,
        seed=0,
        window_minutes=None,
        stride_hours=None,
        per_stay=None,
        high_share=None,
        inline=False,
        batch_stays=None,
        **options,
    ):
        if cohort is not None:
            stays = Stay.objects.filter(
                cohort_stays__cohort=command_row(Cohort, cohort, "cohort")
            )
        else:
            stays = Stay.objects.all()
        params = {
            "seed": seed,
            "window_minutes": window_minutes,
            "stride_hours": stride_hours,
            "per_stay": per_stay,
            "high_share": high_share,
        }
        with service_refusals():
            if inline:
                progress = command_progress(self)
                summary = windows_build_many(
                    stays=stays.order_by("pk"), progress=progress, **params
                )
            else:
                run = build_on_workers(
                    self,
                    kind=BuildKind.WINDOWS,
                    stays=stays.order_by("pk"),
                    params=params,
                    batch_stays=batch_stays,
                )
                settings = dict(run.params)
                summary = WindowsBuildSummary(
                    **{
                        k: run.summary.get(k, 0)
                        for k in WindowsBuildSummary().as_dict()
                        if k != "settings"
                    },
                    settings=settings,
                )
        self.stdout.write(str(summary))
