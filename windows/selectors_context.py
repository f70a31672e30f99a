"""Bedside-context reads: what a model under test may see at a window (spec
section 1), and the window's own recorded actions."""

from __future__ import annotations

from django.db.models import Q, QuerySet, Subquery

from windows.models import Domain, Event, EventKind, Stay, Window

# Categories that reveal how the stay ends, whatever kind the importer gave them.
OUTCOME_REVEALING_CATEGORIES = frozenset(
    {
        "icu_discharge",
        "hospital_discharge",
        "death",
        "discharge_disposition",
        "discharge_summary",
    }
)

# Kinds never at the bedside: how the stay ends, and what is coded after discharge.
HINDSIGHT_KINDS = (EventKind.OUTCOME, EventKind.CODED)

# Clinical notes at the bedside (issue 21): radiology reports only, at the time
# they were stored (windows.importers.mimic.notes). A discharge summary is
# hindsight (kind outcome, an outcome-revealing category), and a note of any other
# category stays out too: whether it was readable at its time is not known.
BEDSIDE_NOTE_CATEGORIES = ("radiology_report",)


def bedside_filter(
    *, admission_id, start, end, exclude_window_actions: bool = False
) -> Q:
    """The bedside-context condition on ``Event``. The window's admission, start and
    end may be values or expressions (``OuterRef("end")``), so that one query can
    cover many windows (exports, checks over a whole cohort)."""
    condition = (
        Q(admission_id=admission_id, time__lt=end)
        & ~Q(kind__in=HINDSIGHT_KINDS)
        & ~Q(category__in=OUTCOME_REVEALING_CATEGORIES)
        & ~(Q(domain=Domain.NOTES) & ~Q(category__in=BEDSIDE_NOTE_CATEGORIES))
    )
    if exclude_window_actions:
        condition &= ~Q(kind=EventKind.ACTION, time__gte=start, time__lt=end)
    return condition


def _admission_of(window: Window) -> Subquery:
    # A subquery rather than window.stay.admission_id: no extra query when the
    # window's stay is not loaded.
    return Subquery(Stay.objects.filter(pk=window.stay_id).values("admission_id"))


def bedside_events(
    *, window: Window, exclude_window_actions: bool = False
) -> QuerySet[Event]:
    """Events of the stay's admission before the window's end, outcome-revealing
    events removed, ordered by time.

    The end is exclusive, as a window is ``[start, end)``: an event stamped at the
    end belongs to what follows. With ``exclude_window_actions`` the window's own
    recorded actions are removed too: they are the answer of the Recommended
    Actions task.
    """
    condition = bedside_filter(
        admission_id=_admission_of(window),
        start=window.start,
        end=window.end,
        exclude_window_actions=exclude_window_actions,
    )
    return Event.objects.filter(condition).order_by("time", "id")


def window_actions(*, window: Window) -> QuerySet[Event]:
    """The actions recorded in the window, ``start <= time < end``, by time."""
    return (
        Event.objects.filter(
            admission_id=_admission_of(window),
            kind=EventKind.ACTION,
            time__gte=window.start,
            time__lt=window.end,
        )
        .exclude(category__in=OUTCOME_REVEALING_CATEGORIES)
        .order_by("time", "id")
    )


__all__ = [
    "BEDSIDE_NOTE_CATEGORIES",
    "HINDSIGHT_KINDS",
    "OUTCOME_REVEALING_CATEGORIES",
    "bedside_events",
    "bedside_filter",
    "window_actions",
]
