"""The facts of one window that the rules read: its concept-track rows "now" and
"before", its events nearest first, and the events cited as evidence for each
track (see the package docstring for the spans)."""

from __future__ import annotations

import math

from oracle.backbones.base import WindowContext
from oracle.backbones.rules.thresholds import (
    BEFORE_HOURS,
    DEATH_BEFORE_END_HOURS,
    DEATH_GUARD_HOURS,
    INOTROPES,
    MAP_TARGET,
    MED_DOMAINS,
    NOW_LEAD_HOURS,
    SUSTAINED_HOURS,
    VASOPRESSORS,
)
from windows.concepts.respiratory import STATUSES as VENTILATION_STATUSES
from windows.concepts.sepsis import ANTIBIOTICS
from windows.models import Outcome

# Which events stand behind each concept track (CLIF categories, or a domain).
EVIDENCE = {
    "map": {"categories": {"map", "sbp"}},
    "hr": {"categories": {"heart_rate"}},
    "spo2": {"categories": {"spo2"}},
    "temp": {"categories": {"temp_c"}},
    "gcs": {"categories": {"gcs_total"}},
    "lactate": {"categories": {"lactate"}},
    "ph": {"categories": {"ph_arterial", "pco2_arterial", "bicarbonate"}},
    "creatinine": {"categories": {"creatinine"}},
    "platelets": {"categories": {"platelet_count"}},
    "bilirubin": {"categories": {"bilirubin_total"}},
    "inr": {"categories": {"inr"}},
    "fio2": {"categories": {"fio2_set"}},
    "pf_ratio": {"categories": {"po2_arterial", "fio2_set"}},
    "vasopressors": {"categories": set(VASOPRESSORS), "domains": set(MED_DOMAINS)},
    "inotropes": {"categories": set(INOTROPES), "domains": set(MED_DOMAINS)},
    "ventilation": {"domains": {"respiratory_support"}},
    "crrt": {"domains": {"crrt_therapy"}},
    "urine": {"domains": {"output"}},
    "antibiotic": {"categories": set(ANTIBIOTICS), "domains": set(MED_DOMAINS)},
}


def _num(value) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


class _Window:
    """The facts of one window: track values now and before, and its events by
    category, for the rules below."""

    def __init__(self, context: WindowContext):
        self.context = context
        self.start_h = context.hours_since_admit
        self.end_h = self.start_h + (context.end - context.start).total_seconds() / 3600
        self.last_h = max(math.ceil(self.end_h), math.floor(self.start_h) + 1)
        frame = context.tracks
        if frame is not None and len(frame):
            self.hours = frame.index.to_numpy(dtype=float)
            self.frame = frame
            self.now = self.rows(self.start_h - NOW_LEAD_HOURS, self.last_h)
            self.before = self.rows(
                self.start_h - NOW_LEAD_HOURS - BEFORE_HOURS,
                self.start_h - NOW_LEAD_HOURS,
            )
        else:
            self.hours = self.frame = self.now = self.before = None
        self.events = sorted(
            context.events, key=lambda e: (self._distance(e), -e["id"])
        )
        self.static = context.static or {}

    def rows(self, after_h: float, upto_h: float):
        """The track rows of hours ending in (after_h, upto_h]."""
        if self.frame is None:
            return None
        return self.frame[(self.hours > after_h) & (self.hours <= upto_h)]

    def _distance(self, event) -> float:
        h = event["hours"]
        if self.start_h <= h < self.end_h:
            return 0.0
        # Past events first at equal distance: the window is judged on what led to it.
        return min(abs(h - self.start_h), abs(h - self.end_h)) + (
            0.01 if h >= self.end_h else 0
        )

    @staticmethod
    def series(rows, column) -> list:
        if rows is None or column not in rows:
            return []
        return [v for v in rows[column].tolist() if v is not None and v == v]

    def numbers(self, column: str, rows=None) -> list[float]:
        rows = self.now if rows is None else rows
        return [
            n for n in (_num(v) for v in self.series(rows, column)) if n is not None
        ]

    def value(self, column: str, how: str = "last", *, when: str = "now"):
        """A track over "now" or "before": last known, min, max or mean; None if
        unknown. Ventilation status: the last or the most supportive."""
        rows = self.now if when == "now" else self.before
        if column == "ventilation":
            ranked = [v for v in self.series(rows, column) if v in VENTILATION_STATUSES]
            if not ranked:
                return None
            return (
                max(ranked, key=VENTILATION_STATUSES.index)
                if how == "max"
                else ranked[-1]
            )
        numbers = self.numbers(column, rows)
        if not numbers:
            return None
        if how == "mean":
            return sum(numbers) / len(numbers)
        return {"last": numbers[-1], "min": min(numbers), "max": max(numbers)}[how]

    def change(self, column: str, how: str = "last") -> tuple | None:
        """A track's value "now" and "before" (``value``), or None when either
        is unknown: the trends compare the two."""
        now, before = self.value(column, how), self.value(column, how, when="before")
        if now is None or before is None:
            return None
        return now, before

    def worst_since(self, column: str, hours: float) -> float | None:
        """The highest value of a track over the ``hours`` before the window's end."""
        numbers = self.numbers(column, self.rows(self.last_h - hours, self.last_h))
        return max(numbers) if numbers else None

    def hypotension(self, below: float = MAP_TARGET) -> bool:
        """Sustained hypotension: the hourly mean MAP of "now" below ``below``
        in its latest known hour and in SUSTAINED_HOURS hours at least."""
        means = self.numbers("map")
        if not means or means[-1] >= below:
            return False
        return sum(m < below for m in means) >= SUSTAINED_HOURS

    def final_hours_before_death(self) -> bool:
        """The window lies in the last DEATH_GUARD_HOURS (12 h) before death: its
        end is at most 12 h before the time of death (the hindsight fact
        ``death_h`` of the context, hours from ICU admission). A patient who died
        in hospital without a known time of death: the window may lie there, in
        the last 12 + DEATH_BEFORE_END_HOURS hours of the ICU stay."""
        if self.static.get("hospital_outcome") != Outcome.DIED:
            return False
        death_h = _num(self.static.get("death_h"))
        if death_h is not None:
            return death_h - self.end_h <= DEATH_GUARD_HOURS
        stay_hours = _num(self.static.get("stay_hours"))
        if stay_hours is None:
            return False
        return stay_hours - self.end_h <= DEATH_GUARD_HOURS + DEATH_BEFORE_END_HOURS

    def cite(self, *keys: str, limit: int = 2) -> list[int]:
        """Ids of the events behind ``keys`` (EVIDENCE), nearest the window first."""
        out: list[int] = []
        for key in keys:
            spec = EVIDENCE[key]
            categories, domains = spec.get("categories"), spec.get("domains")
            found = 0
            for event in self.events:
                if categories is not None and event["category"] not in categories:
                    continue
                if domains is not None and event["domain"] not in domains:
                    continue
                if event["id"] not in out:
                    out.append(event["id"])
                    found += 1
                if found >= limit:
                    break
        return out

    def nearest(self, n: int = 1) -> list[int]:
        return [e["id"] for e in self.events[:n]]

    def evidence(self, *keys: str, limit: int = 2) -> list[int]:
        """cite(), or the events nearest the window when none of ``keys`` has any."""
        return self.cite(*keys, limit=limit) or self.nearest()

    def previous_rate(self, event) -> float | None:
        """The rate of the same drug charted just before ``event`` in the context."""
        earlier = [
            e
            for e in self.context.events
            if e["category"] == event["category"]
            and e["domain"] == event["domain"]
            and (e["hours"], e["id"]) < (event["hours"], event["id"])
        ]
        if not earlier:
            return None
        last = max(earlier, key=lambda e: (e["hours"], e["id"]))
        if str(last["text"]).lower() in {"stop", "stopped", "paused"}:
            return 0.0
        return _num(last["value"])
