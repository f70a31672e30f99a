"""Windows of a downloaded release with their bedside context.

This module is the one place where the leak-free rule is applied: the context
of a window is its stay's events (``context/<stay_id>.jsonl``) whose ``time`` is
strictly before the window's ``end`` (a window is ``[start, end)``; an event
stamped at the end belongs to what follows), and, unless asked otherwise, not
the window's own recorded decisions (``window_action_event_ids`` and
``window_companion_event_ids``: its actions and the other rows of the same
orders at the same times), which are the answer of the Recommended Actions
task. A window record's ``labels`` and ``hindsight`` are never model input.
This is a standalone copy of the server's cut (windows.selectors_context), so
that the client needs no Django; the server's tests compare the two on a built
release. The server writes the files with the
same rule's other half already applied: no outcome-revealing event and nothing
coded after discharge (the release's DATACARD.md, "Bedside context of a
window")."""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from realicu_client.errors import RealICUError


def parse_time(text: str) -> datetime:
    """An ISO 8601 time of a release file as an aware datetime. Times are
    compared as datetimes, never as strings: text order holds only while every
    time has the same offset and a known precision."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        raise RealICUError(
            f"Time {text!r} has no UTC offset; the file is not a release's."
        )
    return when


@dataclass(frozen=True)
class Window:
    """A window record (the line of ``windows.jsonl``) and its bedside context:
    the events strictly before its end, in time order. Each window's context
    is its own list: keep what a model needs, not every window of a long stay."""

    record: dict
    context: list[dict] = field(repr=False)

    @property
    def window_id(self) -> int:
        return self.record["window_id"]

    @property
    def stay_id(self) -> int:
        return self.record["stay_id"]

    @property
    def start(self) -> datetime:
        return parse_time(self.record["start"])

    @property
    def end(self) -> datetime:
        return parse_time(self.record["end"])

    @property
    def labels(self) -> dict:
        """The reference labels: what is scored, never model input."""
        return self.record.get("labels", {})

    def model_input(self) -> dict:
        """What a model under test may be given for this window: where it
        lies in its stay and its bedside context. Never the labels, the
        window's own decisions, or ``hindsight`` (what is known only after
        discharge, such as the ICD-derived disease group)."""
        return {
            key: self.record[key]
            for key in (
                "window_id",
                "stay_id",
                "window_index",
                "start",
                "end",
                "start_hours",
                "end_hours",
            )
            if key in self.record
        } | {"context": list(self.context)}


class StayContext:
    """One stay's context events, sorted by time once, so that each window's
    context is one binary search."""

    def __init__(self, events: Iterable[dict]):
        timed = sorted(
            ((parse_time(event["time"]), event["event_id"], event) for event in events),
            key=lambda item: (item[0], item[1]),
        )
        self._times = [when for when, _, _ in timed]
        self._events = [event for _, _, event in timed]

    def for_window(self, record: dict, *, include_window_actions: bool = False):
        """The bedside context of the window ``record``: events with
        ``time < end``, without the window's own decisions unless asked."""
        before_end = bisect_left(self._times, parse_time(record["end"]))
        own = set(record.get("window_action_event_ids") or ()) | set(
            record.get("window_companion_event_ids") or ()
        )
        if include_window_actions or not own:
            return self._events[:before_end]
        # The window's own actions lie in [start, end): only that stretch is
        # filtered, so a long stay's windows cost a copy each, not a loop.
        from_start = min(
            bisect_left(self._times, parse_time(record["start"])), before_end
        )
        return self._events[:from_start] + [
            event
            for event in self._events[from_start:before_end]
            if event["event_id"] not in own
        ]


def bedside_context(
    events: Iterable[dict], record: dict, *, include_window_actions: bool = False
) -> list[dict]:
    """The bedside context of one window from its stay's context events."""
    return StayContext(events).for_window(
        record, include_window_actions=include_window_actions
    )


def read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                raise RealICUError(
                    f"{path}, line {number}: not JSON ({error})."
                ) from None


def inside(folder: Path, relative: str) -> Path:
    """``folder / relative``, refused when it would lie outside ``folder``."""
    root = folder.resolve()
    path = (root / relative).resolve()
    if root not in path.parents:
        raise RealICUError(f"{relative!r} is not a path inside the release folder.")
    return path


def stays_in_release(
    folder: Path, index: str, time_key: str, stay_ids: Iterable[int] | None
) -> Iterator[tuple[StayContext, list[dict]]]:
    """The records of a release folder's ``index`` (``windows.jsonl``,
    ``checkpoints.jsonl``), stay by stay in the index's order, each stay's
    records in time order (``time_key``) with its context read once;
    ``stay_ids`` keeps those stays only."""
    wanted = None if stay_ids is None else set(stay_ids)
    by_stay: dict[int, list[dict]] = {}
    for record in read_jsonl(inside(folder, index)):
        if wanted is None or record["stay_id"] in wanted:
            by_stay.setdefault(record["stay_id"], []).append(record)
    for records in by_stay.values():
        records.sort(key=lambda record: parse_time(record[time_key]))
        files = {record["context_file"] for record in records}
        if len(files) != 1:
            raise RealICUError(
                f"Stay {records[0]['stay_id']} names several context files: "
                f"{sorted(files)}."
            )
        yield StayContext(read_jsonl(inside(folder, files.pop()))), records


def iterate_windows(
    folder: str | Path,
    *,
    stay_ids: Iterable[int] | None = None,
    include_window_actions: bool = False,
) -> Iterator[Window]:
    """Every window of a downloaded release folder with its bedside context,
    stay by stay (in the order of ``windows.jsonl``) and in time order within
    a stay. Each stay's context file is read once; ``stay_ids`` keeps those
    stays only."""
    for stay, records in stays_in_release(
        Path(folder), "windows.jsonl", "start", stay_ids
    ):
        for record in records:
            yield Window(
                record=record,
                context=stay.for_window(
                    record, include_window_actions=include_window_actions
                ),
            )
