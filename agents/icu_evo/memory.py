"""ICU-Evo's rule-based memory (the paper's Observation Agent, section 4.2):
working memory, trend memory by piecewise aggregate approximation (PAA) and
the critical-event rules. Pure functions over a window's context (the event
dicts of agents.base.WindowContext), no database and no language model.

Working memory
    The latest ``WORKING_EVENTS`` (30) events of the last ``WORKING_HOURS``
    (4) hours before the window's end, raw (one prompt line each).

Trend memory
    For each series of ``TREND_SERIES`` (vitals, GCS, FiO2 and key labs, by
    CLIF category), the PAA of its values over the last ``TREND_HOURS`` (24)
    hours before the window's end: ``PAA_SEGMENTS`` (8) segments of equal time
    (3 h), each the mean of the values measured in it (``None`` when nothing
    was). With values at regular times this is the classic PAA (the mean of
    each run of n/w consecutive samples); with ICU charting's irregular times
    each segment averages what it holds.

Critical events
    An event is critical when it meets one of ``CRITICAL_RULES`` (thresholds
    from /work/shared/CLINICAL_CONCEPTS.md, cited on each rule; the metabolic
    and coagulation alerts are spec section 10's, which defers to that file
    for the concepts). A rule that already logged an event less than
    ``CRITICAL_REPEAT_HOURS`` (6) hours earlier does not log again (a
    persisting finding is one entry per 6 h), and the log holds at most
    ``CRITICAL_LOG_CAP`` entries: past it, findings are only counted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

from agents.prompts import event_line
from windows.concepts.columns import VASOACTIVE_DRUGS

WORKING_EVENTS = 30
WORKING_HOURS = 4.0

TREND_HOURS = 24.0
PAA_SEGMENTS = 8
# CLIF categories whose values are summarised as trends.
TREND_SERIES = (
    "heart_rate",
    "map",
    "sbp",
    "respiratory_rate",
    "spo2",
    "temp_c",
    "gcs_total",
    "fio2_set",
    "lactate",
    "ph_arterial",
    "creatinine",
    "platelet_count",
    "bilirubin_total",
    "inr",
    "wbc",
    "hemoglobin",
    "potassium",
    "bicarbonate",
)

CRITICAL_REPEAT_HOURS = 6.0
CRITICAL_LOG_CAP = 200

# CLINICAL_CONCEPTS.md section 5: the seven vasoactive agents.
VASOACTIVES = frozenset(VASOACTIVE_DRUGS)


def parse_time(value) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def paa_by_time(
    points: list[tuple[datetime, float]],
    *,
    start: datetime,
    end: datetime,
    segments: int = PAA_SEGMENTS,
) -> list[float | None]:
    """PAA over time: ``[start, end)`` cut into ``segments`` equal spans, each
    the mean of the values of ``points`` (time, value) inside it, None when it
    holds none; points outside ``[start, end)`` are ignored."""
    span = (end - start) / segments
    sums = [0.0] * segments
    counts = [0] * segments
    for when, value in points:
        if when < start or when >= end or value is None:
            continue
        s = min(segments - 1, int((when - start) / span))
        sums[s] += value
        counts[s] += 1
    return [
        round(sums[s] / counts[s], 2) if counts[s] else None for s in range(segments)
    ]


def compact(event: dict) -> dict:
    """An event as memory keeps it: id, hours since admission and its line."""
    return {
        "id": event.get("event_id"),
        "h": event.get("hours_since_admit"),
        "line": event_line(event),
    }


def working_memory(events: list[dict], times: list[datetime], end: datetime) -> list:
    """The latest WORKING_EVENTS events of the last WORKING_HOURS before
    ``end`` (``events`` in time order, ``times`` parallel to them)."""
    lo = bisect.bisect_left(times, end - timedelta(hours=WORKING_HOURS))
    hi = bisect.bisect_left(times, end)
    return [compact(e) for e in events[max(lo, hi - WORKING_EVENTS) : hi]]


def trend_memory(
    events: list[dict], times: list[datetime], end: datetime, origin_h: float
) -> dict:
    """The trend memory at ``end``: per series its PAA segments, last value and
    unit. ``origin_h`` is ``end`` in hours since ICU admission."""
    start = end - timedelta(hours=TREND_HOURS)
    lo = bisect.bisect_left(times, start)
    hi = bisect.bisect_left(times, end)
    points: dict[str, list] = {}
    meta: dict[str, dict] = {}
    for event, when in zip(events[lo:hi], times[lo:hi], strict=True):
        category = event.get("category")
        if category not in TREND_SERIES or event.get("value_num") is None:
            continue
        points.setdefault(category, []).append((when, float(event["value_num"])))
        meta[category] = {
            "label": event.get("concept") or event.get("name") or category,
            "unit": event.get("unit") or "",
            "last": event["value_num"],
            "last_h": event.get("hours_since_admit"),
        }
    series = {}
    for category in TREND_SERIES:
        if category not in points:
            continue
        series[category] = {
            **meta[category],
            "segments": paa_by_time(points[category], start=start, end=end),
        }
    return {
        "from_h": round(origin_h - TREND_HOURS, 2),
        "to_h": round(origin_h, 2),
        "segment_hours": TREND_HOURS / PAA_SEGMENTS,
        "series": series,
    }


@dataclass(frozen=True)
class Rule:
    """A critical-event rule: events of ``categories`` (any category when it is
    empty) and of ``domains`` (any when empty) whose value is below ``below``
    or at least ``at_least``; with neither, any such event whose value is
    absent or above 0."""

    key: str
    label: str
    source: str
    categories: frozenset = frozenset()
    domains: frozenset = frozenset()
    below: float | None = None
    at_least: float | None = None

    def matches(self, event: dict) -> bool:
        category = str(event.get("category") or "").lower()
        if self.categories and category not in self.categories:
            return False
        if self.domains and event.get("domain") not in self.domains:
            return False
        value = event.get("value_num")
        if self.below is not None:
            return value is not None and value < self.below
        if self.at_least is not None:
            return value is not None and value >= self.at_least
        return value is None or value > 0


_MEDS = frozenset({"medication_admin_continuous", "medication_admin_intermittent"})

CRITICAL_RULES: tuple[Rule, ...] = (
    Rule(
        "hypotension",
        "MAP < 70 mmHg",
        "CLINICAL_CONCEPTS.md 9b, cardiovascular 1",
        frozenset({"map"}),
        below=70,
    ),
    Rule(
        "vasoactive",
        "vasoactive or inotrope infusion",
        "CLINICAL_CONCEPTS.md 5 (the seven agents) and 9b, cardiovascular 2-4",
        VASOACTIVES,
        domains=_MEDS,
    ),
    Rule(
        "invasive_ventilation",
        "invasive mechanical ventilation",
        "CLINICAL_CONCEPTS.md 6b, InvasiveVent",
        frozenset({"imv"}),
        domains=frozenset({"respiratory_support"}),
    ),
    Rule(
        "crrt",
        "CRRT running (any CRRT record)",
        "CLINICAL_CONCEPTS.md 11a",
        frozenset(),
        domains=frozenset({"crrt_therapy"}),
    ),
    Rule(
        "coma",
        "GCS <= 9",
        "CLINICAL_CONCEPTS.md 9b, CNS 3-4 (GCS < 10)",
        frozenset({"gcs_total"}),
        below=10,
    ),
    Rule(
        "thrombocytopenia",
        "platelets < 50 K/uL",
        "CLINICAL_CONCEPTS.md 9b, coagulation 3-4",
        frozenset({"platelet_count"}),
        below=50,
    ),
    Rule(
        "liver_failure",
        "bilirubin >= 6.0 mg/dL",
        "CLINICAL_CONCEPTS.md 9b, liver 3-4",
        frozenset({"bilirubin_total"}),
        at_least=6.0,
    ),
    Rule(
        "renal_failure",
        "creatinine >= 3.5 mg/dL",
        "CLINICAL_CONCEPTS.md 9b, renal 3-4",
        frozenset({"creatinine"}),
        at_least=3.5,
    ),
    Rule(
        "hyperlactataemia",
        "lactate >= 4 mmol/L",
        "REALICU_SPEC.md 10, metabolic alert (lactate, CLINICAL_CONCEPTS.md 7)",
        frozenset({"lactate"}),
        at_least=4.0,
    ),
    Rule(
        "severe_acidaemia",
        "pH <= 7.20",
        "REALICU_SPEC.md 10, severe acidaemia (pH, CLINICAL_CONCEPTS.md 7)",
        frozenset({"ph_arterial"}),
        below=7.2000001,
    ),
    Rule(
        "coagulopathy",
        "INR >= 2.0",
        "REALICU_SPEC.md 10, coagulation alert (INR, CLINICAL_CONCEPTS.md 8)",
        frozenset({"inr"}),
        at_least=2.0,
    ),
)


def critical_rule(event: dict) -> Rule | None:
    """The first rule ``event`` meets, or None."""
    for rule in CRITICAL_RULES:
        if rule.matches(event):
            return rule
    return None


def critical_append(
    log: list[dict],
    events: list[dict],
    *,
    window_index: int,
    not_logged: int = 0,
) -> tuple[list[dict], int]:
    """``log`` with the critical events among ``events`` (time order, none
    already scanned) appended; entries already in it are never changed or
    removed. Returns the new log and the count of findings left out by the
    cap."""
    out = list(log)
    last_h: dict[str, float] = {}
    logged_ids = {entry.get("event_id") for entry in out}
    for entry in out:
        last_h[entry["rule"]] = entry.get("h") or 0.0
    for event in events:
        rule = critical_rule(event)
        if rule is None or event.get("event_id") in logged_ids:
            continue
        hours = event.get("hours_since_admit") or 0.0
        previous = last_h.get(rule.key)
        if previous is not None and hours - previous < CRITICAL_REPEAT_HOURS:
            continue
        if len(out) >= CRITICAL_LOG_CAP:
            not_logged += 1
            continue
        out.append(
            {
                "event_id": event.get("event_id"),
                "h": hours,
                "rule": rule.key,
                "label": rule.label,
                "line": event_line(event),
                "window_index": window_index,
                "source": "rule",
            }
        )
        logged_ids.add(event.get("event_id"))
        last_h[rule.key] = hours
    return out, not_logged
