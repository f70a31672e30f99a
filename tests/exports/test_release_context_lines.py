"""A release's context lines (exports.building.context._EventLines) are written
from pre-encoded parts, an event's time once per distinct time: each line must
still be exactly the JSON of the event's dict, and a time shared by two stays
(different ICU admission times, same offset) must not be reused across them."""

import io
import math
from datetime import UTC, datetime, timedelta
from itertools import groupby

from exports.building.context import _dumps, _EventLines
from windows.selectors_context import WindowDecisions
from windows.vocabulary import event_label

INTIME_A = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
INTIME_B = datetime(2030, 1, 1, 9, 30, 15, 250000, tzinfo=UTC)


def _expected(event_id, intime, offset, kind, domain, category, name, num, unit,
              text, table) -> str:  # fmt: skip
    return (
        _dumps(
            {
                "event_id": event_id,
                "time": (intime + timedelta(microseconds=offset)).isoformat(),
                "hours_since_admit": round(offset / 10**6 / 3600.0, 4),
                "kind": kind,
                "domain": domain,
                "category": category,
                "name": name,
                "concept": event_label(
                    domain=domain or "", category=category or "", name=name or ""
                ).text,
                "value_num": None if num is None or not math.isfinite(num) else num,
                "unit": unit,
                "value_text": text,
                "source_table": table,
            }
        )
        + "\n"
    )


def test_each_line_is_the_json_of_its_event_and_times_stay_with_their_stay():
    vitals = ("observation", "vitals", "heart_rate", "Heart rate")
    events = [
        (1, INTIME_A, 0, *vitals, 80.0, "bpm", None, "vitals"),
        # Same time: the cached time part.
        (2, INTIME_A, 0, *vitals, float("nan"), "bpm", 'sé "quoted"', "vitals"),
        # Same offset, another stay: its own time.
        (3, INTIME_B, 0, *vitals, 81.5, "bpm", None, "vitals"),
        (
            4,
            INTIME_B,
            5_400_000_123,
            "action",
            "med_continuous",
            "norepinephrine",
            "Norepinephrine",
            0.05,
            "mcg/kg/min",
            None,
            "meds",
        ),  # fmt: skip
        (
            5,
            INTIME_B,
            5_400_000_123,
            "action",
            None,
            None,
            None,
            None,
            None,
            "free text\nline",
            None,
        ),  # fmt: skip
        # Back to the first stay at a time seen before.
        (6, INTIME_A, 0, *vitals, 1e-07, "bpm", None, "vitals"),
    ]
    lines = _EventLines()
    written = []
    # One write per run of a stay's events, as the release writes a stay's file.
    for intime, run in groupby(events, key=lambda event: event[1]):
        out = io.StringIO()
        rows = [(e[0], *e[2:], None) for e in run]  # no order id
        assert lines.write(out, rows, intime)[0] == len(rows)
        written += out.getvalue().splitlines(keepends=True)
    assert written == [_expected(*event) for event in events]
    assert '"time":"2030-01-01T09:30:15.250000+00:00"' in written[2]
    assert '"time":"2030-01-01T08:00:00+00:00"' in written[5]


def test_writing_a_stay_feeds_its_decisions_and_names_its_actions():
    vitals = ("observation", "vitals", "heart_rate", "Heart rate", 80.0, "bpm")
    drip = ("action", "med_continuous", "norepinephrine", "Norepinephrine", 0.05)
    hour = 3_600_000_000
    rows = [
        (1, 0, *vitals, None, "vitals", None),
        (2, hour, *drip, "mcg/kg/min", None, "meds", "order-7"),
        # The same order at the same time: a companion row of action 2.
        (
            3,
            hour,
            "observation",
            "meds",
            "dose",
            "Dose",
            5.0,
            "mg",
            None,
            "meds",
            "order-7",
        ),  # fmt: skip
        (4, 2 * hour, *drip, "mcg/kg/min", None, "meds", None),
        (5, 2 * hour, *vitals, None, "vitals", None),
    ]
    decisions = WindowDecisions()
    out = io.StringIO()
    count, names = _EventLines().write(out, rows, INTIME_A, decisions)
    assert count == 5 and len(out.getvalue().splitlines()) == 5
    assert names == {2: "Norepinephrine", 4: "Norepinephrine"}
    assert decisions.of_window(0, hour + 1) == ([2], [3])
    assert decisions.of_window(hour + 1, 3 * hour) == ([4], [])
    assert decisions.of_window(0, hour) == ([], [])
