"""A release's context lines (exports.building.context._EventLines) are written
from pre-encoded parts, an event's time once per distinct time: each line must
still be exactly the JSON of the event's dict, and a time shared by two stays
(different ICU admission times, same offset) must not be reused across them."""

import math
from datetime import UTC, datetime, timedelta

from exports.building.context import _dumps, _EventLines
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
    written = [lines.line(*event) for event in events]
    assert written == [_expected(*event) for event in events]
    assert '"time":"2030-01-01T09:30:15.250000+00:00"' in written[2]
    assert '"time":"2030-01-01T08:00:00+00:00"' in written[5]
