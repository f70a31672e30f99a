"""Reads of imported clinical data for the pages: stays, their events and import
runs, each scoped to what the asking user may see."""

from __future__ import annotations

from django.db.models import DurationField, ExpressionWrapper, F, QuerySet

from windows.models import (
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    ImportRun,
    Outcome,
    Stay,
)

# The sort keys a page may ask for, mapped to the orderings they mean. Anything
# else falls back to the default: a query parameter never reaches order_by.
STAY_SORTS: dict[str, tuple[str, ...]] = {
    "intime": ("intime", "id"),
    "-intime": ("-intime", "-id"),
    "length": ("length", "id"),
    "-length": ("-length", "-id"),
    "outcome": ("hospital_outcome", "intime", "id"),
    "-outcome": ("-hospital_outcome", "intime", "id"),
    "group": ("disease_group", "intime", "id"),
    "-group": ("-disease_group", "intime", "id"),
}
STAY_SORT_DEFAULT = "intime"


def _may_read_clinical_data(user) -> bool:
    # Every signed-in, active account may browse what was imported; finer scoping
    # (e.g. a physician seeing only assigned windows) belongs to the annotation app.
    return bool(user is not None and user.is_authenticated and user.is_active)


def _stays_visible_to(*, user) -> QuerySet[Stay]:
    if not _may_read_clinical_data(user):
        return Stay.objects.none()
    return Stay.objects.all()


def stay_sort_key(sort: str | None) -> str:
    """The whitelisted sort key for ``sort``, or the default one."""
    return sort if sort in STAY_SORTS else STAY_SORT_DEFAULT


def stay_list(
    *,
    user,
    sort: str | None = None,
    group: str | None = None,
    outcome: str | None = None,
) -> QuerySet[Stay]:
    """Stays with patient and admission, and their length (``length``, a duration).
    Unknown sort keys, groups and outcomes are ignored.

    No event count: counting each admission's events costs one index scan per row
    over up to hundreds of thousands of events (measured ~0.3 s a page with one
    500k-event admission); the stay page shows its count instead."""
    qs = _stays_visible_to(user=user).select_related("admission__patient")
    if group in DiseaseGroup.values:
        qs = qs.filter(disease_group=group)
    if outcome in Outcome.values:
        qs = qs.filter(hospital_outcome=outcome)
    qs = qs.annotate(
        length=ExpressionWrapper(
            F("outtime") - F("intime"), output_field=DurationField()
        )
    )
    return qs.order_by(*STAY_SORTS[stay_sort_key(sort)])


def stay_get(*, user, stay_id: int) -> Stay | None:
    """One stay with its admission and patient, or None if the user may not see it
    or it does not exist."""
    return (
        _stays_visible_to(user=user)
        .select_related("admission__patient")
        .filter(pk=stay_id)
        .first()
    )


def stay_admission_stays(*, stay: Stay) -> list[Stay]:
    """The other ICU stays of the stay's admission, in time order."""
    return list(
        Stay.objects.filter(admission_id=stay.admission_id)
        .exclude(pk=stay.pk)
        .order_by("intime", "id")
    )


def stay_event_categories(*, stay: Stay) -> dict[str, list[str]]:
    """The domains present in the stay's admission, each with its categories in
    name order (unmapped items, with an empty category, are left out); one query."""
    pairs = (
        Event.objects.filter(admission_id=stay.admission_id)
        .order_by("domain", "category")
        .values_list("domain", "category")
        .distinct()
    )
    by_domain: dict[str, list[str]] = {}
    for domain, category in pairs:
        categories = by_domain.setdefault(domain, [])
        if category:
            categories.append(category)
    return by_domain


def stay_events(
    *,
    stay: Stay,
    kind: str | None = None,
    domain: str | None = None,
    category: str | None = None,
) -> QuerySet[Event]:
    """The events of the stay's admission (its whole trajectory: before, during
    and after this ICU stay) in time order. Unknown kinds and domains are
    ignored; ``category`` is matched exactly when given."""
    qs = Event.objects.filter(admission_id=stay.admission_id)
    if kind in EventKind.values:
        qs = qs.filter(kind=kind)
    if domain in Domain.values:
        qs = qs.filter(domain=domain)
    if category:
        qs = qs.filter(category=category)
    return qs.order_by("time", "id")


def import_run_list(*, user) -> QuerySet[ImportRun]:
    """Import runs, newest first; staff only."""
    if not (_may_read_clinical_data(user) and user.is_staff):
        return ImportRun.objects.none()
    return ImportRun.objects.select_related("started_by").order_by("-created_at", "-id")


def import_run_get(*, user, import_run_id: int) -> ImportRun | None:
    return import_run_list(user=user).filter(pk=import_run_id).first()
