"""Reads of an Oracle run's labels for the admin's browsing page: the run's
labelled windows a page at a time, and one label with every cited event named
(concept, hours since admission, value). Admin only, as every Oracle read:
physicians never see the Oracle's labels."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet
from django.http import Http404

from accounts.roles import require_admin
from annotation.models import ActionRating, PatientStatus
from oracle.models import OracleLabel, OracleLabelState, OracleRun
from windows.models import Event
from windows.presentation import event_rows
from windows.selectors import window_get

LABELS_PER_PAGE = 50
# Browsing filters: every label, the labelled windows, or the failures.
LABEL_FILTERS = {
    "": "All windows",
    OracleLabelState.OK: "Labelled",
    OracleLabelState.FAILED: "Failed",
}


def _require_admin(user) -> None:
    require_admin(user, "see an Oracle run's labels")


def _labels_of(run: OracleRun, state: str = "") -> QuerySet[OracleLabel]:
    labels = OracleLabel.objects.filter(run=run)
    if state:
        labels = labels.filter(state=state)
    return labels.order_by("window__stay_id", "window__index", "pk")


def _positive_id(value) -> int | None:
    text = str(value)
    # An id from a URL or query string: anything but a plausible id is none.
    return int(text) if text.isdigit() and len(text) <= 18 else None


def run_labels_page(*, admin, run: OracleRun, state: str = "", page=1) -> Page:
    """A page of the run's labels in stay and window order, each with its
    window and stay; ``state`` one of LABEL_FILTERS (anything else: all)."""
    _require_admin(admin)
    state = state if state in LABEL_FILTERS else ""
    labels = (
        _labels_of(run, state)
        .select_related("window", "window__stay")
        .only(
            "pk",
            "state",
            "status",
            "payload",
            "error",
            "created_at",
            "window__id",
            "window__index",
            "window__hours_since_admit",
            "window__stay__id",
        )
    )
    return Paginator(labels, LABELS_PER_PAGE).get_page(_positive_id(page) or 1)


def run_label_get(*, admin, run: OracleRun, label_id) -> OracleLabel:
    _require_admin(admin)
    pk = _positive_id(label_id)
    label = (
        OracleLabel.objects.select_related("window").filter(run=run, pk=pk).first()
        if pk is not None
        else None
    )
    window = (
        # The window as the window page reads it (stay, patient, dosing
        # weight, last index), scoped to what this admin may see.
        window_get(user=admin, stay_id=label.window.stay_id, index=label.window.index)
        if label is not None
        else None
    )
    if window is None:
        raise Http404("No such label in this run.")
    label.window = window
    return label


def run_label_neighbours(
    *, admin, run: OracleRun, label: OracleLabel, state: str = ""
) -> dict:
    """The previous and next label of the run (in the list's order, within the
    same filter), their ids or None, and this label's place in that order.
    Four small queries, whatever the run's size (a cohort run labels every
    window of its stays)."""
    _require_admin(admin)
    state = state if state in LABEL_FILTERS else ""
    labels = _labels_of(run, state)
    stay_id, index = label.window.stay_id, label.window.index
    before = (
        Q(window__stay_id__lt=stay_id)
        | Q(window__stay_id=stay_id, window__index__lt=index)
        | Q(window__stay_id=stay_id, window__index=index, pk__lt=label.pk)
    )
    after = (
        Q(window__stay_id__gt=stay_id)
        | Q(window__stay_id=stay_id, window__index__gt=index)
        | Q(window__stay_id=stay_id, window__index=index, pk__gt=label.pk)
    )
    previous = (
        labels.filter(before)
        .order_by("-window__stay_id", "-window__index", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    following = labels.filter(after).values_list("pk", flat=True).first()
    inside = not state or label.state == state
    return {
        "previous": previous,
        "next": following,
        "position": labels.filter(before).count() + 1 if inside else None,
        "count": labels.count(),
    }


@dataclass(frozen=True)
class CitedEvent:
    """An event a label cites, named as the window page names it; ``found``
    False when the id is not an event of the window's admission (a reply may
    cite anything)."""

    id: int
    found: bool
    name: str = ""
    hours: float | None = None
    value: str = ""
    kind: str = ""


@dataclass(frozen=True)
class LabelItem:
    text: str
    evidence: list[CitedEvent]
    rating: str = ""
    rating_label: str = ""
    action: CitedEvent | None = None


def _cited_ids(payload: dict) -> set[int]:
    ids = set(_ints(payload.get("status_evidence")))
    for key in ("acute_problems", "added_actions", "red_flags", "action_ratings"):
        for item in payload.get(key) or []:
            if isinstance(item, dict):
                ids.update(_ints(item.get("evidence")))
                ids.update(_ints([item.get("event_id")]))
    return ids


def _ints(values) -> list[int]:
    return [v for v in values or [] if isinstance(v, int) and not isinstance(v, bool)]


def oracle_label_shown(*, admin, label: OracleLabel) -> dict:
    """The label as the page shows it: status, its evidence, the acute
    problems, the ratings of the recorded actions, the added actions and the
    red flags, every cited event named from one query scoped to the window's
    admission. A failed label has no items, only its error."""
    _require_admin(admin)
    payload = label.payload if isinstance(label.payload, dict) else {}
    stay = label.window.stay
    events = Event.objects.filter(
        admission_id=stay.admission_id, pk__in=_cited_ids(payload)
    ).order_by("time", "pk")
    named = {
        row.event.pk: CitedEvent(
            id=row.event.pk,
            found=True,
            name=row.label.concept,
            hours=row.hours_since_admit,
            value=row.value,
            kind=row.event.kind,
        )
        for row in event_rows(stay, events)
    }

    def cite(event_id) -> CitedEvent:
        return named.get(event_id) or CitedEvent(id=event_id, found=False)

    def cites(values) -> list[CitedEvent]:
        return [cite(v) for v in _ints(values)]

    def texts(key) -> list[LabelItem]:
        return [
            LabelItem(
                text=str(item.get("text", "")), evidence=cites(item.get("evidence"))
            )
            for item in payload.get(key) or []
            if isinstance(item, dict)
        ]

    ratings = dict(ActionRating.choices)
    action_ratings = [
        LabelItem(
            text="",
            evidence=cites(item.get("evidence")),
            rating=str(item.get("rating", "")),
            rating_label=ratings.get(item.get("rating"), str(item.get("rating", ""))),
            action=cite(item.get("event_id")),
        )
        for item in payload.get("action_ratings") or []
        if isinstance(item, dict)
    ]
    return {
        "ok": label.state == OracleLabelState.OK,
        "status": label.status,
        "status_label": dict(PatientStatus.choices).get(label.status, label.status),
        "status_evidence": cites(payload.get("status_evidence")),
        "acute_problems": texts("acute_problems"),
        "action_ratings": action_ratings,
        "added_actions": texts("added_actions"),
        "red_flags": texts("red_flags"),
    }


def label_counts(label: OracleLabel) -> dict:
    """How many items of each list a label holds, for the list page."""
    payload = label.payload if isinstance(label.payload, dict) else {}
    return {
        key: len(payload.get(key) or [])
        for key in ("acute_problems", "action_ratings", "added_actions", "red_flags")
    }
