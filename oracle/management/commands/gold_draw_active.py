"""manage.py gold_draw_active --name NAME --run A --second-run B --budget N
--physicians U1,U2 [--admin NAME] [--floor 0.7] [--seed 0] [--per-window 2]:
a Gold campaign drawn where two Oracle runs disagree most, with a uniform
floor, and each drawn window's inclusion probability stored (issue 33)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from evaluation.ppi import DEFAULT_FLOOR
from oracle.models import GoldInclusion, OracleRun
from oracle.services.gold_draw import gold_campaign_draw_active


class Command(BaseCommand):
    help = (
        "Draw a Gold campaign with probabilities that grow with the disagreement "
        "of two Oracle runs, and store them for the score intervals."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="The campaign's name.")
        parser.add_argument("--run", type=int, required=True, help="Oracle run id.")
        parser.add_argument(
            "--second-run", type=int, required=True, help="A second Oracle run id."
        )
        parser.add_argument(
            "--budget", type=int, required=True, help="Expected Gold windows."
        )
        parser.add_argument(
            "--physicians", required=True, help="Usernames, comma-separated."
        )
        parser.add_argument("--admin", help="Default: the first superuser.")
        parser.add_argument("--floor", type=float, default=DEFAULT_FLOOR)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--per-window", type=int, default=2)

    def handle(self, *args, **o):
        users = get_user_model().objects.filter(is_active=True)
        admin = (
            users.filter(username=o["admin"]).first()
            if o["admin"]
            else users.filter(is_superuser=True).order_by("pk").first()
        )
        if admin is None:
            raise CommandError("No such active admin: pass --admin.")
        runs = {
            r.pk: r
            for r in OracleRun.objects.filter(pk__in=[o["run"], o["second_run"]])
        }
        missing = [pk for pk in (o["run"], o["second_run"]) if pk not in runs]
        if missing:
            raise CommandError(f"No Oracle run {missing[0]}.")
        names = [n.strip() for n in o["physicians"].split(",") if n.strip()]
        physicians = list(users.filter(username__in=names))
        unknown = sorted(set(names) - {u.get_username() for u in physicians})
        if unknown:
            raise CommandError(f"No active user {', '.join(unknown)}.")
        try:
            campaign = gold_campaign_draw_active(
                admin=admin,
                name=o["name"],
                run=runs[o["run"]],
                second_run=runs[o["second_run"]],
                budget=o["budget"],
                physicians=physicians,
                annotators_per_window=o["per_window"],
                floor=o["floor"],
                seed=o["seed"],
            )
        except (ValidationError, PermissionDenied) as exc:
            messages = getattr(exc, "messages", [str(exc)])
            raise CommandError("; ".join(messages)) from None
        drawn = GoldInclusion.objects.filter(campaign=campaign)
        self.stdout.write(
            f"Campaign {campaign.pk} {campaign.name!r}: {drawn.count()} windows drawn; "
            "their inclusion probabilities are stored."
        )
