"""Loads the configured matching model and shows its tau, so a deployment finds
out at once, not at the first agreement task, that the model cannot be loaded."""

from django.core.management.base import BaseCommand, CommandError

from evaluation.matcher import MatcherUnavailable, matcher_for_settings
from evaluation.polarity import opposed


class Command(BaseCommand):
    help = "Load the REALICU_MATCHER_MODEL model offline and report its tau."

    def add_arguments(self, parser):
        parser.add_argument(
            "pairs",
            nargs="*",
            metavar="A|B",
            help='Text pairs to score, each as "text a|text b".',
        )

    def handle(self, *args, pairs, **options):
        try:
            matcher = matcher_for_settings()
            model = matcher.load()
        except MatcherUnavailable as exc:
            raise CommandError(str(exc)) from exc
        dim = model.get_embedding_dimension()
        self.stdout.write(f"model: {matcher.model_name} ({dim} dimensions)")
        self.stdout.write(f"tau: {matcher.tau:g} ({matcher.tau_source})")
        for pair in pairs:
            a, sep, b = pair.partition("|")
            if not sep:
                raise CommandError(f'write each pair as "text a|text b", not {pair!r}')
            cos = float(matcher.cosine([a], [b])[0, 0])
            if opposed(a, b):
                verdict = "no match (opposite directions)"
            else:
                verdict = "match" if cos >= matcher.tau else "no match"
            self.stdout.write(f"{cos:.3f} {verdict}: {a!r} vs {b!r}")
