"""manage.py oracle_promotion_thresholds [--status F1 --problems F1 --actions F1
--red-flags F1 --note TEXT --admin NAME]: prints the validation figures an
Oracle run's report must reach to become a RealICU-Scale release, or sets new
ones (all four at once; the earlier ones stay as history)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_user, service_refusals
from oracle.promotion_gate import (
    GATE_FIGURES,
    PAPER_TABLE1,
    promotion_thresholds_current,
    promotion_thresholds_set,
)

OPTIONS = {
    "status": "status_macro_f1",
    "problems": "acute_problems_f1",
    "actions": "recommended_actions_f1",
    "red_flags": "red_flags_f1",
}


class Command(BaseCommand):
    help = (
        "Show or set the promotion thresholds of Oracle runs (paper Table 1 figures)."
    )

    def add_arguments(self, parser):
        for option, key in OPTIONS.items():
            parser.add_argument(
                f"--{option.replace('_', '-')}",
                type=float,
                dest=option,
                help=f"{GATE_FIGURES[key][0]} (paper: {PAPER_TABLE1[key]}).",
            )
        parser.add_argument("--note", default="", help="Why they change.")
        parser.add_argument(
            "--admin",
            help="Username recorded as setting them (default: first superuser).",
        )

    def handle(self, *args, note="", admin=None, **options):
        given = {key: options.get(option) for option, key in OPTIONS.items()}
        if any(v is not None for v in given.values()):
            if any(v is None for v in given.values()):
                raise CommandError(
                    "Give all four: --status --problems --actions --red-flags."
                )
            user = command_user(admin, option="--admin", recorded="the thresholds")
            with service_refusals():
                promotion_thresholds_set(user=user, values=given, note=note)
        current = promotion_thresholds_current()
        who = (
            f", {current['set_by']} at {current['set_at']}" if current["set_by"] else ""
        )
        self.stdout.write(f"Promotion thresholds ({current['source']}{who}):")
        for key, (label, _path) in GATE_FIGURES.items():
            self.stdout.write(
                f"  {label:28} {current['values'][key]:.3f}  (paper Table 1: "
                f"{PAPER_TABLE1[key]})"
            )
