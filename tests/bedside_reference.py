"""An independent statement of the bedside cut (REALICU_SPEC section 1), for
leak tests that can fail: raw SQL over ``windows_event`` with the hindsight
rules written out here, not imported, and per window a plain mask over numpy
arrays, not the bisections of the code under test.

A window's expected context is every bedside event of its admission with
``time < end``, less the window's own decisions: the actions recorded in
``[start, end)`` and every other row with the same order id at the same time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.db import connection

# Written out, not imported from windows.selectors_context: a typo there must
# not hide itself here.
_BEDSIDE_SQL = """
SELECT admission_id, id, time, kind, order_id
FROM windows_event
WHERE kind NOT IN ('outcome', 'coded')
  AND category NOT IN ('icu_discharge', 'hospital_discharge', 'death',
                       'discharge_disposition', 'discharge_summary')
  AND NOT (domain = 'notes' AND category <> 'radiology_report')
ORDER BY admission_id, time, id
"""

# The static facts a bedside model may have: known at ICU admission.
BEDSIDE_STATIC_KEYS = {"age", "sex", "care_unit", "admission_type"}


@dataclass
class _Admission:
    ids: np.ndarray
    times: np.ndarray  # microseconds since the epoch
    actions: np.ndarray  # bool
    orders: list[str]


def _micros(when) -> int:
    return int(round(when.timestamp() * 1_000_000))


class BedsideReference:
    """Every admission's bedside rows, read once."""

    def __init__(self) -> None:
        rows = defaultdict(list)
        with connection.cursor() as cursor:
            cursor.execute(_BEDSIDE_SQL)
            for admission_id, event_id, time, kind, order_id in cursor.fetchall():
                rows[admission_id].append((event_id, time, kind, order_id))
        self.admissions: dict[int, _Admission] = {}
        for admission_id, events in rows.items():
            self.admissions[admission_id] = _Admission(
                ids=np.array([e[0] for e in events], dtype=np.int64),
                times=np.array([_micros(e[1]) for e in events], dtype=np.int64),
                actions=np.array([e[2] == "action" for e in events]),
                orders=[e[3] or "" for e in events],
            )

    def own_decisions(self, *, admission_id: int, start, end) -> set[int]:
        """Ids of the window's own decisions: actions in ``[start, end)`` and
        the rows of the same order at the same time."""
        a = self.admissions.get(admission_id)
        if a is None:
            return set()
        inside = (a.times >= _micros(start)) & (a.times < _micros(end))
        own = set(a.ids[inside & a.actions].tolist())
        keys = {
            (a.orders[i], int(a.times[i]))
            for i in np.flatnonzero(inside & a.actions)
            if a.orders[i]
        }
        for i in np.flatnonzero(inside & ~a.actions):
            if a.orders[i] and (a.orders[i], int(a.times[i])) in keys:
                own.add(int(a.ids[i]))
        return own

    def expected(self, *, admission_id: int, start, end) -> list[int]:
        """The ids of the window's bedside context, by time then id."""
        a = self.admissions.get(admission_id)
        if a is None:
            return []
        before = a.ids[a.times < _micros(end)].tolist()
        own = self.own_decisions(admission_id=admission_id, start=start, end=end)
        return [i for i in before if i not in own]

    def before(self, *, admission_id: int, end) -> set[int]:
        """Ids of every bedside row strictly before ``end``."""
        a = self.admissions.get(admission_id)
        if a is None:
            return set()
        return set(a.ids[a.times < _micros(end)].tolist())


def add_events_at_window_ends(windows_by_stay, *, per_stay: int = 2) -> int:
    """An observation stamped exactly at the end of each stay's first
    ``per_stay`` windows: it belongs to what follows, so the window that ends
    there must not see it (a cut with ``time <= end`` would). Returns how
    many were added."""
    from tests.factories import HEART_RATE
    from windows.models import Event

    rows = []
    for stay, windows in windows_by_stay.items():
        for window in windows[:per_stay]:
            at_end = {"time": window.end, "name": "Heart Rate (at a window's end)"}
            rows.append(
                Event(
                    admission_id=stay.admission_id,
                    **(HEART_RATE | at_end | {"source_table": "test_boundary"}),
                    source_key=f"end-{window.pk}",
                )
            )
    Event.objects.bulk_create(rows)
    return len(rows)
