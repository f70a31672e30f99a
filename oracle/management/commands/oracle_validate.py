"""manage.py oracle_validate RUN_ID --campaign ID [--admin NAME]: the Oracle run
measured against the campaign's Gold consensus (paper Table 1), computed in this
process with a progress line, and stored as a validation report."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from accounts.commands import command_row, command_user, service_refusals
from annotation.models import Campaign
from jobs.progress import bar_line, command_stream, percent_of
from oracle import services
from oracle.models import OracleRun


def _figure(value) -> str:
    return "–" if value is None else f"{value:.3f}"


class Command(BaseCommand):
    help = (
        "Validate an Oracle run against a campaign's Gold consensus and store the "
        "report (the page queues the same on a worker)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, metavar="RUN_ID")
        parser.add_argument("--campaign", type=int, required=True, help="Campaign id.")
        parser.add_argument(
            "--admin",
            help="Username the report is recorded under "
            "(default: the first superuser).",
        )

    def handle(self, *args, run_id, campaign, admin=None, **options):
        user = command_user(admin, option="--admin", recorded="the report")
        run = command_row(
            OracleRun.objects.select_related("prompt"), run_id, "Oracle run"
        )
        found = command_row(Campaign, campaign, "campaign")
        out = command_stream(self)

        def show(done: int, total: int, label: str) -> None:
            out.write(bar_line(percent_of(done, total), f"{done}/{total} · {label}"))
            out.flush()

        with service_refusals():
            report = services.validation_report_create(
                admin=user, run=run, campaign=found, on_progress=show
            )
        out.write("\n")
        figures = report.report
        self.stdout.write(
            f"Validation report {report.pk}: run {run.pk} against {found} "
            f"({figures['n_windows']} windows compared, {figures['n_missing']} "
            f"without an Oracle label; matcher {report.matcher_model}, "
            f"tau {report.tau:g})"
        )
        self.stdout.write(
            f"  status macro-F1 {_figure(figures['status_macro_f1'])}, "
            f"accuracy {_figure(figures['status_accuracy'])}"
        )
        for task in ("acute_problems", "recommended_actions", "red_flags"):
            self.stdout.write(
                f"  {task.replace('_', ' ')} semantic F1 {_figure(figures[task]['f1'])}"
            )
        awaiting = (figures.get("excluded") or {}).get("awaiting") or {}
        if awaiting.get("count"):
            named = ", ".join(
                f"stay {w['stay_id']} window {w['index']}"
                for w in awaiting.get("windows", [])
            )
            self.stdout.write(
                f"  {awaiting['count']} window(s) still await the physicians' "
                f"labels and are not in this report: {named}"
            )
