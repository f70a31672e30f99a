"""Stored concept tracks of a stay: computed with windows.concepts from the events
of the stay's admission, kept in StayTracks, recomputed when the events change;
and the event behind each plotted value, so a point on a plot can be cited.
numpy, pandas and the computing concept modules are imported by the functions
that compute: the web's pages import this module (windows.views) without them
(issue 35)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import BigIntegerField, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from jobs.progress import Progress
from windows.concepts import CONCEPT_COLUMNS, CONCEPTS_VERSION, compute_stay_tracks
from windows.models import Admission, Domain, Event, Stay, StayTracks

if TYPE_CHECKING:
    import pandas as pd


def signature_of(*, events_version: int) -> str:
    """The concepts' version, then the admission's ``events_version`` (bumped by
    every write of its events, windows.services.admission_events_touch): this
    changes exactly when the trajectory or the definitions do, and is read with
    one row lookup instead of counting the admission's events."""
    return f"v{CONCEPTS_VERSION}:e{events_version}"


def events_signature(*, stay: Stay) -> str:
    version = (
        Admission.objects.filter(pk=stay.admission_id)
        .values_list("events_version", flat=True)
        .first()
    )
    return signature_of(events_version=version or 0)


def events_signatures(*, stays) -> dict[int, str]:
    """events_signature of many stays in one query: stay id -> signature."""
    versions = dict(
        Admission.objects.filter(pk__in={s.admission_id for s in stays}).values_list(
            "pk", "events_version"
        )
    )
    return {
        s.pk: signature_of(events_version=versions.get(s.admission_id) or 0)
        for s in stays
    }


_TIME_COLUMNS = ("time", "end_time")


def _epoch_us_sql(column: str) -> RawSQL:
    # Exact on PostgreSQL: EXTRACT(EPOCH) is numeric there.
    return RawSQL(
        f"(EXTRACT(EPOCH FROM {Event._meta.db_table}.{column}) * 1000000)::bigint",
        [],
        output_field=BigIntegerField(),
    )


def _fetch(queryset) -> list[tuple]:
    """The rows of a values_list queryset, its SQL run on a plain cursor:
    values_list would call a converter for every value of an annotation."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def events_frame(queryset) -> pd.DataFrame:
    """The events of ``queryset`` in compute_stay_tracks' input shape
    (EVENT_COLUMNS; times as UTC datetime64).

    On PostgreSQL the times are read as integer microseconds since the epoch
    instead of as datetimes: Django's time-zone-aware timestamp loader is pure
    Python, and was two thirds of a stay's read (5,000 events: 25 of 38 ms)."""
    from windows.concepts.grid import EVENT_COLUMNS

    return event_rows(queryset, EVENT_COLUMNS)


def event_rows(queryset, columns) -> pd.DataFrame:
    """``columns`` of ``queryset``'s events as a frame, ``time`` and ``end_time``
    (when named) as UTC datetime64 read as events_frame reads them."""
    import pandas as pd

    columns = list(columns)
    times = [c for c in columns if c in _TIME_COLUMNS]
    if not times:
        return pd.DataFrame.from_records(
            list(queryset.values_list(*columns)), columns=columns
        )
    if connection.vendor != "postgresql":
        # SQLite stores naive UTC text: read as text and parsed by pandas at
        # once (Django's datetime converter, one Python call per value, was a
        # tenth of a MIMIC-IV import's actions step).
        names = [f"{c}_text" if c in times else c for c in columns]
        rows = queryset.annotate(
            **{f"{c}_text": Cast(c, TextField()) for c in times}
        ).values_list(*names)
        frame = pd.DataFrame.from_records(list(rows), columns=columns)
        for column in times:
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
        return frame
    names = [f"{c}_us" if c in times else c for c in columns]
    rows = _fetch(
        queryset.annotate(**{f"{c}_us": _epoch_us_sql(c) for c in times}).values_list(
            *names
        )
    )
    frame = pd.DataFrame.from_records(rows, columns=columns)
    for column in times:
        micros = pd.array(frame[column].to_numpy(dtype=object), dtype="Int64")
        # In nanoseconds, as pandas reads datetimes: readers see one dtype.
        frame[column] = pd.to_datetime(micros, unit="us", utc=True).astype(
            "datetime64[ns, UTC]"
        )
    return frame


def event_times_us(queryset, *columns: str) -> tuple:
    """The times of ``queryset``'s events as int64 microseconds since the epoch
    (an array), then each of ``columns`` as a list aligned with them; read as
    events_frame reads times."""
    import numpy as np

    if connection.vendor == "postgresql":
        rows = _fetch(
            queryset.annotate(time_us=_epoch_us_sql("time")).values_list(
                "time_us", *columns
            )
        )
    else:
        rows = [
            (epoch_us(t), *rest) for t, *rest in queryset.values_list("time", *columns)
        ]
    times = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return (times, *([r[i] for r in rows] for i in range(1, len(columns) + 1)))


def _events_frame(stay: Stay) -> pd.DataFrame:
    return events_frame(Event.objects.filter(admission_id=stay.admission_id))


def _clean(values) -> list:
    import numpy as np

    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        # The same values as below, a few times faster for a float track.
        return [None if v != v else round(v, 4) for v in values.tolist()]
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, float):
            out.append(round(v, 4))
        else:
            out.append(v)
    return out


def stay_tracks_build(*, stay: Stay, signature: str | None = None) -> StayTracks:
    """Compute and store the stay's tracks (idempotent: replaces the stored row)."""
    import pandas as pd

    signature = signature or events_signature(stay=stay)
    frame = compute_stay_tracks(
        _events_frame(stay),
        intime=pd.Timestamp(stay.intime),
        outtime=pd.Timestamp(stay.outtime),
    )
    columns = {
        name: _clean(frame[name].to_numpy())
        for name in CONCEPT_COLUMNS
        if name in frame
    }
    sepsis = frame.attrs.get("sepsis3")
    meta = {
        "weight_kg": frame.attrs.get("weight_kg"),
        "sepsis3": {
            k: (v.isoformat() if hasattr(v, "isoformat") else v)
            for k, v in sepsis.items()
        }
        if isinstance(sepsis, dict)
        else None,
    }
    tracks = StayTracks(
        stay=stay,
        events_signature=signature,
        hours=_clean(frame["hour"].tolist()),
        columns=columns,
        meta=meta,
    )
    # One upsert on the stay (update_or_create read the old row's JSON first).
    StayTracks.objects.bulk_create(
        [tracks],
        update_conflicts=True,
        unique_fields=["stay"],
        update_fields=["events_signature", "computed_at", "hours", "columns", "meta"],
    )
    if tracks.pk is None:  # a database that returns no ids from an upsert
        tracks = StayTracks.objects.get(stay=stay)
    return tracks


def stay_tracks_get(*, stay: Stay) -> StayTracks:
    """The stored tracks, recomputed first if the stay's events changed since."""
    signature = events_signature(stay=stay)
    tracks = StayTracks.objects.filter(stay=stay).first()
    if tracks is not None and tracks.events_signature == signature:
        return tracks
    return stay_tracks_build(stay=stay, signature=signature)


def tracks_build_all(
    *, stays=None, progress: Progress | None = None, force: bool = False
) -> int:
    """Build the tracks of many stays (all by default); returns how many were
    computed. Stays whose stored tracks are current are skipped unless forced."""
    progress = progress or Progress()
    stays = list(stays if stays is not None else Stay.objects.order_by("pk"))
    progress.start(len(stays), "concept tracks")
    built = 0
    current = dict(
        StayTracks.objects.filter(stay__in=stays).values_list(
            "stay_id", "events_signature"
        )
    )
    signatures = events_signatures(stays=stays)
    for stay in stays:
        signature = signatures[stay.pk]
        if force or current.get(stay.pk) != signature:
            stay_tracks_build(stay=stay, signature=signature)
            built += 1
        progress.advance(1, f"stay {stay.pk}")
    return built


_HOUR_US = 3_600_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact, unlike floats)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


@cache
def track_sources() -> dict[str, tuple[str, tuple[str, ...] | None, float | None]]:
    """The events a plotted track's value at hour H is read from, as (domain,
    categories or None for the whole domain, hours back from H that the value
    reaches): the rules of windows.concepts.columns. Vitals are the hour's
    chartings (H - 1 h, H]; labs their carry-forward window; vasoactive rates
    hold until changed. Composite scores (SOFA, AKI stage) have no single event
    behind a value, so they have no entry. Built on first use: its constants
    live in the computing modules, which import pandas."""
    from windows.concepts.labs import LABS
    from windows.concepts.renal import URINE_CATEGORIES
    from windows.concepts.respiratory import EPISODE_GAP
    from windows.concepts.vasoactive import DRUGS
    from windows.concepts.vitals import VITALS

    return {
        **{
            track: (Domain.VITALS, (category,), 1.0)
            for category, (track, *_) in VITALS.items()
        },
        "gcs": (
            Domain.ASSESSMENTS,
            ("gcs_total", "gcs_eye", "gcs_verbal", "gcs_motor"),
            1.0,
        ),
        "rass": (Domain.ASSESSMENTS, ("rass",), 1.0),
        **{
            track: (Domain.LABS, (category,), float(hours))
            for track, (category, _valid, hours) in LABS.items()
        },
        "fio2": (Domain.RESPIRATORY, ("fio2_set",), 4.0),
        "pf_ratio": (Domain.LABS, ("po2_arterial",), 12.0),
        "ventilation": (Domain.RESPIRATORY, None, EPISODE_GAP / (_HOUR_US * 1000)),
        "ned": (Domain.MED_CONTINUOUS, tuple(DRUGS), None),
        "urine_ml_kg_h": (Domain.OUTPUT, tuple(sorted(URINE_CATEGORIES)), 6.0),
        "crrt_active": (Domain.CRRT, None, None),
    }


# Events that are never a track's source although their category matches: a
# pO2 the CLIF importer marks venous gives no P/F (windows.concepts.respiratory).
NOT_SOURCES: dict[str, set[str]] = {"pf_ratio": {"venous"}}


def stay_track_sources(
    *, stay: Stay, hours: list, series: dict[str, list]
) -> dict[str, list]:
    """For each track of ``series`` that track_sources() names, the id of the
    event behind its value at each hour of ``hours`` (aligned with it), None
    where the value is unknown or no such event lies within reach: the latest
    matching event at or before the hour's end, no older than the track's reach.

    One query for the events of all the tracks' domains in the stay's admission
    up to ICU discharge: the tracks take nothing later (the last hour ends at
    discharge, windows.concepts.grid)."""
    import numpy as np

    sources_of = track_sources()
    keys = [k for k in series if k in sources_of]
    if not hours or not keys:
        return {}
    domains = {sources_of[k][0] for k in keys}
    times, ids, domains_, categories_, texts_ = event_times_us(
        Event.objects.filter(
            admission_id=stay.admission_id,
            domain__in=domains,
            time__lte=stay.outtime,
        ).order_by("time", "id"),
        "id",
        "domain",
        "category",
        "value_text",
    )
    if not len(times):
        return {k: [None] * len(hours) for k in keys}
    ids = np.asarray(ids, dtype=np.int64)
    domain_of = np.array([str(d) for d in domains_], dtype=object)
    category_of = np.array(categories_, dtype=object)
    text_of = np.array(texts_, dtype=object)
    ends = epoch_us(stay.intime) + np.round(
        np.asarray(hours, dtype=float) * _HOUR_US
    ).astype(np.int64)
    out = {}
    for key in keys:
        domain, categories, reach = sources_of[key]
        mask = domain_of == str(domain)
        if categories is not None:
            mask &= np.isin(category_of, categories)
        if key in NOT_SOURCES:
            mask &= ~np.isin(text_of, list(NOT_SOURCES[key]))
        key_times, key_ids = times[mask], ids[mask]
        values = series[key]
        sources: list = [None] * len(hours)
        if len(key_times):
            # The latest matching event at or before each hour end.
            at = np.searchsorted(key_times, ends, side="right") - 1
            for i, j in enumerate(at):
                if j < 0 or i >= len(values) or values[i] is None:
                    continue
                if reach is not None and key_times[j] <= ends[i] - reach * _HOUR_US:
                    continue
                sources[i] = int(key_ids[j])
        out[key] = sources
    return out
