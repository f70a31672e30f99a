"""Sweeps tau for matching models over the reference pairs shipped with the code
(evaluation/data/reference_pairs.csv) and prints the report: the sweep, the
adopted tau and why, the figures per kind and category, the pairs it gets
wrong. With --adopt, stores the adopted tau as the model's MatcherModel row,
which the matcher then uses and names as its source."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from evaluation.matcher import (
    MatcherUnavailable,
    SemanticMatcher,
    configured_model_name,
)
from evaluation.models import MatcherModel
from evaluation.reference_calibration import REFERENCE_PAIRS_PATH, reference_report


def _figure(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def tau_source_note(report: dict) -> str:
    """What a MatcherModel row says of a tau adopted from this report."""
    adopted = report["adopted"]
    return (
        f"{report['set']} ({REFERENCE_PAIRS_PATH.name}, {report['pairs']} pairs, "
        f"{report['positives']} same): F1 {adopted['f1']:.3f} at tau "
        f"{adopted['tau']:g} (precision {_figure(adopted['precision'])}, recall "
        f"{_figure(adopted['recall'])}), the highest F1 matching at most "
        f"{report['max_unrelated_rate']:.1%} of unrelated pairs; highest F1 "
        f"overall {report['best']['f1']:.3f} at tau {report['best']['tau']:g}"
    )


class Command(BaseCommand):
    help = (
        "Sweep tau over the shipped reference pairs for each model and print the "
        "report; --adopt stores the adopted tau for the model."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "models",
            nargs="*",
            help="Model names or local folders (default: REALICU_MATCHER_MODEL).",
        )
        parser.add_argument(
            "--adopt",
            action="store_true",
            help="Store each model's adopted tau as its MatcherModel row.",
        )
        parser.add_argument(
            "--json", dest="json_path", help="Also write the reports to this file."
        )
        parser.add_argument(
            "--errors", type=int, default=20, help="Wrong pairs to list (default 20)."
        )

    def handle(self, *args, models, adopt, json_path, errors, **options):
        reports = []
        for name in models or [configured_model_name()]:
            try:
                matcher = SemanticMatcher(name, tau=0.5)
                matcher.load()
            except MatcherUnavailable as exc:
                raise CommandError(str(exc)) from exc
            report = reference_report(matcher)
            reports.append(report)
            self._print(report, errors)
            if adopt:
                self._adopt(report)
        if len(reports) > 1:
            self.stdout.write("\nModels compared (adopted tau, its F1):")
            for report in sorted(reports, key=lambda r: -r["adopted"]["f1"]):
                adopted = report["adopted"]
                self.stdout.write(
                    f"  {report['model_name']}: tau {adopted['tau']:g}, F1 "
                    f"{adopted['f1']:.3f}; highest F1 {report['best']['f1']:.3f} "
                    f"at tau {report['best']['tau']:g}"
                )
        if json_path:
            with open(json_path, "w", encoding="utf-8") as handle:
                json.dump(reports, handle, indent=2)
            self.stdout.write(f"Reports written to {json_path}")

    def _print(self, report: dict, errors: int) -> None:
        write = self.stdout.write
        write(
            f"\nModel {report['model_name']}: {report['set']}, {report['pairs']} "
            f"pairs ({report['positives']} judged the same); unrelated pairs "
            + ", ".join(f"{k} {n}" for k, n in report["unrelated_pairs"].items())
        )
        write("   tau     F1  precision  recall  accuracy  unrelated matched (max)")
        for row in report["rows"]:
            mark = " <- adopted" if row["tau"] == report["adopted"]["tau"] else ""
            if row["tau"] == report["best"]["tau"]:
                mark += " <- highest F1"
            write(
                f"  {row['tau']:.2f}  {_figure(row['f1'])}      "
                f"{_figure(row['precision'])}   {_figure(row['recall'])}     "
                f"{_figure(row['accuracy'])}    "
                f"{_figure(row.get('unrelated_match_rate_max'))}{mark}"
            )
        if report.get("best_without_guard"):
            unguarded = report["best_without_guard"]
            write(
                f"  without the polarity guard: highest F1 {unguarded['f1']:.3f} "
                f"at tau {unguarded['tau']:g}"
            )
        write(f"  adopted: {tau_source_note(report)}")
        for kind, row in report["by_kind"].items():
            write(
                f"    {kind}: {row['pairs']} pairs, F1 {_figure(row['f1'])}, "
                f"precision {_figure(row['precision'])}, "
                f"recall {_figure(row['recall'])}"
            )
        for category, row in report["by_category"].items():
            write(f"    {category}: {row['pairs']} pairs, {row['accuracy']:.0%} right")
        wrong = report["errors"]
        if wrong:
            write(f"  wrong at the adopted tau ({len(wrong)}):")
            for error in wrong[:errors]:
                verdict = "same" if error["same"] else "different"
                write(
                    f"    {error['similarity']:.3f} {error['kind']} "
                    f"{error['category']} (judged {verdict}): "
                    f"{error['a']!r} vs {error['b']!r}"
                )
            if len(wrong) > errors:
                write(f"    ... and {len(wrong) - errors} more")

    def _adopt(self, report: dict) -> None:
        adopted = report["adopted"]
        row, _ = MatcherModel.objects.update_or_create(
            name=report["model_name"],
            defaults={
                "tau": adopted["tau"],
                "calibrated_at": timezone.now(),
                "notes": tau_source_note(report),
            },
        )
        self.stdout.write(f"  stored: {row}")
