"""manage.py oracle_run --campaign ID | --cohort ID | --resume RUN_ID [--backbone
NAME] [--inline]: the command-line twin of the run page, with a progress line."""

from __future__ import annotations

import time

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_row, command_user, service_refusals
from annotation.models import Campaign
from jobs.progress import bar_line, command_stream
from oracle import selectors, services
from oracle.models import Backbone, OracleRun, RunState
from windows.models import Cohort

FOLLOW_SECONDS = 1.0


def _bar(progress: dict) -> str:
    rate = progress["rate_recent"] or progress["rate_overall"]
    rate_text = f" · {rate:,.0f} windows/min" if rate else ""
    failed = f" · {progress['failed']} failed" if progress["failed"] else ""
    return bar_line(
        progress["percent"],
        f"{progress['done']}/{progress['total']}{failed}{rate_text} "
        f"· {progress['state_display'].lower()}",
    )


class Command(BaseCommand):
    help = (
        "Start an Oracle run over a campaign's windows or a cohort's candidate "
        "windows (or resume one), then follow its progress. --inline labels in this "
        "process instead of on the workers."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--campaign", type=int, help="Campaign id.")
        which.add_argument("--cohort", type=int, help="Cohort id.")
        which.add_argument("--resume", type=int, metavar="RUN_ID", help="Resume a run.")
        parser.add_argument(
            "--backbone", help="Backbone name (default: the rules backbone, no LLM)."
        )
        parser.add_argument("--name", help="Run name.")
        parser.add_argument(
            "--inline", action="store_true", help="Label here, without a worker."
        )
        parser.add_argument("--chunk-size", type=int, default=None)
        parser.add_argument(
            "--admin",
            help="Username of the admin the run is recorded under "
            "(default: the first superuser).",
        )

    def handle(
        self,
        *args,
        campaign=None,
        cohort=None,
        resume=None,
        backbone=None,
        name=None,
        inline=False,
        chunk_size=None,
        admin=None,
        **options,
    ):
        user = command_user(admin, option="--admin", recorded="the run")
        enqueue = not inline
        with service_refusals():
            if resume is not None:
                run = services.oracle_run_resume(
                    admin=user,
                    run=command_row(OracleRun, resume, "Oracle run"),
                    enqueue=enqueue,
                )
            else:
                if backbone:
                    chosen = Backbone.objects.filter(name=backbone).first()
                    if chosen is None:
                        names = ", ".join(
                            Backbone.objects.values_list("name", flat=True)
                        )
                        raise CommandError(f"No backbone named {backbone!r} ({names}).")
                else:
                    chosen = selectors.backbone_rules_default()
                found_campaign = found_cohort = None
                if campaign is not None:
                    found_campaign = command_row(Campaign, campaign, "campaign")
                else:
                    found_cohort = command_row(Cohort, cohort, "cohort")
                target = found_campaign or found_cohort
                run = services.oracle_run_create(
                    admin=user,
                    name=name or f"{chosen.name} on {target}",
                    backbone=chosen,
                    campaign=found_campaign,
                    cohort=found_cohort,
                    enqueue=enqueue,
                )
        self.stdout.write(f"Oracle run {run.pk}: {run.total_windows} windows.")
        out = command_stream(self)

        def show(_=None):
            run.refresh_from_db()
            out.write(_bar(selectors.oracle_run_progress(admin=user, run=run)))
            out.flush()

        try:
            if inline:
                try:
                    services.oracle_run_execute_inline(
                        run_id=run.pk, chunk_size=chunk_size, on_chunk=show
                    )
                except Exception as error:
                    services.oracle_run_fail(
                        run_id=run.pk, error=f"{type(error).__name__}: {error}"
                    )
                    raise CommandError(f"Run {run.pk} failed: {error}") from error
            else:
                while True:
                    show()
                    if run.state not in (RunState.QUEUED, RunState.RUNNING):
                        break
                    time.sleep(FOLLOW_SECONDS)
        except (ValidationError, PermissionDenied, CommandError):
            raise
        except KeyboardInterrupt:
            out.write("\n")
            self.stdout.write(
                f"Stopped following; run {run.pk} goes on"
                + (
                    " on the workers."
                    if not inline
                    else f" when resumed (--resume {run.pk})."
                )
            )
            return
        show()
        out.write("\n")
        run.refresh_from_db()
        progress = selectors.oracle_run_progress(admin=user, run=run)
        self.stdout.write(
            f"Run {run.pk} {run.get_state_display().lower()}: {progress['ok']} "
            "labelled, "
            f"{progress['failed']} failed, {progress['remaining']} to do."
        )
        if run.error:
            raise CommandError(run.error)
        # A run that ended with failed windows did not do what was asked: the
        # exit status says so (scripts and CI read it), with the reasons.
        if progress["failed"] and not progress["active"]:
            reasons = "; ".join(
                f"{count} × {reason}" for reason, count in progress["failure_reasons"]
            )
            raise CommandError(
                f"Run {run.pk}: {progress['failed']} of {progress['total']} windows "
                f"failed ({reasons}). Retry them from the run page."
            )
        if run.state == RunState.CANCELLED:
            raise CommandError(f"Run {run.pk} was cancelled before it finished.")
