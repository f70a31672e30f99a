"""Reads of imported clinical data for the pages: stays, their events, windows
and concept tracks, and import runs, each scoped to what the asking user may
see."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, JSONObject

from windows.concepts.columns import STATUSES
from windows.models import (
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    ImportRun,
    Outcome,
    Stay,
    StayTracks,
    Window,
)
from windows.selectors_context import HINDSIGHT_KINDS, OUTCOME_REVEALING_CATEGORIES

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
    name order (unmapped items, with an empty category, are left out; coded
    records are not on the timeline); one query."""
    pairs = (
        Event.objects.filter(admission_id=stay.admission_id)
        .exclude(kind=EventKind.CODED)
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
    ignored; ``category`` is matched exactly when given. Coded records are not
    events on the timeline (their date is a billing date): stay_records_apart
    lists them apart."""
    qs = Event.objects.filter(admission_id=stay.admission_id).exclude(
        kind=EventKind.CODED
    )
    if kind in EventKind.values:
        qs = qs.filter(kind=kind)
    if domain in Domain.values:
        qs = qs.filter(domain=domain)
    if category:
        qs = qs.filter(category=category)
    return qs.order_by("time", "id")


@dataclass(frozen=True)
class RecordsApart:
    """What a trajectory page lists apart from its event table, read in one
    query: the admission's records coded after discharge (ICD procedure codes
    with a billing date: hindsight only, never at the billing date's place among
    the bedside events), its discharge summaries (MIMIC-IV-Note: written at
    discharge, hindsight only, never in a bedside context,
    windows.selectors_context), and the radiology reports from the stay's ICU
    admission to its discharge (the overview's notes lane), each by time."""

    coded: list[Event]
    discharge_summaries: list[Event]
    reports: list[Event]


def stay_records_apart(*, stay: Stay) -> RecordsApart:
    rows = Event.objects.filter(
        Q(kind=EventKind.CODED)
        | Q(domain=Domain.NOTES, category="discharge_summary")
        | Q(
            domain=Domain.NOTES,
            category="radiology_report",
            time__gte=stay.intime,
            time__lte=stay.outtime,
        ),
        admission_id=stay.admission_id,
    ).order_by("time", "category", "value_text", "id")
    coded, summaries, reports = [], [], []
    for event in rows:
        if event.kind == EventKind.CODED:
            coded.append(event)
        elif event.category == "discharge_summary":
            summaries.append(event)
        else:
            reports.append(event)
    return RecordsApart(coded, summaries, reports)


def import_run_list(*, user) -> QuerySet[ImportRun]:
    """Import runs, newest first; staff only."""
    if not (_may_read_clinical_data(user) and user.is_staff):
        return ImportRun.objects.none()
    return ImportRun.objects.select_related("started_by").order_by("-created_at", "-id")


def import_run_get(*, user, import_run_id: int) -> ImportRun | None:
    return import_run_list(user=user).filter(pk=import_run_id).first()


def build_run_latest(*, user, limit: int = 5) -> list[dict]:
    """The latest tracks and windows builds (windows.builds) with their progress,
    newest first; staff only, as import runs."""
    from windows.builds import build_run_progress
    from windows.models import BuildRun

    if not (_may_read_clinical_data(user) and user.is_staff):
        return []
    runs = BuildRun.objects.select_related("started_by").order_by("-created_at", "-id")
    return [
        {"run": run, "progress": build_run_progress(run=run)} for run in runs[:limit]
    ]


# Window page and trajectory plots -------------------------------------------

# How far before a window the window page's event table reaches.
WINDOW_LOOKBACK = timedelta(hours=6)

# Event table groups, in the order a physician reads them; unknown domains last.
EVENT_DOMAIN_ORDER: tuple[str, ...] = (
    Domain.VITALS,
    Domain.LABS,
    Domain.MED_CONTINUOUS,
    Domain.MED_INTERMITTENT,
    Domain.RESPIRATORY,
    Domain.ASSESSMENTS,
    Domain.CRRT,
    Domain.INPUT,
    Domain.OUTPUT,
    Domain.PROCEDURES,
    Domain.MICROBIOLOGY,
    Domain.NOTES,
    Domain.CODE_STATUS,
    Domain.POSITION,
    Domain.ADT,
    Domain.OTHER,
)
_DOMAIN_RANK = {domain: rank for rank, domain in enumerate(EVENT_DOMAIN_ORDER)}


class EventScope(models.TextChoices):
    """What the window page's event table covers."""

    WINDOW = "window", "Window and 6 h before"
    STAY = "stay", "Whole stay"


def window_get(*, user, stay_id: int, index: int) -> Window | None:
    """One window of a stay with its stay, admission and patient, or None if the
    user may not see the stay or there is no such window; one query.

    Annotated with ``dosing_weight_kg`` (the weight the concept tracks use for
    per-kg doses, from StayTracks.meta) and ``last_index`` (the stay's last
    window index, for next/previous).
    """
    return (
        Window.objects.filter(
            stay__in=_stays_visible_to(user=user), stay_id=stay_id, index=index
        )
        .select_related("stay__admission__patient")
        .annotate(
            dosing_weight_kg=Cast(
                KeyTextTransform("weight_kg", "stay__tracks__meta"), FloatField()
            ),
            last_index=Subquery(
                Window.objects.filter(stay_id=OuterRef("stay_id"))
                .order_by("-index")
                .values("index")[:1]
            ),
        )
        .first()
    )


@dataclass(frozen=True)
class BedsideFacts:
    """What the window page's header says as of the window's end."""

    code_status: dict | None  # {"category": "DNR", "name": "..."} or None
    weight_kg: float | None  # the latest charted weight


def window_bedside_facts(*, window: Window) -> BedsideFacts:
    """The latest code status and charted weight before the window's end (the
    bedside boundary: the end is exclusive, as in windows.selectors_context);
    one query.

    The window's admission and end are given as values rather than correlated
    from the window's row: PostgreSQL then sees how many events lie before the
    end and reads the (admission, time) index backwards to the latest match
    (about 1 ms on a 45,000-event stay, against 7 ms per look-up otherwise)."""

    def latest(events: QuerySet[Event], value) -> Subquery:
        return Subquery(
            events.filter(admission_id=window.stay.admission_id, time__lt=window.end)
            .order_by("-time", "-id")
            .values(value=value)[:1]
        )

    facts = (
        Stay.objects.filter(pk=window.stay_id)
        .annotate(
            code_status=latest(
                Event.objects.filter(domain=Domain.CODE_STATUS),
                JSONObject(category="category", name="name"),
            ),
            weight_kg=latest(
                Event.objects.filter(
                    domain=Domain.VITALS, category="weight_kg", value_num__isnull=False
                ),
                F("value_num"),
            ),
        )
        .values("code_status", "weight_kg")
        .first()
    ) or {"code_status": None, "weight_kg": None}
    return BedsideFacts(facts["code_status"], facts["weight_kg"])


def stay_windows(*, stay: Stay, gold_only: bool = False) -> QuerySet[Window]:
    """The stay's windows (or only its Gold ones) in index order."""
    qs = Window.objects.filter(stay_id=stay.pk)
    if gold_only:
        qs = qs.filter(sampled_gold=True)
    return qs.order_by("index")


def _window_event_bounds(*, window: Window, scope: str) -> tuple:
    stay = window.stay
    start = window.start - WINDOW_LOOKBACK
    if scope == EventScope.STAY:
        return min(start, stay.intime), stay.outtime
    return start, window.end


def _window_events_base(*, window: Window, scope: str) -> QuerySet[Event]:
    start, end = _window_event_bounds(window=window, scope=scope)
    # Coded records are listed apart (stay_records_apart): their billing
    # date is not a time at the bedside.
    qs = (
        Event.objects.filter(admission_id=window.stay.admission_id, time__gte=start)
        .exclude(kind__in=HINDSIGHT_KINDS)
        .exclude(category__in=OUTCOME_REVEALING_CATEGORIES)
    )
    # A window is [start, end); the whole stay keeps what is charted at discharge.
    return (
        qs.filter(time__lte=end)
        if scope == EventScope.STAY
        else qs.filter(time__lt=end)
    )


def window_events(
    *, window: Window, scope: str = EventScope.WINDOW, domain: str | None = None
) -> QuerySet[Event]:
    """Events around a window for its page, in time order: with the ``window``
    scope those from 6 h before its start to its end (exclusive), with ``stay``
    those of the whole ICU stay (from its admission, or 6 h before the window if
    earlier, to its discharge). Outcome events, outcome-revealing categories
    and coded records are left out, as in the bedside context (the page lists
    coded records apart). ``domain`` keeps one domain;
    unknown ones are ignored.

    Time order follows the (admission, time) index, so a page of a long stay
    reads only its own rows; the page groups them by domain
    (event_domain_rank)."""
    qs = _window_events_base(window=window, scope=scope)
    if domain in Domain.values:
        qs = qs.filter(domain=domain)
    return qs.order_by("time", "id")


def event_domain_rank(domain: str) -> int:
    """Where a domain's group goes in the event table (EVENT_DOMAIN_ORDER)."""
    return _DOMAIN_RANK.get(domain, len(_DOMAIN_RANK))


def window_event_domain_counts(
    *, window: Window, scope: str = EventScope.WINDOW
) -> dict[str, int]:
    """How many of the window's events (as window_events, all domains) each
    domain holds, in EVENT_DOMAIN_ORDER; one query."""
    counts = dict(
        _window_events_base(window=window, scope=scope)
        .order_by()
        .values_list("domain")
        .annotate(n=Count("id"))
    )
    return {
        d: counts[d] for d in sorted(counts, key=lambda d: (event_domain_rank(d), d))
    }


# The concept tracks the trajectory plots draw, and the decimals each keeps.
TRACK_SERIES: dict[str, int] = {
    "hr": 0,
    "sbp": 0,
    "map": 0,
    "dbp": 0,
    "rr": 1,
    "spo2": 1,
    "temp": 1,
    "gcs": 0,
    "rass": 0,
    "lactate": 2,
    "ph": 2,
    "creatinine": 2,
    "platelets": 0,
    "bilirubin": 2,
    "inr": 2,
    "fio2": 2,
    "pf_ratio": 0,
    "sofa": 0,
    "aki_stage": 0,
    "ned": 3,
    "urine_ml_kg_h": 2,
    "crrt_active": 0,
    "ventilation": 0,  # sent as its index in VENTILATION_LEVELS
}
VENTILATION_LEVELS: tuple[str, ...] = STATUSES


@dataclass(frozen=True)
class TracksVersion:
    """Which computation of a stay's tracks is stored: it changes whenever the
    tracks do, so a response built from them can be cached by it."""

    events_signature: str
    computed_at: datetime


def stay_tracks_version(*, stay: Stay) -> TracksVersion:
    """The version of the stay's concept tracks, computing and storing them first
    when missing or computed from other events (as windows.tracks.stay_tracks_get,
    without reading the hourly columns: a client's cached copy may still do)."""
    # windows.tracks computes with pandas: imported here, by the pages that
    # read tracks, so that the others' web process never loads it.
    from windows.tracks import events_signature, stay_tracks_build

    signature = events_signature(stay=stay)
    stored = (
        StayTracks.objects.filter(stay_id=stay.pk)
        .values_list("events_signature", "computed_at")
        .first()
    )
    if stored is None or stored[0] != signature:
        tracks = stay_tracks_build(stay=stay, signature=signature)
        return TracksVersion(tracks.events_signature, tracks.computed_at)
    return TracksVersion(*stored)


def _round_series(values: list | None, decimals: int) -> list:
    """Values rounded to ``decimals`` (integers when 0, no negative zero)."""
    if not values:
        return []
    if decimals == 0:
        return [None if v is None else round(v) for v in values]
    return [None if v is None else round(v, decimals) + 0.0 for v in values]


def _ventilation_series(values: list | None) -> list:
    level = {name: i for i, name in enumerate(VENTILATION_LEVELS)}
    return [level.get(v) for v in values or []]


def stay_tracks_series(*, stay: Stay) -> tuple[list, dict[str, list], dict]:
    """The stored tracks the plots draw: hour ends, the TRACK_SERIES columns
    rounded (ventilation as its level index, None where unknown) and the meta.
    Call stay_tracks_version first: this reads what is stored.

    The whole ``columns`` value is read once: picking keys in SQL would unpack
    the stored JSON once per key (measured slower for 23 keys)."""
    row = (
        StayTracks.objects.filter(stay_id=stay.pk)
        .values("hours", "meta", "columns")
        .first()
    )
    if row is None:
        return [], {}, {}
    columns = row["columns"] or {}
    series = {}
    for name, decimals in TRACK_SERIES.items():
        values = columns.get(name)
        if name == "ventilation":
            series[name] = _ventilation_series(values)
        else:
            series[name] = _round_series(values, decimals)
    return row["hours"], series, row["meta"] or {}


def stay_window_marks(*, stay: Stay) -> list[dict]:
    """The stay's windows for the plots, in index order: ``index``, ``start_h``
    and ``end_h`` (hours since ICU admission, 2 decimals), ``gold`` and
    ``density`` (action density, 3 decimals). Only the window's length is read,
    not its two datetimes (8 ms against 12 ms on a 900-window stay)."""
    length = ExpressionWrapper(F("end") - F("start"), output_field=DurationField())
    rows = (
        Window.objects.filter(stay_id=stay.pk)
        .order_by("index")
        .values_list("index", "hours_since_admit", "sampled_gold", "action_density")
        .annotate(length=length)
    )
    return [
        {
            "index": index,
            "start_h": round(start_h, 2),
            "end_h": round(start_h + length.total_seconds() / 3600, 2),
            "gold": gold,
            "density": round(density, 3),
        }
        for index, start_h, gold, density, length in rows
    ]
