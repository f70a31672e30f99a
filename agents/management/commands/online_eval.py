"""manage.py online_eval --release ID --endpoint URL [--name NAME] [--inline]:
register a researcher's agent endpoint for a release, walk the release's
windows in time order per stay sending each only its bedside context, and
score the replies."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from accounts.commands import command_row, command_user, service_refusals
from agents.management.commands._follow import follow
from agents.services import endpoint_register, online_eval_start
from exports.models import Release


class Command(BaseCommand):
    help = "Evaluate an HTTP endpoint (an agent) online against a release."

    def add_arguments(self, parser):
        parser.add_argument("--release", required=True, type=int)
        parser.add_argument("--endpoint", required=True, help="The agent's URL.")
        parser.add_argument("--name", help="The endpoint's name (default: its URL).")
        parser.add_argument("--timeout", type=float, default=30.0)
        parser.add_argument("--retries", type=int, default=3)
        parser.add_argument("--per-minute", type=int, default=600)
        parser.add_argument(
            "--context",
            choices=("streamed", "full"),
            default="streamed",
            help="A stay's history once then each window's new events "
            "(streamed, the default), or whole with every window (full).",
        )
        parser.add_argument("--inline", action="store_true")
        parser.add_argument(
            "--user",
            help="Researcher or admin the run is recorded under (default: a "
            "superuser).",
        )

    def handle(self, *args, release, endpoint, inline, user=None, **options):
        who = command_user(user, option="--user", recorded="the run")
        found = command_row(Release, release, "release")
        with service_refusals():
            registered = endpoint_register(
                user=who,
                release=found,
                name=options.get("name") or endpoint[:100],
                url=endpoint,
                timeout_seconds=options["timeout"],
                max_retries=options["retries"],
                requests_per_minute=options["per_minute"],
                context_mode=options["context"],
            )
            run = online_eval_start(user=who, endpoint=registered, enqueue=not inline)
        self.stdout.write(
            f"Online evaluation run {run.pk} of {registered.url}: "
            f"{run.windows_total} windows in {run.stays_total} stays."
        )
        follow(self, run, inline=inline)
