"""manage.py agent_run --agent NAME --release ID --backbone ID [--inline]: start
a reference agent over a release and follow it (the run page's twin)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_row, command_user, service_refusals
from agents.management.commands._follow import follow
from agents.reference import AGENT_NAMES
from agents.services import agent_run_start
from exports.models import Release
from oracle.models import Backbone


class Command(BaseCommand):
    help = (
        "Run a reference agent over a release's windows, then score its "
        "predictions as a baseline. --inline predicts in this process instead of "
        "on the workers."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agent", required=True, choices=AGENT_NAMES)
        parser.add_argument("--release", required=True, type=int)
        parser.add_argument("--backbone", required=True, help="Backbone id or name.")
        parser.add_argument("--inline", action="store_true")
        parser.add_argument(
            "--user", help="Admin the run is recorded under (default: a superuser)."
        )

    def handle(self, *args, agent, release, backbone, inline, user=None, **options):
        who = command_user(user, option="--user", recorded="the run")
        found = command_row(Release, release, "release")
        chosen = (
            Backbone.objects.filter(pk=int(backbone)).first()
            if backbone.isdigit()
            else Backbone.objects.filter(name=backbone).first()
        )
        if chosen is None:
            raise CommandError(f"No backbone {backbone!r}.")
        with service_refusals():
            run = agent_run_start(
                user=who,
                release=found,
                agent=agent,
                backbone=chosen,
                enqueue=not inline,
            )
        self.stdout.write(
            f"Agent run {run.pk} ({agent}, {run.prompt_version}, {chosen.name}): "
            f"{run.windows_total} windows in {run.stays_total} stays."
        )
        follow(self, run, inline=inline)
