"""What a label may cite as evidence (REALICU_SPEC sections 1 and 3): the
records of the window's stay that a bedside reader could see. A *hindsight
record* is never evidence, and a release never carries one; this module says
which events are, for the label checks (annotation.services) and the release
(exports.building) alike."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from windows.models import Domain, Event, EventKind, Window
from windows.selectors_context import (
    BEDSIDE_NOTE_CATEGORIES,
    HINDSIGHT_KINDS,
    OUTCOME_REVEALING_CATEGORIES,
)

# Why an id that is no event of the window's stay is refused.
NOT_OF_STAY = "is not of this stay"


def hindsight_record_q() -> Q:
    """The condition on ``Event`` of a hindsight record: what only hindsight
    shows, never a bedside reader (REALICU_SPEC section 1, "Outcome-revealing
    events (ICU discharge, hospital discharge, death, discharge summary,
    discharge disposition) are never visible to a model under test"), so never
    a label's evidence (section 3: evidence is the raw events a prediction
    rests on) nor in a release (section 8).

    - Records coded after discharge (``EventKind.CODED``: ICD procedure codes,
      HCPCS and DRG, billed with a date only; the admission's ICD diagnoses are
      no events at all).
    - Outcomes (``EventKind.OUTCOME``): ICU and hospital discharge with the
      disposition, death, and the discharge summaries, which the notes imports
      (windows.importers.mimic.notes, CLIF ``clinical_notes``) make outcomes.
    - Any event of an outcome-revealing category, whatever kind it was given.
    - Clinical notes of any category but the bedside ones (radiology reports):
      whether such a note was readable at its time is not known.

    The same kinds, categories and notes that the bedside cut leaves out
    (windows.selectors_context.bedside_filter), without its time bound.
    """
    return (
        Q(kind__in=HINDSIGHT_KINDS)
        | Q(category__in=OUTCOME_REVEALING_CATEGORIES)
        | (Q(domain=Domain.NOTES) & ~Q(category__in=BEDSIDE_NOTE_CATEGORIES))
    )


def hindsight_records(*, admission_id) -> QuerySet[Event]:
    """The admission's hindsight records (``hindsight_record_q``)."""
    return Event.objects.filter(hindsight_record_q(), admission_id=admission_id)


def hindsight_record_kind(event: Event) -> str:
    """What a hindsight record is, as a message names it."""
    if event.kind == EventKind.CODED:
        return f"a record coded after discharge ({event.name})"
    if event.category == "discharge_summary":
        return "a discharge summary"
    if event.domain == Domain.NOTES:
        return "a clinical note that is not known to be readable at the bedside"
    return f"an outcome ({event.name or event.category})"


def stay_span(window: Window) -> tuple:
    """The times of the window's stay that a label may cite, as the labelling
    page offers them (windows.selectors.window_events): from the earlier of the
    stay's ICU admission and the window's look-back to its ICU discharge."""
    stay = window.stay
    # windows.selectors imports the concept tracks (pandas): read here, so a
    # release build (which imports this module) starts without pandas.
    from windows.selectors import WINDOW_LOOKBACK

    return min(stay.intime, window.start - WINDOW_LOOKBACK), stay.outtime


def evidence_refused(*, window: Window, ids: Iterable[int]) -> dict[int, str]:
    """The event ids among ``ids`` that a label of the window may not cite,
    each with why, as the end of a sentence ("is a discharge summary", "is not
    of this stay"); one query. Refused: an id that is no event of the window's
    admission, an event outside the stay (``stay_span``), a hindsight record
    (``hindsight_record_q``)."""
    ids = set(ids)
    if not ids:
        return {}
    start, end = stay_span(window)
    events = (
        Event.objects.filter(admission_id=window.stay.admission_id, pk__in=ids)
        .annotate(
            hindsight=ExpressionWrapper(
                hindsight_record_q(), output_field=BooleanField()
            )
        )
        .only("pk", "time", "kind", "domain", "category", "name")
    )
    refused = {pk: NOT_OF_STAY for pk in ids}
    for event in events:
        if event.hindsight:
            refused[event.pk] = f"is {hindsight_record_kind(event)}"
        elif start <= event.time <= end:
            del refused[event.pk]
    return refused


def refused_named(ids: list[int], refused: dict[int, str]) -> str:
    """``ids`` with their reasons from ``evidence_refused``, the first five
    named: "event 12 is a discharge summary and event 13 is not of this
    stay"."""
    named = [f"event {pk} {refused[pk]}" for pk in ids[:5]]
    more = f" (and {len(ids) - 5} more)" if len(ids) > 5 else ""
    listed = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
    return listed + more


def hindsight_refusal(ids: list[int], refused: dict[int, str]) -> str:
    """The sentence that refuses the hindsight records among ``ids``."""
    return (
        f"Evidence must be what the bedside showed: {refused_named(ids, refused)}. "
        "Hindsight records (outcomes, discharge summaries, codes assigned after "
        "discharge) are never evidence."
    )


__all__ = [
    "NOT_OF_STAY",
    "evidence_refused",
    "hindsight_record_kind",
    "hindsight_refusal",
    "refused_named",
    "hindsight_record_q",
    "hindsight_records",
    "stay_span",
]
