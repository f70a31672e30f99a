"""Leak-free window contexts for agents (agents.base.WindowContext), built by
the runner and only by it, with the one bedside cut (windows.selectors_context):
one query for a stay's bedside events (``bedside_filter``, up to the last
window's end, hindsight records removed), then per window the events strictly
before its end without the window's own recorded decisions
(``WindowDecisions``: its actions and their companion rows, the answer of the
Recommended Actions task, spec section 1). An agent, or an online endpoint,
never gets anything else.

The static facts are those known at ICU admission: age, sex, care unit and
admission type. Never the stay's outcome, its discharge, or anything derived
from codes billed after it (the disease group comes from the first-ranked
ICD code: it stays out, spec section 1).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from agents.base import PastWindow, WindowContext
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import Event, EventKind, Stay, Window
from windows.selectors_context import WindowDecisions, bedside_filter
from windows.vocabulary import event_label

EVENT_FIELDS = (
    "id",
    "time",
    *EVENT_VALUE_FIELDS,
    "order_id",
)


def stay_static(stay: Stay) -> dict:
    admission = stay.admission
    patient = admission.patient
    return {
        "age": admission.age_at_admission or patient.age,
        "sex": patient.sex,
        "care_unit": stay.care_unit,
        "admission_type": admission.admission_type,
    }


def stay_events(stay: Stay, end) -> tuple[list[dict], list, WindowDecisions]:
    """The stay's bedside events before ``end`` as dicts, their times, and
    the rows that make up its recorded decisions."""
    condition = bedside_filter(
        admission_id=stay.admission_id, start=stay.intime, end=end
    )
    labels: dict[tuple, str] = {}
    events, times = [], []
    decisions = WindowDecisions()
    rows = (
        Event.objects.filter(condition)
        .order_by("time", "id")
        .values_list(*EVENT_FIELDS)
        .iterator(chunk_size=5000)
    )
    action = EventKind.ACTION.value
    for event_id, time, kind, domain, category, name, num, unit, text, order in rows:
        key = (domain, category, name)
        concept = labels.get(key)
        if concept is None:
            concept = labels[key] = event_label(
                domain=domain or "", category=category or "", name=name or ""
            ).text
        events.append(
            {
                "event_id": event_id,
                "time": time.isoformat(),
                "hours_since_admit": round(stay.hours_since_admit(time), 4),
                "kind": kind,
                "domain": domain,
                "category": category,
                "name": name,
                "concept": concept,
                "value_num": num,
                "unit": unit,
                "value_text": text,
            }
        )
        times.append(time)
        decisions.add(
            time=time, event_id=event_id, is_action=kind == action, order_id=order
        )
    return events, times, decisions


def stay_contexts(stay: Stay, window_ids: Iterable[int]) -> Iterator[WindowContext]:
    """The contexts of the stay's windows ``window_ids``, in time order. Each
    holds the events strictly before its window's end, without the window's
    own recorded decisions; its past windows are the stay's windows that end
    at or before its start."""
    wanted = set(window_ids)
    all_windows = list(
        Window.objects.filter(stay=stay)
        .order_by("start", "id")
        .only("id", "index", "start", "end", "hours_since_admit", "stay_id")
    )
    targets = [w for w in all_windows if w.pk in wanted]
    if not targets:
        return
    events, times, decisions = stay_events(stay, max(w.end for w in targets))
    static = stay_static(stay)
    for window in targets:
        lo = bisect.bisect_left(times, window.start)
        hi = bisect.bisect_left(times, window.end)
        actions, companions = decisions.of_window(window.start, window.end)
        answer = set(actions) | set(companions)
        kept = [i for i in range(lo, hi) if events[i]["event_id"] not in answer]
        window_events = tuple(events[:lo]) + tuple(events[i] for i in kept)
        window_times = tuple(times[:lo]) + tuple(times[i] for i in kept)
        past = tuple(
            PastWindow(window_id=w.pk, index=w.index, start=w.start, end=w.end)
            for w in all_windows
            if w.end <= window.start
        )
        yield WindowContext(
            stay_id=stay.pk,
            window_id=window.pk,
            window_index=window.index,
            start=window.start,
            end=window.end,
            hours_since_admission=round(window.hours_since_admit, 4),
            events=window_events,
            static=static,
            past_windows=past,
            event_times=window_times,
        )
