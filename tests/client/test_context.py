"""The client's context rule on hand-made release files, without a server:
times compared as times whatever their offset or precision, the window's own
actions left out, files outside the release folder refused."""

import json

import pytest
from realicu_client import RealICUError, bedside_context, iterate_windows, parse_time


def _event(event_id, time, kind="observation"):
    return {"event_id": event_id, "time": time, "kind": kind, "category": "x"}


WINDOW = {
    "window_id": 7,
    "stay_id": 1,
    "start": "2024-01-01T10:00:00+00:00",
    "end": "2024-01-01T10:30:00+00:00",
    "context_file": "context/1.jsonl",
    "window_action_event_ids": [3],
}

EVENTS = [
    # Out of order on purpose. 5 is 10:29:59 UTC written at +02:00: after the
    # end if compared as text. 4 is at the end and 6 a microsecond after it.
    _event(6, "2024-01-01T10:30:00.000001+00:00"),
    _event(1, "2024-01-01T09:00:00+00:00"),
    _event(5, "2024-01-01T12:29:59+02:00"),
    _event(3, "2024-01-01T10:10:00+00:00", kind="action"),
    _event(4, "2024-01-01T10:30:00+00:00"),
    _event(2, "2024-01-01T09:59:59.999999+00:00", kind="action"),
]


def test_context_is_the_events_strictly_before_the_end_in_time_order():
    context = bedside_context(EVENTS, WINDOW)
    assert [e["event_id"] for e in context] == [1, 2, 5]
    end = parse_time(WINDOW["end"])
    assert all(parse_time(e["time"]) < end for e in context)


def test_the_windows_own_actions_are_kept_only_when_asked():
    kept = bedside_context(EVENTS, WINDOW, include_window_actions=True)
    assert [e["event_id"] for e in kept] == [1, 2, 3, 5]
    # An action before the window's start is context, not the answer.
    assert 2 in {e["event_id"] for e in bedside_context(EVENTS, WINDOW)}


def test_a_time_without_offset_is_refused():
    with pytest.raises(RealICUError, match="no UTC offset"):
        bedside_context([_event(1, "2024-01-01T09:00:00")], WINDOW)


def _release(folder, records, events):
    (folder / "context").mkdir(parents=True)
    (folder / "windows.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records)
    )
    (folder / "context" / "1.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events)
    )


def test_iterate_windows_reads_a_downloaded_folder_in_time_order(tmp_path):
    later = {
        **WINDOW,
        "window_id": 8,
        "start": "2024-01-01T12:00:00+00:00",
        "end": "2024-01-01T12:30:00+00:00",
        "window_action_event_ids": [],
    }
    _release(tmp_path, [later, WINDOW], EVENTS)
    windows = list(iterate_windows(tmp_path))
    assert [w.window_id for w in windows] == [7, 8]
    assert [e["event_id"] for e in windows[0].context] == [1, 2, 5]
    assert [e["event_id"] for e in windows[1].context] == [1, 2, 3, 5, 4, 6]
    assert list(iterate_windows(tmp_path, stay_ids=[2])) == []


def test_a_context_file_outside_the_release_folder_is_refused(tmp_path):
    _release(tmp_path / "release", [{**WINDOW, "context_file": "../secret.jsonl"}], [])
    (tmp_path / "secret.jsonl").write_text("")
    with pytest.raises(RealICUError, match="not a path inside the release folder"):
        list(iterate_windows(tmp_path / "release"))
