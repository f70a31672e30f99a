"""Leak-free window contexts for agents (agents.base.WindowContext), built by
the runner and only by it: one query for a stay's bedside events
(windows.selectors_context.bedside_filter, up to the last window's end, outcome
and coded records removed), then per window the events strictly before its
end, the window's own recorded actions left out (they are the answer of the
Recommended Actions task, spec section 1). An agent, or an online endpoint,
never gets anything else.

The static facts are those known at ICU admission, as a release's contexts
hold them (age, sex, care unit, admission type, disease group); never the
stay's outcome, its discharge, or codes billed after it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from agents.base import PastWindow, WindowContext
from windows.models import Event, EventKind, Stay, Window
from windows.selectors_context import bedside_filter
from windows.vocabulary import event_label

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
)


def stay_static(stay: Stay) -> dict:
    admission = stay.admission
    patient = admission.patient
    return {
        "age": admission.age_at_admission or patient.age,
        "sex": patient.sex,
        "care_unit": stay.care_unit,
        "admission_type": admission.admission_type,
        "disease_group": stay.disease_group,
    }


def stay_events(stay: Stay, end) -> tuple[list[dict], list]:
    """The stay's bedside events before ``end`` as dicts, and their times."""
    condition = bedside_filter(
        admission_id=stay.admission_id, start=stay.intime, end=end
    )
    labels: dict[tuple, str] = {}
    events, times = [], []
    rows = (
        Event.objects.filter(condition)
        .order_by("time", "id")
        .values_list(*EVENT_FIELDS)
        .iterator(chunk_size=5000)
    )
    for event_id, time, kind, domain, category, name, num, unit, text in rows:
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
    return events, times


def stay_contexts(stay: Stay, window_ids: Iterable[int]) -> Iterator[WindowContext]:
    """The contexts of the stay's windows ``window_ids``, in time order. Each
    holds the events strictly before its window's end; its past windows are
    the stay's windows that end at or before its start."""
    wanted = set(window_ids)
    all_windows = list(
        Window.objects.filter(stay=stay)
        .order_by("start", "id")
        .only("id", "index", "start", "end", "hours_since_admit", "stay_id")
    )
    targets = [w for w in all_windows if w.pk in wanted]
    if not targets:
        return
    events, times = stay_events(stay, max(w.end for w in targets))
    static = stay_static(stay)
    for window in targets:
        lo = bisect.bisect_left(times, window.start)
        hi = bisect.bisect_left(times, window.end)
        # The window's own recorded actions are left out (spec section 1: they
        # are the answer of the Recommended Actions task); earlier actions stay.
        own = [i for i in range(lo, hi) if events[i]["kind"] != EventKind.ACTION.value]
        window_events = tuple(events[:lo]) + tuple(events[i] for i in own)
        window_times = tuple(times[:lo]) + tuple(times[i] for i in own)
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
