"""Prediction files for a surveillance release (spec section 10): their
validation, line by line, and their scores.

A prediction line: ``{"checkpoint_id": int, "global_action":
"continue_monitoring" | "escalate", "priority": "low" | "medium" | "high",
"suspected_conditions": [finding, ...], "alerts": [finding, ...]}``, findings
named as in the release's manifest.

Metrics, over every checkpoint of the release (a checkpoint without a
prediction counts as wrong, an empty set as predicted nothing):

- action accuracy: share of checkpoints whose global action is right;
- trajectory accuracy: share of stays whose global action is right at every
  checkpoint;
- priority accuracy: share of checkpoints whose priority is right;
- alerts F1 / suspected F1: macro F1 over findings: for each finding, F1 of
  "active at a checkpoint" over all checkpoints, averaged over the findings
  that are in the labels or the predictions (a finding in neither has no F1).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from exports.models import Release, ReleaseWindow
from exports.scoring import (
    LineIds,
    choice_check,
    lines_check,
    release_window_ids,
    strings_check,
)
from surveillance.checkpoints import (
    ACTIONS,
    ALERT_NAMES,
    PRIORITIES,
    SUSPECTED_NAMES,
)

REQUIRED_FIELDS = (
    "checkpoint_id",
    "global_action",
    "priority",
    "suspected_conditions",
    "alerts",
)
SET_FIELDS = {"suspected_conditions": SUSPECTED_NAMES, "alerts": ALERT_NAMES}
LEADERBOARD_KEYS = (
    "action_accuracy",
    "trajectory_accuracy",
    "priority_accuracy",
    "alerts_f1",
    "suspected_f1",
)


def _record_check(record: dict, number: int) -> list[str]:
    errors = choice_check(record, number, "global_action", ACTIONS)
    errors += choice_check(record, number, "priority", PRIORITIES)
    for field, allowed in SET_FIELDS.items():
        not_strings = strings_check(record, number, field)
        if field not in record or not_strings:
            errors += not_strings
            continue
        unknown = sorted({v for v in record[field] if v not in allowed})
        if unknown:
            errors.append(
                f"line {number}: {field} has unknown finding(s) "
                f"{', '.join(map(repr, unknown))}; use the names of the release's "
                f"manifest: {', '.join(allowed)}"
            )
    return errors


def surveillance_predictions_check(
    *, lines: Iterable[bytes], release: Release
) -> tuple[list[str], int]:
    """Messages (each naming its line; at most ``MAX_MESSAGES``, then a count of
    the rest) and the number of valid predictions. Blank lines are skipped."""
    return lines_check(
        lines,
        required=REQUIRED_FIELDS,
        ids=LineIds(
            "checkpoint_id", "checkpoint", release_window_ids(release), release.name
        ),
        record_check=_record_check,
    )


def surveillance_predictions_read(path: Path) -> dict[int, dict]:
    """Predictions of a file already validated, by checkpoint id."""
    out = {}
    with open(path, "rb") as handle:
        for raw in handle:
            if raw.strip():
                record = json.loads(raw)
                out[record["checkpoint_id"]] = record
    return out


def _macro_f1(gold: list[set], predicted: list[set], names: Iterable[str]):
    scores = []
    for name in names:
        tp = sum(1 for g, p in zip(gold, predicted) if name in g and name in p)
        fp = sum(1 for g, p in zip(gold, predicted) if name not in g and name in p)
        fn = sum(1 for g, p in zip(gold, predicted) if name in g and name not in p)
        if tp + fp + fn == 0:
            continue
        scores.append(2 * tp / (2 * tp + fp + fn))
    return (sum(scores) / len(scores)) if scores else None, len(scores)


def surveillance_scores(*, gold: list[dict], predictions: dict[int, dict]) -> dict:
    """Scores of ``predictions`` (by checkpoint id) against the release's
    checkpoint records ``gold``; see the module docstring."""
    action_right = priority_right = 0
    stay_right: dict[int, bool] = defaultdict(lambda: True)
    by_hour: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    gold_sets = {"alerts": [], "suspected_conditions": []}
    pred_sets = {"alerts": [], "suspected_conditions": []}
    for record in gold:
        labels = record["labels"]
        pred = predictions.get(record["checkpoint_id"], {})
        ok = pred.get("global_action") == labels["global_action"]
        action_right += ok
        stay_right[record["stay_id"]] &= ok
        hour = by_hour[record["hours_since_admit"]]
        hour[0] += ok
        hour[1] += 1
        priority_right += pred.get("priority") == labels["priority"]
        for field in gold_sets:
            gold_sets[field].append(set(labels[field]))
            pred_sets[field].append(set(pred.get(field, ())))
    n = len(gold)
    alerts_f1, alerts_n = _macro_f1(
        gold_sets["alerts"], pred_sets["alerts"], ALERT_NAMES
    )
    suspected_f1, suspected_n = _macro_f1(
        gold_sets["suspected_conditions"],
        pred_sets["suspected_conditions"],
        SUSPECTED_NAMES,
    )
    overall = {
        "action_accuracy": action_right / n if n else None,
        "trajectory_accuracy": (
            sum(stay_right.values()) / len(stay_right) if stay_right else None
        ),
        "priority_accuracy": priority_right / n if n else None,
        "alerts_f1": alerts_f1,
        "suspected_f1": suspected_f1,
        "checkpoints": n,
        "stays": len(stay_right),
        "predicted": sum(1 for r in gold if r["checkpoint_id"] in predictions),
        "alerts_findings_scored": alerts_n,
        "suspected_findings_scored": suspected_n,
    }
    return {
        "overall": overall,
        "action_accuracy_by_hours_since_admit": {
            str(h): right / total for h, (right, total) in sorted(by_hour.items())
        },
    }


def release_checkpoints(release: Release) -> list[dict]:
    return list(
        ReleaseWindow.objects.filter(release=release)
        .order_by("stay_id", "hours_since_admit")
        .values_list("record", flat=True)
    )


def surveillance_submission_scores(submission, job_progress) -> dict:
    """A stored, valid submission's scores against its surveillance release;
    ``exports.services.submission_score`` runs it under the job's lease."""
    from exports.submission_files import submission_file_local

    job_progress.start(2, "reading")
    with submission_file_local(submission) as path:
        predictions = surveillance_predictions_read(path)
    job_progress.advance(1, "scoring")
    scores = surveillance_scores(
        gold=release_checkpoints(submission.release), predictions=predictions
    )
    job_progress.advance(1, "scored")
    return scores
