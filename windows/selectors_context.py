"""The one bedside cut (spec section 1): what a model under test may see at a
window, and which rows of the window are its answer. Every context builder
calls it: releases (exports.building.context), agent and endpoint contexts
(agents.context, agents.base.WindowContext), surveillance contexts
(surveillance.selectors). The researchers' client (client/realicu_client/
context.py) keeps a standalone copy of the per-window part, tested against this
one on a built release.

The cut has two halves:

- ``bedside_filter``: the stay's admission's events strictly before the
  window's end, without hindsight records (outcomes, records coded after
  discharge, notes not readable at the bedside);
- ``WindowDecisions``: the window's own recorded decisions, left out of its
  context as the answer of the Recommended Actions task. A decision is a row
  set, not a row: the actions recorded in ``[start, end)`` and every other row
  of the same medication order at the same time (a drug's carrier or diluent,
  e.g. the NaCl 0.9 % line started with an insulin infusion, which shares its
  order id and time to the microsecond on the CLIF demo), so that no companion
  row gives the answer away.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

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
        # The window's own decisions (WindowDecisions): its actions, and the
        # rows of the same order at the same time as one of them.
        same_decision = Event.objects.filter(
            admission_id=OuterRef("admission_id"),
            order_id=OuterRef("order_id"),
            time=OuterRef("time"),
            kind=EventKind.ACTION,
        ).exclude(order_id="")
        condition &= ~(
            Q(time__gte=start, time__lt=end)
            & (Q(kind=EventKind.ACTION) | Exists(same_decision))
        )
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
    recorded decisions are removed too (``WindowDecisions``): they are the
    answer of the Recommended Actions task.
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


def decision_key(order_id: str | None, time: Hashable) -> tuple | None:
    """What ties the rows of one recorded decision together: the same order at
    the same time. None for a row without an order id: such a row is a
    decision of its own."""
    return (order_id, time) if order_id else None


class WindowDecisions:
    """A stay's rows that can belong to a window's own decisions (its actions,
    and rows with an order id), fed in time order; per window, the ids of its
    own recorded actions and of their companion rows.

    Times may be datetimes or any ordered value (microseconds since ICU
    admission in the release writer), as long as windows use the same."""

    def __init__(self) -> None:
        self._times: list = []
        self._rows: list[tuple[int, bool, tuple | None]] = []

    def add(self, *, time, event_id: int, is_action: bool, order_id: str | None):
        """One row; rows that are neither an action nor of an order are
        ignored (they cannot belong to a decision of another row)."""
        key = decision_key(order_id, time)
        if not is_action and key is None:
            return
        self._times.append(time)
        self._rows.append((event_id, is_action, key))

    def of_window(self, start, end) -> tuple[list[int], list[int]]:
        """``(action_ids, companion_ids)`` of the window ``[start, end)``: the
        actions recorded in it, in time order, and the other rows of their
        decisions (same order, same time)."""
        lo = bisect.bisect_left(self._times, start)
        hi = bisect.bisect_left(self._times, end)
        rows = self._rows[lo:hi]
        actions = [event_id for event_id, is_action, _ in rows if is_action]
        keys = {key for _, is_action, key in rows if is_action and key is not None}
        companions = [
            event_id
            for event_id, is_action, key in rows
            if not is_action and key is not None and key in keys
        ]
        return actions, companions


__all__ = [
    "BEDSIDE_NOTE_CATEGORIES",
    "WindowDecisions",
    "decision_key",
    "HINDSIGHT_KINDS",
    "OUTCOME_REVEALING_CATEGORIES",
    "bedside_events",
    "bedside_filter",
    "window_actions",
]
