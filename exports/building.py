"""Writing a release's files (spec section 8), one stay at a time so that memory
stays bounded by the largest stay, not by the release:

- ``windows.jsonl`` and ``windows.parquet``: one record per window (ids, start and
  end in hours since ICU admission, labels with evidence and provenance, the ids
  of the window's own recorded actions, which are the answer of Recommended
  Actions (spec section 2) and must be dropped from a model's context);
- ``context/<stay_id>.jsonl``: the stay's bedside events (spec section 1: events
  of the admission before the end of the stay's last released window, outcome-
  revealing events and records coded after discharge removed), from which the
  context of any window is the events with ``time`` before the window's ``end``;
  each event named by its concept (windows.vocabulary) beside its source label;
- ``manifest.json``, ``DATACARD.md`` and ``plots/*.png``.

Files go to a hidden folder that is renamed into place when complete and then
made read-only; a release's folder is never written again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import shutil
import stat
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, DateTimeField, F, Value
from django.db.models.functions import Cast, Extract
from django.utils import timezone

from annotation.consensus import RECOMMENDING_RATINGS, campaign_irr
from annotation.models import ConsensusLabel, ConsensusStatusSource
from evaluation.metrics import DEFAULT_K, hours_bin
from exports.datacard import datacard_write
from exports.models import Release, ReleaseFile, ReleaseKind, ReleaseState, ReleaseWindow
from jobs.progress import Progress
from oracle.models import OracleLabel, OracleLabelState
from windows.actions import action_text_of
from windows.models import Event, EventKind, Stay
from windows.selectors_context import bedside_filter
from windows.vocabulary import event_label
from windows.windowing import window_settings

logger = logging.getLogger(__name__)

# 1.1: context lines name each event by its ``concept``; no coded records.
SCHEMA_VERSION = "1.1"
# Window records per Parquet row group and per database insert.
BATCH_ROWS = 2000
# Events read from the database per round trip.
EVENT_CHUNK = 5000
SET_TASKS = ("acute_problems", "recommended_actions", "red_flags")

EVENT_FIELDS = (
    "id",
    "time",
    "kind",
    "domain",
    "category",
    "name",
    "value_num",
    "unit",
    "value_text",
    "source_table",
)

PARQUET_SCHEMA = pa.schema(
    [
        ("window_id", pa.int64()),
        ("stay_id", pa.int64()),
        ("patient_id", pa.string()),
        ("window_index", pa.int32()),
        ("start", pa.timestamp("us", tz="UTC")),
        ("end", pa.timestamp("us", tz="UTC")),
        ("start_hours", pa.float64()),
        ("end_hours", pa.float64()),
        ("disease_group", pa.string()),
        ("context_file", pa.string()),
        ("window_action_event_ids", pa.list_(pa.int64())),
        ("status", pa.string()),
        ("acute_problems", pa.list_(pa.string())),
        ("recommended_actions", pa.list_(pa.string())),
        ("red_flags", pa.list_(pa.string())),
        ("labels_json", pa.string()),
    ]
)


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None``: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def rater_pseudonym(*, release: Release, user_id: int) -> str:
    """A rater id that is stable within one release and says nothing of the
    account: a keyed hash of the release and the user id."""
    digest = hmac.new(
        settings.SECRET_KEY.encode(),
        f"{release.kind}:{release.version}:{user_id}".encode(),
        hashlib.sha256,
    ).hexdigest()
    return f"rater-{digest[:10]}"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# How ``_dumps`` writes one string (ensure_ascii=False): the C encoder.
_encode_string = json.encoder.encode_basestring


def _hours(stay: Stay, when) -> float:
    return round((when - stay.intime).total_seconds() / 3600.0, 4)


# Labels ---------------------------------------------------------------------


def _gold_labels(consensus: ConsensusLabel, release: Release) -> dict:
    """The consensus of one window as released: kept items with their evidence,
    provenance and pseudonymous raters; no label ids, no decisions."""
    adjudicated = consensus.status_source == ConsensusStatusSource.SETTLED
    labels: dict[str, Any] = {
        "status": {
            "value": consensus.status or None,
            "evidence": list(consensus.status_evidence or []),
            "provenance": {
                "source": "adjudicated" if adjudicated else "consensus",
                "status_source": consensus.status_source,
            },
        }
    }
    for task in SET_TASKS:
        labels[task] = [
            {
                "text": item["text"],
                "evidence": list(item.get("evidence", [])),
                "provenance": {
                    "source": item.get("source", "consensus"),
                    "raters": [
                        rater_pseudonym(release=release, user_id=a)
                        for a in item.get("annotators", [])
                    ],
                    # The phrasings are kept (the reference's paraphrases) but
                    # sorted, so their order does not pair them with the raters
                    # (README "Threat model").
                    "texts": sorted(set(item.get("texts", [item["text"]]))),
                },
            }
            for item in (consensus.items or {}).get(task, [])
        ]
    return labels


def _oracle_labels(
    label: OracleLabel, action_names: dict[int, str], coded_ids: frozenset = frozenset()
) -> dict:
    """An Oracle label as released: the payload's items made into the three set
    tasks as for physicians (spec section 3: recommended actions are the
    recorded actions rated best practice or acceptable, plus additions).
    Ratings of coded records (``coded_ids``) are not actions and are left out."""
    payload = label.payload or {}
    provenance = {
        "source": "oracle",
        "oracle_run_id": label.run_id,
        "backbone_kind": label.backbone_kind,
        "model": label.model,
        "prompt_version": label.prompt_version,
    }

    def item(text: str, evidence) -> dict:
        return {"text": text, "evidence": list(evidence or []), "provenance": provenance}

    actions = [
        item(
            action_names.get(rating.get("event_id"), f"event {rating.get('event_id')}"),
            [rating.get("event_id"), *rating.get("evidence", [])],
        )
        for rating in payload.get("action_ratings", [])
        if rating.get("rating") in RECOMMENDING_RATINGS
        and rating.get("event_id") not in coded_ids
    ]
    actions += [
        item(entry["text"], entry.get("evidence"))
        for entry in payload.get("added_actions", [])
    ]
    return {
        "status": {
            "value": label.status or None,
            "evidence": list(payload.get("status_evidence", [])),
            "provenance": provenance,
        },
        "acute_problems": [
            item(entry["text"], entry.get("evidence"))
            for entry in payload.get("acute_problems", [])
        ],
        "recommended_actions": actions,
        "red_flags": [
            item(entry["text"], entry.get("evidence"))
            for entry in payload.get("red_flags", [])
        ],
    }


@dataclass(frozen=True)
class CodedRecords:
    """A stay's records coded after discharge: ids and names (``"ICD10PCS
    5A1955Z"``). Labels made before such records were marked as coded may cite
    them, or have rated them as actions: a release keeps neither."""

    ids: frozenset[int] = frozenset()
    names: frozenset[str] = frozenset()

    @classmethod
    def of_admission(cls, admission_id: int) -> CodedRecords:
        rows = Event.objects.filter(
            admission_id=admission_id, kind=EventKind.CODED
        ).values_list("id", "name")
        ids, names = set(), set()
        for pk, name in rows:
            ids.add(pk)
            names.add(name)
        return cls(frozenset(ids), frozenset(names))


def labels_without_coded(labels: dict, coded: CodedRecords) -> dict:
    """``labels`` with no trace of a coded record: evidence ids of coded records
    dropped, and items that stand for one (a rating of a coded record as an
    action, named by its code) left out."""
    if not coded.ids:
        return labels
    status = labels["status"]
    out = {
        "status": {
            **status,
            "evidence": [e for e in status["evidence"] if e not in coded.ids],
        }
    }
    for task in SET_TASKS:
        out[task] = []
        for item in labels[task]:
            if item["text"] in coded.names:
                continue
            evidence = [e for e in item["evidence"] if e not in coded.ids]
            item = {**item, "evidence": evidence}
            texts = item["provenance"].get("texts")
            if texts:
                item["provenance"] = {
                    **item["provenance"],
                    "texts": [t for t in texts if t not in coded.names],
                }
            out[task].append(item)
    return out


def release_label_rows(release: Release):
    """The rows a release is made of, by stay then window, streamed."""
    if release.kind == ReleaseKind.GOLD:
        qs = ConsensusLabel.objects.filter(
            campaign_id=release.campaign_id, dropped=False, dispute_count=0
        )
    else:
        # The raw replies can be long and are not released.
        qs = OracleLabel.objects.filter(
            run_id=release.oracle_run_id, state=OracleLabelState.OK
        ).defer("raw_response", "error", "parameters")
    return qs.select_related("window__stay__admission__patient").order_by(
        "window__stay_id", "window__index"
    )


# Statistics for the manifest and the data card ------------------------------


@dataclass
class ReleaseStats:
    windows: int = 0
    context_events: int = 0
    stays: dict[int, dict] = field(default_factory=dict)
    status: Counter = field(default_factory=Counter)
    items: dict[str, Counter] = field(
        default_factory=lambda: {task: Counter() for task in SET_TASKS}
    )
    item_totals: Counter = field(default_factory=Counter)
    provenance: Counter = field(default_factory=Counter)
    hours_bins: Counter = field(default_factory=Counter)
    disease_group_windows: Counter = field(default_factory=Counter)

    def add_window(self, record: dict) -> None:
        self.windows += 1
        labels = record["labels"]
        self.status[labels["status"]["value"] or "none"] += 1
        self.provenance[f"status:{labels['status']['provenance']['source']}"] += 1
        for task in SET_TASKS:
            self.items[task][len(labels[task])] += 1
            self.item_totals[task] += len(labels[task])
            for entry in labels[task]:
                self.provenance[f"{task}:{entry['provenance']['source']}"] += 1
        self.hours_bins[hours_bin(record["start_hours"])] += 1
        self.disease_group_windows[record["disease_group"]] += 1

    def as_dict(self) -> dict:
        return {
            "windows": self.windows,
            "stays": len(self.stays),
            "context_events": self.context_events,
            "status": dict(self.status),
            "items": dict(self.item_totals),
            "items_per_window": {
                task: {str(n): c for n, c in sorted(counter.items())}
                for task, counter in self.items.items()
            },
            "provenance": dict(sorted(self.provenance.items())),
            "windows_by_hours_since_admit": dict(self.hours_bins),
            "windows_by_disease_group": dict(self.disease_group_windows),
            "stays_by_disease_group": dict(
                Counter(s["disease_group"] for s in self.stays.values())
            ),
            "stays_by_outcome": dict(Counter(s["outcome"] for s in self.stays.values())),
        }


# Writers --------------------------------------------------------------------


class ParquetBatches:
    """Window records to Parquet, one row group per ``BATCH_ROWS`` records."""

    def __init__(self, path: Path) -> None:
        self.writer = pq.ParquetWriter(path, PARQUET_SCHEMA, compression="zstd")
        self.rows: list[dict] = []

    def add(self, record: dict) -> None:
        labels = record["labels"]
        self.rows.append(
            {
                "window_id": record["window_id"],
                "stay_id": record["stay_id"],
                "patient_id": record["patient_id"],
                "window_index": record["window_index"],
                "start": record["_start"],
                "end": record["_end"],
                "start_hours": record["start_hours"],
                "end_hours": record["end_hours"],
                "disease_group": record["disease_group"],
                "context_file": record["context_file"],
                "window_action_event_ids": record["window_action_event_ids"],
                "status": labels["status"]["value"],
                **{task: [i["text"] for i in labels[task]] for task in SET_TASKS},
                "labels_json": _dumps(labels),
            }
        )
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            table = pa.Table.from_pylist(self.rows, schema=PARQUET_SCHEMA)
            self.writer.write_table(table, row_group_size=BATCH_ROWS)
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


_MICROSECOND = timedelta(microseconds=1)


def _stay_events(stay: Stay, end) -> Iterator[tuple]:
    """The stay's bedside events (id, microseconds since ICU admission, then
    ``EVENT_FIELDS[2:]``) in time order, streamed. The offset is computed by
    the database (exact: interval to numeric) so that no timestamp has to be
    parsed per event."""
    condition = bedside_filter(admission_id=stay.admission_id, start=stay.intime, end=end)
    events = Event.objects.filter(condition).order_by("time", "id")
    if connection.vendor != "postgresql":
        # No interval arithmetic in the database (SQLite, the no-setup default).
        intime = stay.intime
        return (
            (event_id, (time - intime) // _MICROSECOND, *rest)
            for event_id, time, *rest in events.values_list(*EVENT_FIELDS).iterator(
                chunk_size=EVENT_CHUNK
            )
        )
    since_admit = F("time") - Value(stay.intime, output_field=DateTimeField())
    return (
        events.annotate(
            offset_us=Cast(Extract(since_admit, "epoch") * 1000000, BigIntegerField())
        )
        .values_list("id", "offset_us", *EVENT_FIELDS[2:])
        .iterator(chunk_size=EVENT_CHUNK)
    )


class _EventLines:
    """Context lines written as ``_dumps`` of the event's dict would write them
    (same keys, order, escapes and number formats), but from pre-encoded parts:
    the strings that repeat across events (kind, domain, category, name, unit,
    source table) are JSON-encoded once per build."""

    def __init__(self) -> None:
        self._head: dict[tuple, str] = {}
        self._tail: dict[tuple, tuple[str, str]] = {}

    @staticmethod
    def _string(value) -> str:
        return "null" if value is None else _encode_string(value)

    def head(self, kind, domain, category, name) -> str:
        key = (kind, domain, category, name)
        part = self._head.get(key)
        if part is None:
            s = self._string
            concept = event_label(
                domain=domain or "", category=category or "", name=name or ""
            ).text
            part = self._head[key] = (
                f',"kind":{s(kind)},"domain":{s(domain)},"category":{s(category)}'
                f',"name":{s(name)},"concept":{s(concept)},"value_num":'
            )
        return part

    def tail(self, unit, table) -> tuple[str, str]:
        key = (unit, table)
        part = self._tail.get(key)
        if part is None:
            part = self._tail[key] = (
                f',"unit":{self._string(unit)},"value_text":',
                f',"source_table":{self._string(table)}}}\n',
            )
        return part

    def line(self, event_id, when, hours, kind, domain, category, name, num, unit,
             text, table) -> str:
        value = "null" if num is None or not math.isfinite(num) else repr(float(num))
        unit_part, table_part = self.tail(unit, table)
        return (
            f'{{"event_id":{event_id},"time":"{when}","hours_since_admit":{hours!r}'
            f"{self.head(kind, domain, category, name)}{value}{unit_part}"
            f"{self._string(text)}{table_part}"
        )


def _write_stay(
    *,
    release: Release,
    stay: Stay,
    rows: list,
    folder: Path,
    stats: ReleaseStats,
    lines: _EventLines,
) -> list[dict]:
    """Writes the stay's context file and returns its window records. Event
    times are handled as integer microseconds since ICU admission: exact, and
    the same ``hours_since_admit`` as ``_hours`` gives."""
    windows = [row.window for row in rows]
    intime = stay.intime
    starts = [(w.start - intime) // _MICROSECOND for w in windows]
    ends = [(w.end - intime) // _MICROSECOND for w in windows]
    last_end = max(w.end for w in windows)
    actions_of: list[list[int]] = [[] for _ in windows]
    action_names: dict[int, str] = {}
    count = 0
    action = EventKind.ACTION
    line = lines.line
    buffer: list[str] = []
    with open(folder / "context" / f"{stay.pk}.jsonl", "w", encoding="utf-8") as out:
        for event_id, offset, kind, domain, category, name, num, unit, text, table in (
            _stay_events(stay, last_end)
        ):
            buffer.append(
                line(
                    event_id,
                    (intime + timedelta(microseconds=offset)).isoformat(),
                    round(offset / 10**6 / 3600.0, 4),
                    kind, domain, category, name, num, unit, text, table,
                )
            )
            if len(buffer) >= EVENT_CHUNK:
                out.write("".join(buffer))
                buffer.clear()
            count += 1
            if kind == action:
                action_names[event_id] = name
                # Windows have one length, so their ends are sorted like their
                # starts: walk back from the last window starting at or before
                # the event while it is still open.
                i = bisect_right(starts, offset) - 1
                while i >= 0 and offset < ends[i]:
                    actions_of[i].append(event_id)
                    i -= 1
        out.write("".join(buffer))
    stats.context_events += count
    stats.stays[stay.pk] = {
        "length_hours": stay.length_hours,
        "outcome": stay.hospital_outcome,
        "disease_group": stay.disease_group,
        "windows": len(rows),
    }
    coded = CodedRecords.of_admission(stay.admission_id)
    if release.kind != ReleaseKind.GOLD and action_names:
        # Rated actions are released as the decisions they record ("PEEP 5 -> 10
        # cmH2O"), not as the charting's name ("peep set").
        action_names = {
            event.pk: action_text_of(event)
            for event in Event.objects.filter(pk__in=list(action_names))
        }
    records = []
    for row, window, action_ids in zip(rows, windows, actions_of):
        if release.kind == ReleaseKind.GOLD:
            labels = _gold_labels(row, release)
        else:
            labels = _oracle_labels(row, action_names, coded.ids)
        labels = labels_without_coded(labels, coded)
        records.append(
            {
                "window_id": window.pk,
                "stay_id": stay.pk,
                "patient_id": stay.admission.patient.pseudo_id,
                "window_index": window.index,
                "start": window.start.isoformat(),
                "end": window.end.isoformat(),
                "start_hours": round(window.hours_since_admit, 4),
                "end_hours": _hours(stay, window.end),
                "disease_group": stay.disease_group,
                "context_file": f"context/{stay.pk}.jsonl",
                "window_action_event_ids": action_ids,
                "labels": labels,
                "_start": window.start,
                "_end": window.end,
            }
        )
    return records


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``, read in blocks."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _remove_tree(path: Path) -> None:
    """Removes a folder left by a build that did not finish, read-only or not."""
    if not path.exists():
        return
    for root, dirs, files in os.walk(path):
        os.chmod(root, stat.S_IRWXU)
        for name in files:
            os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IWUSR)
    shutil.rmtree(path)


def _make_read_only(folder: Path) -> None:
    for root, dirs, files in os.walk(folder, topdown=False):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444)
        os.chmod(root, 0o555)


def _source_section(release: Release) -> dict:
    if release.kind == ReleaseKind.GOLD:
        campaign = release.campaign
        return {
            "kind": "gold_campaign",
            "campaign_id": campaign.pk,
            "campaign_name": campaign.name,
            "annotators_per_window": campaign.annotators_per_window,
        }
    run = release.oracle_run
    snapshot = run.backbone_snapshot or {}
    return {
        "kind": "oracle_run",
        "oracle_run_id": run.pk,
        "oracle_run_name": run.name,
        "backbone_kind": snapshot.get("kind", ""),
        "model": snapshot.get("model", ""),
        "parameters": snapshot.get("parameters", {}),
        "prompt_version": run.prompt.version,
    }


def _agreement_report(release: Release) -> dict | None:
    if release.kind != ReleaseKind.GOLD:
        return None
    report = campaign_irr(campaign=release.campaign)
    for pair in report.get("pairs", []):
        pair["physicians"] = [
            rater_pseudonym(release=release, user_id=u) for u in pair["physicians"]
        ]
    return json_safe(report)


def _validation_report(release: Release) -> dict | None:
    report = release.validation_report
    if report is None:
        return None
    return json_safe(
        {
            "id": report.pk,
            "oracle_run_id": report.run_id,
            "gold_campaign_id": report.campaign_id,
            "created_at": report.created_at.isoformat(),
            "matcher_model": report.matcher_model,
            "tau": report.tau,
            "report": report.report,
        }
    )


def _promotion(release: Release) -> dict | None:
    """How a Scale release passed the promotion gate: the thresholds and, when
    an admin overrode them, who, when, why and which thresholds failed
    (oracle.models.PromotionOverride)."""
    if release.kind != ReleaseKind.SCALE or release.validation_report is None:
        return None
    from oracle.models import PromotionOverride
    from oracle.promotion_gate import promotion_gate

    override = (
        PromotionOverride.objects.select_related("created_by")
        .filter(release_id=release.pk)
        .first()
    )
    if override is None:
        gate = promotion_gate(report=release.validation_report)
        return json_safe(
            {"thresholds": gate["thresholds"], "failures": gate["failures"], "override": None}
        )
    return json_safe(
        {
            "thresholds": override.thresholds,
            "failures": override.failures,
            "override": {
                "by": override.created_by.get_username(),
                "at": override.created_at.isoformat(),
                "reason": override.reason,
            },
        }
    )


def _release_windows_copy(release: Release, rows: list[tuple]) -> None:
    """Stores window records with COPY: ``rows`` are (window id, stay id,
    disease group, hours since admission, the record's JSON as written to
    windows.jsonl). An insert would serialise each record again and quote it
    into an array parameter, which costs more than writing the files."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        ReleaseWindow.objects.bulk_create(
            ReleaseWindow(
                release=release,
                window_id=window_id,
                stay_id=stay_id,
                disease_group=group,
                hours_since_admit=hours,
                record=json.loads(text),
            )
            for window_id, stay_id, group, hours, text in rows
        )
        return
    meta = ReleaseWindow._meta
    quote = connection.ops.quote_name
    columns = ", ".join(
        quote(meta.get_field(name).column)
        for name in (
            "release", "window_id", "stay_id", "disease_group", "hours_since_admit",
            "record",
        )
    )
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
            f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row((release.pk, *row))


def release_files_write(*, release: Release, folder: Path, progress=None) -> dict:
    """Writes every file of the release into ``folder`` and its window records
    into the database; returns the statistics."""
    (folder / "context").mkdir(parents=True)
    stats = ReleaseStats()
    rows = release_label_rows(release)
    total_stays = rows.values("window__stay_id").distinct().count()
    if progress is not None:
        progress.start(total_stays + 2, "windows and context")
    parquet = ParquetBatches(folder / "windows.parquet")
    lines = _EventLines()
    pending: list[tuple] = []
    try:
        with open(folder / "windows.jsonl", "w", encoding="utf-8") as jsonl:
            for stay_id, stay_rows in groupby(
                rows.iterator(chunk_size=BATCH_ROWS), key=lambda r: r.window.stay_id
            ):
                stay_rows = list(stay_rows)
                stay = stay_rows[0].window.stay
                for record in _write_stay(
                    release=release,
                    stay=stay,
                    rows=stay_rows,
                    folder=folder,
                    stats=stats,
                    lines=lines,
                ):
                    parquet.add(record)
                    del record["_start"], record["_end"]
                    text = _dumps(record)
                    jsonl.write(text)
                    jsonl.write("\n")
                    stats.add_window(record)
                    pending.append(
                        (
                            record["window_id"],
                            stay_id,
                            record["disease_group"],
                            record["start_hours"],
                            text,
                        )
                    )
                    if len(pending) >= BATCH_ROWS:
                        _release_windows_copy(release, pending)
                        pending = []
                if progress is not None:
                    progress.advance(1, f"stay {stay_id}")
        _release_windows_copy(release, pending)
    finally:
        parquet.close()
    return stats


def _manifest(*, release: Release, stats: ReleaseStats, files: list[dict]) -> dict:
    return json_safe(
        {
            "name": release.name,
            "kind": release.kind,
            "title": release.get_kind_display(),
            "version": release.version,
            "schema_version": SCHEMA_VERSION,
            "built_at": timezone.now().isoformat(),
            "test_only": True,
            "source": _source_section(release),
            "counts": stats.as_dict(),
            "settings": {
                "windows": window_settings(),
                "matcher_model": release.matcher_model,
                "tau": release.tau,
                "k": DEFAULT_K,
                "context": (
                    "events of the stay's hospital admission with time < the "
                    "window's end; outcome-revealing events and records coded "
                    "after discharge removed; drop "
                    "window_action_event_ids for Recommended Actions"
                ),
            },
            "agreement_report": _agreement_report(release),
            "validation_report": _validation_report(release),
            "promotion": _promotion(release),
            "files": files,
        }
    )


def release_partial_remove(release: Release) -> None:
    """Removes the unfinished folder of a build of ``release``, if any."""
    _remove_tree(Path(settings.REALICU_RELEASES_DIR) / f".{release.name}.partial")


def release_build(*, release: Release, progress=None) -> Release:
    """Builds a queued release into its own new folder and marks it ready.

    The build is a job (jobs.leases): it is taken with ``job_claim`` (state
    building, in its own short transaction), a heartbeat thread writes the
    progress onto the row while the files are written, and the build stops
    when the row's lease changes (cancelled, or given to another worker after
    this one went silent). Idempotent: a ready release, or one another live
    worker holds, is returned as it is; the unfinished folder of an earlier
    attempt is removed and the build starts again. A failed or cancelled build
    leaves no folder behind. A release whose final folder already exists is
    refused and never rewritten."""
    from jobs.leases import JobLeaseLost, job_claim, job_heartbeat, job_release

    release.refresh_from_db()
    if release.state == ReleaseState.READY:
        return release
    lease = job_claim(
        model=Release,
        pk=release.pk,
        claimable=(ReleaseState.QUEUED,),
        running=ReleaseState.BUILDING,
        extra={"error": "", "finished_at": None, "progress_done": 0,
               "progress_total": 0, "progress_label": "starting"},
    )
    if lease is None:
        release.refresh_from_db()
        return release
    root = Path(settings.REALICU_RELEASES_DIR)
    root.mkdir(parents=True, exist_ok=True)
    final = root / release.name
    partial = root / f".{release.name}.partial"
    # This worker holds the lease: a folder left by an earlier attempt is stale.
    _remove_tree(partial)
    renamed = False
    try:
        if final.exists():
            from django.core.exceptions import ValidationError

            raise ValidationError(
                f"The folder {release.name} already exists in the releases folder. "
                "A release's folder is never rewritten: move it away if it is a "
                "leftover, or rebuild as a new version."
            )
        with job_heartbeat(model=Release, pk=release.pk, lease=lease) as beat:
            sinks = [beat, *(progress.sinks if progress is not None else [])]
            job_progress = Progress(sinks=sinks)
            with transaction.atomic():
                stats, manifest = _release_write(
                    release=release, folder=partial, progress=job_progress
                )
                job_progress.advance(1, "done")
                # The one write of the release row inside this transaction, its
                # last statement: the row lock it takes is held only for the
                # rename below and the commit (milliseconds), so a heartbeat
                # that comes now waits that long, then finds the lease gone and
                # writes nothing. Ready, the files' rows and the folder commit
                # together; a lost lease (cancelled, taken over) undoes all.
                if not job_release(
                    model=Release,
                    pk=release.pk,
                    lease=lease,
                    state=ReleaseState.READY,
                    finished_at=timezone.now(),
                    directory=release.name,
                    manifest=manifest,
                    window_count=stats.windows,
                    heartbeat_at=timezone.now(),
                    progress_done=job_progress.done,
                    progress_total=job_progress.total,
                    progress_label="done",
                ):
                    raise JobLeaseLost(f"release {release.pk}: cancelled or taken over")
                os.replace(partial, final)
                renamed = True
                _make_read_only(final)
    except JobLeaseLost:
        # Whoever holds the row now (a cancel, another worker) owns its state.
        _remove_tree(partial)
        if renamed:
            _remove_tree(final)
        release.refresh_from_db()
        return release
    except BaseException as exc:
        _remove_tree(partial)
        if renamed and not Release.objects.filter(
            pk=release.pk, state=ReleaseState.READY
        ).exists():
            _remove_tree(final)
        if not Release.objects.filter(pk=release.pk, lease=lease).exists():
            # Cancelled meanwhile (the cancel removes the folder this build was
            # writing), or taken over: not this build's failure to record.
            release.refresh_from_db()
            return release
        _release_after_error(release, lease, exc)
        raise
    release.refresh_from_db()
    return release


def _release_after_error(release: Release, lease: str, exc: BaseException) -> None:
    """Records why the build stopped. A lost database connection queues the
    release again (the task's retry, or the reaper, takes it) unless workers
    already tried three times; anything else fails it with the reason. When
    even that write fails, the row keeps its stale heartbeat and the reaper
    handles it."""
    from django.db import OperationalError

    from jobs.leases import job_release

    messages = getattr(exc, "messages", None)
    error = "; ".join(messages) if messages else f"{type(exc).__name__}: {exc}"
    fields = {"state": ReleaseState.FAILED, "finished_at": timezone.now(),
              "error": error, "progress_label": "failed"}
    try:
        if isinstance(exc, OperationalError):
            attempts = Release.objects.filter(pk=release.pk).values_list(
                "attempts", flat=True
            ).first() or 0
            if attempts < 3:
                fields = {"state": ReleaseState.QUEUED, "heartbeat_at": timezone.now(),
                          "progress_label": f"re-queued after a database error: {exc}"[:255]}
        job_release(model=Release, pk=release.pk, lease=lease, **fields)
    except Exception:
        logger.exception("release %s: its failure could not be recorded", release.pk)


def _release_write(*, release: Release, folder: Path, progress: Progress):
    """Writes the release's files into ``folder`` with their checksums, and its
    window and file rows; returns the statistics and the manifest."""
    from django.core.exceptions import ValidationError

    ReleaseWindow.objects.filter(release=release).delete()
    ReleaseFile.objects.filter(release=release).delete()
    stats = release_files_write(release=release, folder=folder, progress=progress)
    if stats.windows == 0:
        raise ValidationError(
            f"{release} has no windows to release: no finished consensus "
            "(Gold) or no successful Oracle label (Scale)."
        )
    datacard_write(release=release, stats=stats, folder=folder)
    progress.advance(1, "checksums")
    files = [
        {
            "path": p.relative_to(folder).as_posix(),
            "bytes": p.stat().st_size,
            "sha256": file_sha256(p),
        }
        for p in _files_under(folder)
    ]
    manifest = _manifest(release=release, stats=stats, files=files)
    manifest_path = folder / "manifest.json"
    manifest_path.write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False, allow_nan=False),
        encoding="utf-8",
    )
    files.append(
        {
            "path": "manifest.json",
            "bytes": manifest_path.stat().st_size,
            "sha256": file_sha256(manifest_path),
        }
    )
    ReleaseFile.objects.bulk_create(
        ReleaseFile(release=release, path=f["path"], size_bytes=f["bytes"],
                    sha256=f["sha256"])
        for f in files
    )
    return stats, manifest


class ReleaseFileChanged(Exception):
    """A release file on disk is not the file that was built: its checksum no
    longer matches the one recorded (ReleaseFile, the manifest)."""


def release_file_verify(*, entry: ReleaseFile, path: Path) -> None:
    """Raises ``ReleaseFileChanged`` unless the file at ``path`` is byte for
    byte the file built (its recorded sha256). Releases are immutable by this
    check, not by file modes, which root ignores. The file is hashed again
    whenever its size, inode, modification or change time differs from when it
    was last found intact (the change time cannot be set by a program: any
    write or chmod moves it), so a file served often is hashed once."""
    from django.core.cache import cache

    status = path.stat()
    signature = (
        f"{status.st_size}:{status.st_ino}:{status.st_mtime_ns}:{status.st_ctime_ns}"
    )
    key = f"release-file-intact:{entry.pk}:{entry.sha256}"
    if cache.get(key) == signature:
        return
    if status.st_size != entry.size_bytes or file_sha256(path) != entry.sha256:
        logger.error(
            "release file %s/%s was changed after the build: its sha256 is not the "
            "recorded %s; it is not served",
            entry.release_id, entry.path, entry.sha256,
        )
        raise ReleaseFileChanged(
            f"The file {entry.path} of this release was changed after the release "
            "was built: its checksum no longer matches the one recorded in the "
            "manifest, so it is not served. An admin must restore it from a copy "
            "(or rebuild the release as a new version)."
        )
    cache.set(key, signature, None)


def release_folder(release: Release) -> Path:
    return Path(settings.REALICU_RELEASES_DIR) / release.directory
