"""manage.py evaluate FILE --release ID [--k 5]: validate a prediction JSONL
against a release and print its scores (spec section 6), overall and by group."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_row, service_refusals
from evaluation.metrics import DEFAULT_K
from exports.models import Release, ReleaseState
from exports.scoring import check_k, predictions_check, predictions_read, scores_compute
from jobs.progress import command_progress

COLUMNS = (
    ("n_windows", "windows"),
    ("status_accuracy", "status acc"),
    ("status_macro_f1", "status F1"),
    ("problems_hit_at_k", "prob Hit"),
    ("problems_recall_at_k", "prob R"),
    ("actions_hit_at_k", "act Hit"),
    ("actions_recall_at_k", "act R"),
    ("actions_hrr_at_k", "HRR"),
)


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


class Command(BaseCommand):
    help = "Validate and score a prediction file against a release."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--release", type=int, required=True, help="Release id.")
        parser.add_argument("--k", type=int, default=DEFAULT_K)
        parser.add_argument(
            "--json", action="store_true", help="Print the scores as JSON."
        )

    def handle(
        self, *args, file: Path, release: int, k: int, json: bool = False, **options
    ):
        found = command_row(
            Release.objects.filter(state=ReleaseState.READY), release, "built release"
        )
        if not file.is_file():
            raise CommandError(f"No file {file}.")
        with service_refusals():
            check_k(k)
        with open(file, "rb") as handle:
            messages, count = predictions_check(lines=handle, release=found)
        if messages:
            raise CommandError(
                f"{file} is not valid; nothing was scored:\n" + "\n".join(messages)
            )
        progress = command_progress(self)
        scores = scores_compute(
            release=found,
            predictions=list(predictions_read(file)),
            k=k,
            progress=progress,
        )
        if json:
            self.stdout.write(_json_dumps(scores))
            return
        self.stdout.write(
            f"{found} ({found.name}), {count} predictions, k = {k}, matcher "
            f"{scores['matcher_model']} tau {scores['tau']}"
        )
        header = f"{'group':<32}" + "".join(f"{title:>11}" for _, title in COLUMNS)
        self.stdout.write(header)
        rows = [("all windows", scores["overall"])]
        rows += list(scores["by_disease_group"].items())
        rows += [
            (f"{b} since admission", s)
            for b, s in scores["by_hours_since_admit"].items()
        ]
        for name, values in rows:
            self.stdout.write(
                f"{name[:32]:<32}"
                + "".join(f"{_cell(values[key]):>11}" for key, _ in COLUMNS)
            )


def _json_dumps(value) -> str:
    return json.dumps(value, indent=2)
