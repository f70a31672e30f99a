"""Stored concept tracks of a stay: computed with windows.concepts from the events
of the stay's admission, kept in StayTracks, recomputed when the events change."""
from __future__ import annotations

import math

import pandas as pd
from django.db import transaction
from django.db.models import Count, Max

from windows.concepts import CONCEPT_COLUMNS, EVENT_COLUMNS, compute_stay_tracks
from windows.importers.base import Progress
from windows.models import Event, Stay, StayTracks


def events_signature(*, stay: Stay) -> str:
    """Count and highest id of the admission's events: events are only ever added
    (imports append), so this changes exactly when the trajectory does."""
    agg = Event.objects.filter(admission_id=stay.admission_id).aggregate(
        n=Count("id"), last=Max("id")
    )
    return f"{agg['n']}:{agg['last'] or 0}"


def _events_frame(stay: Stay) -> pd.DataFrame:
    rows = Event.objects.filter(admission_id=stay.admission_id).values_list(*EVENT_COLUMNS)
    return pd.DataFrame.from_records(list(rows), columns=list(EVENT_COLUMNS))


def _clean(values) -> list:
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
    signature = signature or events_signature(stay=stay)
    frame = compute_stay_tracks(_events_frame(stay), intime=pd.Timestamp(stay.intime),
                                outtime=pd.Timestamp(stay.outtime))
    columns = {name: _clean(frame[name].tolist()) for name in CONCEPT_COLUMNS if name in frame}
    sepsis = frame.attrs.get("sepsis3")
    meta = {
        "weight_kg": frame.attrs.get("weight_kg"),
        "sepsis3": {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                    for k, v in sepsis.items()} if isinstance(sepsis, dict) else None,
    }
    with transaction.atomic():
        tracks, _ = StayTracks.objects.update_or_create(
            stay=stay,
            defaults={"events_signature": signature, "hours": _clean(frame["hour"].tolist()),
                      "columns": columns, "meta": meta},
        )
    return tracks


def stay_tracks_get(*, stay: Stay) -> StayTracks:
    """The stored tracks, recomputed first if the stay's events changed since."""
    signature = events_signature(stay=stay)
    tracks = StayTracks.objects.filter(stay=stay).first()
    if tracks is not None and tracks.events_signature == signature:
        return tracks
    return stay_tracks_build(stay=stay, signature=signature)


def tracks_build_all(*, stays=None, progress: Progress | None = None, force: bool = False) -> int:
    """Build the tracks of many stays (all by default); returns how many were
    computed. Stays whose stored tracks are current are skipped unless forced."""
    progress = progress or Progress()
    stays = list(stays if stays is not None else Stay.objects.order_by("pk"))
    progress.start(len(stays), "concept tracks")
    built = 0
    current = dict(StayTracks.objects.filter(stay__in=stays)
                   .values_list("stay_id", "events_signature"))
    for stay in stays:
        signature = events_signature(stay=stay)
        if force or current.get(stay.pk) != signature:
            stay_tracks_build(stay=stay, signature=signature)
            built += 1
        progress.advance(1, f"stay {stay.pk}")
    return built
