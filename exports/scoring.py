"""Prediction files for a release: their validation, line by line, and their
scores (spec section 6) with the release's matcher model and tau, overall and
by disease group and by hours since admission."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from itertools import chain
from pathlib import Path

import numpy as np
from django.core.exceptions import ValidationError

from evaluation.labelschema import STATUS_VALUES
from evaluation.matcher import SemanticMatcher, guard_similarity, tau_source_of
from evaluation.metrics import (
    DEFAULT_K,
    WindowGold,
    WindowPrediction,
    hours_bin,
    score_by_group,
    score_predictions,
)
from evaluation.polarity import forbidden_action
from exports.building import json_safe
from exports.metric_names import METRIC_TITLES
from exports.models import Release, ReleaseKind, ReleaseWindow
from exports.scoring_ppi import (
    rectifier_inclusion,
    rectifier_texts,
    release_levels,
    release_rectifier,
    scale_intervals,
)
from realicu_web.jsonlimits import JsonLimitError, loads_bounded

REQUIRED_FIELDS = ("window_id", "status", "acute_problems", "recommended_actions")
LIST_FIELDS = ("acute_problems", "recommended_actions")
# Messages reported for one file; the rest are counted.
MAX_MESSAGES = 100
MAX_K = 50
# Texts embedded per call when warming the matcher.
EMBED_CHUNK = 4000


def release_window_ids(release: Release) -> set[int]:
    return set(
        ReleaseWindow.objects.filter(release=release).values_list(
            "window_id", flat=True
        )
    )


def line_object(number: int, raw: bytes) -> tuple[list[str], dict | None]:
    """Line ``number`` of a prediction file as a JSON object, or the messages
    saying why it is not one (RealICU and surveillance files alike)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [f"line {number}: not UTF-8 text"], None
    try:
        record = loads_bounded(text)
    except json.JSONDecodeError as exc:
        return [f"line {number}: not valid JSON ({exc.msg}, column {exc.colno})"], None
    except JsonLimitError as exc:
        return [f"line {number}: refused: {exc}"], None
    if not isinstance(record, dict):
        return [
            f"line {number}: expected a JSON object, not {type(record).__name__}"
        ], None
    return [], record


@dataclass
class LineIds:
    """What each line of a prediction file names by its ``field``, a
    ``noun``'s id: one of ``known``, the ids of ``release_name``, predicted
    once (``seen``: each id and the line that predicted it)."""

    field: str
    noun: str
    known: set[int]
    release_name: str
    seen: dict[int, int] = dataclass_field(default_factory=dict)

    def check(self, record: dict, number: int) -> list[str]:
        """The messages on line ``number``'s id: an integer of the release,
        predicted once; ``seen`` records it."""
        field, noun = self.field, self.noun
        if field not in record:
            return []
        value = record[field]
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"line {number}: {field} must be an integer, not {value!r}"]
        if value not in self.known:
            return [f"line {number}: {noun} {value} is not in {self.release_name}"]
        if value in self.seen:
            return [
                f"line {number}: {noun} {value} was already predicted on line "
                f"{self.seen[value]}"
            ]
        self.seen[value] = number
        return []


def choice_check(record: dict, number: int, field: str, values) -> list[str]:
    """The message on a line's ``field`` that is none of ``values``."""
    if field in record and record[field] not in values:
        return [
            f"line {number}: {field} {record[field]!r} is not one of "
            f"{', '.join(values)}"
        ]
    return []


def strings_check(record: dict, number: int, field: str) -> list[str]:
    """The message on a line's ``field`` that is not a list of strings."""
    value = record.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [f"line {number}: {field} must be a list of strings"]
    return []


def _record_check(record: dict, number: int) -> list[str]:
    errors = choice_check(record, number, "status", STATUS_VALUES)
    for name in LIST_FIELDS:
        errors += strings_check(record, number, name)
    return errors


def predictions_check(
    *, lines: Iterable[bytes], release: Release, known: set[int] | None = None
) -> tuple[list[str], int]:
    """Validates a prediction file given as lines of bytes. Returns the messages
    (each naming its line; at most ``MAX_MESSAGES``, then a count of the rest)
    and the number of predictions. Blank lines are skipped."""
    if release.kind == ReleaseKind.SURVEILLANCE:
        from exports.scoring_surveillance import surveillance_predictions_check

        return surveillance_predictions_check(lines=lines, release=release)
    known = release_window_ids(release) if known is None else known
    return lines_check(
        lines,
        required=REQUIRED_FIELDS,
        ids=LineIds("window_id", "window", known, release.name),
        record_check=_record_check,
    )


def _line_check(
    number: int, raw: bytes, *, required, ids: LineIds, record_check
) -> tuple[list[str], bool]:
    """The messages on line ``number`` and whether it is a valid record."""
    errors, record = line_object(number, raw)
    if record is None:
        return errors, False
    missing = [f for f in required if f not in record]
    if missing:
        errors.append(f"line {number}: missing field(s) {', '.join(missing)}")
    errors += ids.check(record, number)
    errors += record_check(record, number)
    return errors, not errors


def lines_check(
    lines: Iterable[bytes], *, required: tuple[str, ...], ids: LineIds, record_check
) -> tuple[list[str], int]:
    """The messages and the count of valid records of a prediction file
    (RealICU and surveillance files alike): each non-blank line a JSON object
    with the ``required`` fields, an id ``ids`` accepts, and what
    ``record_check(record, number) -> messages`` asks. At most
    ``MAX_MESSAGES`` messages, then a count of the rest."""
    messages: list[str] = []
    extra = 0
    count = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        errors, valid = _line_check(
            number, raw, required=required, ids=ids, record_check=record_check
        )
        if valid:
            count += 1
        for error in errors:
            if len(messages) < MAX_MESSAGES:
                messages.append(error)
            else:
                extra += 1
    if extra:
        messages.append(f"... and {extra} more errors")
    if not messages and count == 0:
        messages.append("The file holds no predictions (one JSON object per line).")
    return messages, count


def predictions_read(path: Path) -> Iterator[WindowPrediction]:
    """Predictions of a file already validated."""
    with open(path, "rb") as handle:
        for raw in handle:
            if raw.strip():
                yield WindowPrediction.from_mapping(json.loads(raw))


def check_k(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be a whole number from 1 to {MAX_K}, not {k!r}.")
    return k


def release_gold(release: Release) -> list[WindowGold]:
    """The release's labels as the metrics read them, from its stored records."""
    gold = []
    for window_id, stay_id, group, hours, record in (
        ReleaseWindow.objects.filter(release=release)
        .order_by("stay_id", "hours_since_admit", "window_id")
        .values_list(
            "window_id", "stay_id", "disease_group", "hours_since_admit", "record"
        )
        .iterator(chunk_size=2000)
    ):
        labels = record["labels"]
        gold.append(
            WindowGold(
                window_id=window_id,
                stay_id=stay_id,
                status=labels["status"]["value"],
                problems=[i["text"] for i in labels["acute_problems"]],
                actions=[i["text"] for i in labels["recommended_actions"]],
                red_flags=[i["text"] for i in labels["red_flags"]],
                attributes={"disease_group": group, "hours_since_admit": hours},
            )
        )
    return gold


class PreparedMatcher:
    """The release's matcher with every text of a scoring embedded up front, in
    large batches through the embedding cache, so that each window's match
    matrix is one small product of stored vectors."""

    def __init__(self, matcher: SemanticMatcher, texts: Iterable[str]) -> None:
        self.matcher = matcher
        self.tau = matcher.tau
        unique = list(dict.fromkeys(texts))
        self.index = {text: n for n, text in enumerate(unique)}
        chunks = [
            matcher.embed(unique[start : start + EMBED_CHUNK])
            for start in range(0, len(unique), EMBED_CHUNK)
        ]
        self.vectors = (
            np.concatenate(chunks).astype(np.float32, copy=False)
            if chunks
            else np.zeros((0, 1), dtype=np.float32)
        )

    def _rows(self, texts) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.index))
        if missing:
            # A text outside the prepared set (a caller passing its own lists).
            fresh = self.matcher.embed(missing).astype(np.float32, copy=False)
            start = len(self.index)
            self.vectors = fresh if start == 0 else np.vstack([self.vectors, fresh])
            for n, text in enumerate(missing):
                self.index[text] = start + n
        return self.vectors[[self.index[t] for t in texts]]

    def matrix(self, a, b) -> np.ndarray:
        # The matcher's polarity guard applies here as in SemanticMatcher.matrix.
        cosine = self._rows(a) @ self._rows(b).T
        return guard_similarity(cosine, a, b) >= self.tau

    def __call__(self, a: str, b: str) -> bool:
        return bool(self.matrix([a], [b])[0, 0])


def _texts(gold: list[WindowGold], predictions: list[WindowPrediction], k: int):
    for g in gold:
        yield from g.problems
        yield from g.actions
        # HRR matches actions against what each red flag forbids.
        yield from (forbidden_action(r) for r in g.red_flags)
    for p in predictions:
        yield from p.problems[:k]
        yield from p.actions[:k]


def release_matcher(release: Release) -> SemanticMatcher:
    return SemanticMatcher(release.matcher_model, tau=release.tau)


def scores_compute(
    *,
    release: Release,
    predictions: list[WindowPrediction],
    k: int = DEFAULT_K,
    matcher=None,
    progress=None,
) -> dict:
    """Every section-6 metric of valid predictions against the release, overall,
    by disease group and by hours since admission (``hours_bin``)."""
    check_k(k)
    gold = release_gold(release)
    if progress is not None:
        progress.start(4, "embedding texts")
    base = matcher or release_matcher(release)
    embedded_before = getattr(base, "embedded_count", 0)
    # A Scale release's scores come with prediction-powered intervals, which
    # also match the predictions against the physician consensus (issue 33).
    rectifier = release_rectifier(release) if release.kind == ReleaseKind.SCALE else {}
    prepared = PreparedMatcher(
        base, chain(_texts(gold, predictions, k), rectifier_texts(rectifier))
    )
    if progress is not None:
        progress.advance(1, "overall")
    overall = score_predictions(predictions, gold, prepared, k)
    if progress is not None:
        progress.advance(1, "by disease group")
    by_group = score_by_group(predictions, gold, prepared, "disease_group", k)
    if progress is not None:
        progress.advance(1, "by hours since admission")
    by_hours = score_by_group(
        predictions,
        gold,
        prepared,
        lambda g: hours_bin(g.attributes["hours_since_admit"]),
        k,
    )
    intervals = (
        scale_intervals(
            oracle=gold,
            rectifier=rectifier,
            predictions=predictions,
            match=prepared,
            k=k,
            inclusion=rectifier_inclusion(release),
            levels=release_levels(release),
        )
        if len(rectifier) >= 2
        else None
    )
    if progress is not None:
        progress.advance(1, "done")
    return json_safe(
        {
            "release": release.name,
            "k": k,
            "matcher_model": release.matcher_model,
            "tau": release.tau,
            # The release's tau is the one its Gold agreement or Oracle
            # validation used; this says where that value comes from.
            "tau_source": tau_source_of(release.matcher_model, release.tau),
            "texts": len(prepared.index),
            "texts_embedded": getattr(base, "embedded_count", 0) - embedded_before,
            "overall": overall.as_dict(),
            "by_disease_group": {
                str(group): s.as_dict()
                for group, s in sorted(by_group.items(), key=str)
            },
            "by_hours_since_admit": {
                str(b): s.as_dict()
                for b, s in sorted(by_hours.items(), key=lambda kv: _bin_order(kv[0]))
            },
            # Scale only, with a rectifier set of two windows or more.
            "intervals": intervals,
        }
    )


def _bin_order(label: str) -> float:
    if label.startswith("<"):
        return -math.inf
    return float(label.split("-")[0].rstrip("h+"))


def breakdown_plot(*, breakdown: dict, title: str, path: Path, k: int) -> None:
    """Grouped bars of the main metrics per group, to a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(breakdown)
    metrics = [
        "status_accuracy",
        "problems_hit_at_k",
        "actions_hit_at_k",
        "actions_hrr_at_k",
    ]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(groups) + 2), 4))
    width = 0.8 / len(metrics)
    for n, metric in enumerate(metrics):
        values = [
            (v if (v := breakdown[g].get(metric)) is not None else 0.0) for g in groups
        ]
        ax.bar(
            [x + n * width for x in range(len(groups))],
            values,
            width=width,
            label=METRIC_TITLES[metric].replace("@k", f"@{k}"),
        )
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))])
    ax.set_xticklabels(groups, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
