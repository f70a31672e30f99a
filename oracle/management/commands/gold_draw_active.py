"""manage.py gold_draw_active --name NAME --run A --second-run B[,C...]
--budget N --physicians U1,U2 [--admin NAME] [--floor F] [--seed 0]
[--per-window 2]: a Gold campaign drawn where other Oracle runs (a rerun,
another backbone, the rules) disagree most with the first, each level of
that disagreement weighted by the Oracle's error there on the labels so far,
with a uniform floor; the windows labelled before count with the drawn ones,
and every pool window's probability of being in the Gold set, level and
phase, and the floor, are stored (issue 33)."""

from __future__ import annotations

from collections import Counter

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_user, service_refusals
from oracle.models import GoldInclusion, GoldInclusionPhase, OracleRun
from oracle.services.gold_draw import gold_campaign_draw_active


class Command(BaseCommand):
    help = (
        "Draw a Gold campaign with probabilities that grow with the disagreement "
        "of Oracle runs, and store them for the score intervals."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="The campaign's name.")
        parser.add_argument("--run", type=int, required=True, help="Oracle run id.")
        parser.add_argument(
            "--second-run",
            required=True,
            help="Other Oracle run ids, comma-separated: their disagreement with "
            "--run is the uncertainty. Two or more that err apart from it (another "
            "backbone, a rerun that samples, the rules) save about a third of the "
            "Gold windows on the coverage bench; one, about a fifth.",
        )
        parser.add_argument(
            "--budget",
            type=int,
            required=True,
            help="New Gold windows physicians label, in expectation.",
        )
        parser.add_argument(
            "--physicians", required=True, help="Usernames, comma-separated."
        )
        parser.add_argument("--admin", help="Default: the first superuser.")
        parser.add_argument(
            "--floor",
            type=float,
            help="Uniform share of the budget (default: 0.2 when the labels so "
            "far estimate the levels' error, else 0.7).",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--per-window", type=int, default=2)

    def handle(self, *args, **o):
        admin = command_user(o["admin"], option="--admin", recorded="the campaign")
        try:
            others = [int(x) for x in str(o["second_run"]).split(",") if x.strip()]
        except ValueError:
            raise CommandError("--second-run takes run ids, comma-separated.") from None
        if not others:
            raise CommandError("--second-run takes run ids, comma-separated.")
        runs = {r.pk: r for r in OracleRun.objects.filter(pk__in=[o["run"], *others])}
        missing = [pk for pk in (o["run"], *others) if pk not in runs]
        if missing:
            raise CommandError(f"No Oracle run {missing[0]}.")
        names = [n.strip() for n in o["physicians"].split(",") if n.strip()]
        users = get_user_model().objects.filter(is_active=True)
        physicians = list(users.filter(username__in=names))
        unknown = sorted(set(names) - {u.get_username() for u in physicians})
        if unknown:
            raise CommandError(f"No active user {', '.join(unknown)}.")
        with service_refusals():
            campaign = gold_campaign_draw_active(
                admin=admin,
                name=o["name"],
                run=runs[o["run"]],
                second_run=runs[others[0]],
                more_runs=[runs[pk] for pk in others[1:]],
                budget=o["budget"],
                physicians=physicians,
                annotators_per_window=o["per_window"],
                floor=o["floor"],
                seed=o["seed"],
            )
        rows = GoldInclusion.objects.filter(campaign=campaign)
        phases = Counter(rows.values_list("phase", flat=True))
        first = rows.first()
        pilots = {p for p in rows.values_list("pilot_probability", flat=True) if p}
        pilot = (
            ""
            if not pilots
            else f", counted as a uniform pilot of p = {pilots.pop():.3g}"
            if len(pilots) == 1
            else f", the pilot of an earlier draw (p {min(pilots):.3g} to "
            f"{max(pilots):.3g})"
        )
        self.stdout.write(
            f"Campaign {campaign.pk} {campaign.name!r}: "
            f"{phases[GoldInclusionPhase.ACTIVE]} windows drawn, "
            f"{phases[GoldInclusionPhase.PILOT]} labelled before{pilot} "
            f"(uniform floor {first.floor:g}); every pool window's probability "
            "of being in the Gold set is stored."
        )
