"""The per-stay context writer: a stay's bedside events streamed into
``context/<stay_id>.jsonl``, each named by its concept, and the stay's window
records with their labels and the ids of each window's own recorded decisions
(windows.selectors_context.WindowDecisions: its actions, and their companion
rows), which a reader leaves out of the window's context."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, DateTimeField, F, Value
from django.db.models.functions import Cast, Extract

from exports.building.labels import (
    CodedRecords,
    _gold_labels,
    _oracle_labels,
    labels_without_coded,
)
from exports.building.stats import ReleaseStats
from exports.models import Release, ReleaseKind
from windows.actions import action_text_of
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import Event, EventKind, Stay
from windows.selectors_context import WindowDecisions, bedside_filter
from windows.vocabulary import event_label

# Events read from the database per round trip.
EVENT_CHUNK = 5000

EVENT_FIELDS = ("id", "time", *EVENT_VALUE_FIELDS, "source_table", "order_id")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# How ``_dumps`` writes one string (ensure_ascii=False): the C encoder.
_encode_string = json.encoder.encode_basestring


def _hours(stay: Stay, when) -> float:
    return round((when - stay.intime).total_seconds() / 3600.0, 4)


_MICROSECOND = timedelta(microseconds=1)


def _stay_events(stay: Stay, end) -> Iterator[tuple]:
    """The stay's bedside events (id, microseconds since ICU admission, then
    ``EVENT_FIELDS[2:]``, the order id last) in time order, streamed. The
    offset is computed by the database (exact: interval to numeric) so that no
    timestamp has to be parsed per event."""
    if connection.vendor != "postgresql":
        # No interval arithmetic in the database (SQLite, the no-setup default).
        condition = bedside_filter(
            admission_id=stay.admission_id, start=stay.intime, end=end
        )
        events = Event.objects.filter(condition).order_by("time", "id")
        intime = stay.intime
        return (
            (event_id, (time - intime) // _MICROSECOND, *rest)
            for event_id, time, *rest in events.values_list(*EVENT_FIELDS).iterator(
                chunk_size=EVENT_CHUNK
            )
        )
    sql, params, places = _stay_events_sql()
    params = list(params)
    for at, placeholder in places:
        params[at] = {
            _SENTINEL_ADMISSION: stay.admission_id,
            _SENTINEL_INTIME: stay.intime,
            _SENTINEL_END: end,
        }[placeholder]
    return _rows_streamed(sql, params)


# Placeholders that no stay has: the stay query is compiled once with them and
# each stay's values put in their places (compiling the ORM query was 0.1-0.3 s
# of a 145-stay Gold build: issue 35).
_SENTINEL_ADMISSION = -(2**62) + 35
_SENTINEL_INTIME = datetime(1901, 2, 3, 4, 5, 6, 35, tzinfo=UTC)
_SENTINEL_END = datetime(1902, 3, 4, 5, 6, 7, 35, tzinfo=UTC)


@cache
def _stay_events_sql() -> tuple[str, tuple, tuple]:
    """The PostgreSQL query of ``_stay_events`` with the placeholders among its
    parameters, and where they are (each must be there: a stay would read
    another's events)."""
    events = Event.objects.filter(
        bedside_filter(
            admission_id=_SENTINEL_ADMISSION, start=_SENTINEL_INTIME, end=_SENTINEL_END
        )
    ).order_by("time", "id")
    since_admit = F("time") - Value(_SENTINEL_INTIME, output_field=DateTimeField())
    query = events.annotate(
        offset_us=Cast(Extract(since_admit, "epoch") * 1000000, BigIntegerField())
    ).values_list("id", "offset_us", *EVENT_FIELDS[2:])
    sql, params = query.query.sql_with_params()
    placeholders = (_SENTINEL_ADMISSION, _SENTINEL_INTIME, _SENTINEL_END)
    places = [
        (at, param)
        for at, param in enumerate(params)
        if type(param) in (int, datetime) and param in placeholders
    ]
    missing = set(placeholders) - {param for _, param in places}
    if missing:
        raise RuntimeError(f"the stay query lost its placeholders {missing}")
    return sql, tuple(params), tuple(places)


def _rows_streamed(sql: str, params) -> Iterator[tuple]:
    """The rows of ``sql`` as the database gives them, read ``EVENT_CHUNK`` at a
    time through a server-side cursor (as ``QuerySet.iterator``), without the
    per-row converters of the ORM: every column is already of its Python type
    (the offset cast to bigint in SQL), and those calls were a fifth of a small
    release's build (issue 20)."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(EVENT_CHUNK):
            yield from rows


class _EventLines:
    """Context lines written as ``_dumps`` of the event's dict would write them
    (same keys, order, escapes and number formats), but from pre-encoded parts:
    the strings that repeat across events (kind, domain, category, name, unit,
    source table) are JSON-encoded once per build, and an event's time and
    hours once per distinct time (events come in time order, many charted at
    the same minute: issue 35). One loop writes every line of a stay, with no
    call per event but the encoders' (a call per line was a fifth of a Gold
    build's CPU)."""

    def __init__(self) -> None:
        self._parts: dict[tuple, tuple[str, str, str]] = {}

    @staticmethod
    def _string(value) -> str:
        return "null" if value is None else _encode_string(value)

    def parts(self, kind, domain, category, name, unit, table) -> tuple[str, str, str]:
        """The pre-encoded parts of a line around its value and text."""
        key = (kind, domain, category, name, unit, table)
        found = self._parts.get(key)
        if found is None:
            s = self._string
            concept = event_label(
                domain=domain or "", category=category or "", name=name or ""
            ).text
            found = self._parts[key] = (
                f',"kind":{s(kind)},"domain":{s(domain)},"category":{s(category)}'
                f',"name":{s(name)},"concept":{s(concept)},"value_num":',
                f',"unit":{s(unit)},"value_text":',
                f',"source_table":{s(table)}}}\n',
            )
        return found

    def write(
        self, out, events, intime, decisions: WindowDecisions | None = None
    ) -> tuple[int, dict[int, str]]:
        """Writes the lines of a stay's ``events`` (rows of ``_stay_events``,
        ``intime`` its ICU admission) to ``out``, and gives ``decisions`` the
        rows that can belong to a decision (its actions and rows of an order).
        Returns the number of lines and the actions' names by event id."""
        known = self._parts
        encode = _encode_string
        isfinite = math.isfinite
        action = str(EventKind.ACTION)  # a plain str compares faster
        action_names: dict[int, str] = {}
        buffer: list[str] = []
        at = None
        when = ""
        count = 0
        flush_at = EVENT_CHUNK
        for (
            event_id,
            offset,
            kind,
            domain,
            category,
            name,
            num,
            unit,
            text,
            table,
            order,
        ) in events:
            if offset != at:
                at = offset
                hours = round(offset / 10**6 / 3600.0, 4)
                when = (
                    f',"time":"{(intime + timedelta(microseconds=offset)).isoformat()}"'
                    f',"hours_since_admit":{hours!r}'
                )
            parts = known.get((kind, domain, category, name, unit, table))
            if parts is None:
                parts = self.parts(kind, domain, category, name, unit, table)
            buffer.append(
                f'{{"event_id":{event_id}{when}{parts[0]}'
                f"{'null' if num is None or not isfinite(num) else repr(float(num))}"
                f"{parts[1]}{'null' if text is None else encode(text)}{parts[2]}"
            )
            count += 1
            if count == flush_at:
                out.write("".join(buffer))
                buffer.clear()
                flush_at += EVENT_CHUNK
            if kind == action:
                action_names[event_id] = name
            elif not order:
                continue  # neither an action nor of an order: no decision's
            if decisions is not None:
                decisions.add(
                    time=offset,
                    event_id=event_id,
                    is_action=kind == action,
                    order_id=order,
                )
        out.write("".join(buffer))
        return count, action_names


def _write_stay(
    *,
    release: Release,
    stay: Stay,
    rows: list,
    folder: Path,
    stats: ReleaseStats,
    lines: _EventLines,
    coded: CodedRecords | None = None,
) -> list[dict]:
    """Writes the stay's context file and returns its window records. Event
    times are handled as integer microseconds since ICU admission: exact, and
    the same ``hours_since_admit`` as ``_hours`` gives."""
    windows = [row.window for row in rows]
    intime = stay.intime
    last_end = max(w.end for w in windows)
    decisions = WindowDecisions()
    with open(folder / "context" / f"{stay.pk}.jsonl", "w", encoding="utf-8") as out:
        count, action_names = lines.write(
            out, _stay_events(stay, last_end), intime, decisions
        )
    # The windows' own decisions, on the same microsecond clock as the events.
    own = [
        decisions.of_window(
            (w.start - intime) // _MICROSECOND, (w.end - intime) // _MICROSECOND
        )
        for w in windows
    ]
    stats.context_events += count
    stats.stays[stay.pk] = {
        "length_hours": stay.length_hours,
        "outcome": stay.hospital_outcome,
        "disease_group": stay.disease_group,
        "windows": len(rows),
    }
    if coded is None:
        coded = CodedRecords.of_admission(stay.admission_id)
    if release.kind != ReleaseKind.GOLD and action_names:
        # Rated actions are released as the decisions they record ("PEEP 5 -> 10
        # cmH2O"), not as the charting's name ("peep set").
        action_names = {
            event.pk: action_text_of(event)
            for event in Event.objects.filter(pk__in=list(action_names))
        }
    records = []
    for row, window, (action_ids, companion_ids) in zip(rows, windows, own):
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
                "context_file": f"context/{stay.pk}.jsonl",
                "window_action_event_ids": action_ids,
                "window_companion_event_ids": companion_ids,
                "labels": labels,
                # Known only in hindsight (from the ICD codes billed after
                # discharge): for stratifying scores, never a model's input.
                "hindsight": {"disease_group": stay.disease_group},
                "_start": window.start,
                "_end": window.end,
            }
        )
    return records
