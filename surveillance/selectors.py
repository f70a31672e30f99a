"""Reads for the surveillance companion: a stay's bedside events as the concept
tracks take them, and its checkpoints computed from them (kept in the cache
until the trajectory or a definition changes). pandas is imported only where
the checkpoints are computed: the page reads them back without it."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from django.core.cache import cache

from surveillance import checkpoints
from surveillance.checkpoints import Checkpoint, checkpoint_hours, stay_checkpoints
from windows.models import Stay
from windows.selectors_context import bedside_filter
from windows.tracks import events_frame, events_signature

if TYPE_CHECKING:
    import pandas as pd


def surveillance_end(stay: Stay):
    """The last checkpoint's moment: no event at or after it is ever read."""
    hours = checkpoint_hours(stay.length_hours)
    return stay.intime + timedelta(hours=hours[-1] if hours else 0)


def stay_events_frame(*, stay: Stay, end) -> pd.DataFrame:
    """The stay's bedside events before ``end`` (windows.selectors_context: the
    admission's events, outcome-revealing and hindsight-coded ones removed), in
    the input shape of windows.concepts.compute_stay_tracks."""
    from windows.models import Event

    return events_frame(
        Event.objects.filter(
            bedside_filter(admission_id=stay.admission_id, start=stay.intime, end=end)
        ).order_by("time", "id")
    )


# The rules' code: a change of it is a change of every stay's checkpoints.
_RULES = hashlib.sha256(Path(checkpoints.__file__).read_bytes()).hexdigest()[:16]
# Long enough for a day's review; a changed trajectory changes the key anyway.
CHECKPOINTS_CACHE_SECONDS = 24 * 3600


def checkpoints_cache_key(*, stay: Stay) -> str:
    """Where the stay's checkpoints are kept: under its stay times, its events
    signature (windows.tracks: the concepts' version and the admission's
    events version) and the rules' code, so a changed trajectory or definition
    reads as not computed yet."""
    return (
        f"surveillance:checkpoints:{stay.pk}:{stay.intime.timestamp():.0f}:"
        f"{stay.outtime.timestamp():.0f}:{events_signature(stay=stay)}:{_RULES}"
    )


def stay_checkpoints_cached(*, key: str) -> list[Checkpoint] | None:
    """The checkpoints kept under ``key`` (``checkpoints_cache_key``), or None
    while they are not computed for the stay's present trajectory."""
    return cache.get(key)


def stay_checkpoints_get(*, stay: Stay) -> list[Checkpoint]:
    """The stay's checkpoints, each from the bedside events before it.

    Computing them replays the concept tracks 13 times (about 0.5 s of CPU
    a CLIF demo stay, 0.9 s for the slowest, seconds on a loaded machine:
    benchmarks/surveillance_bench.py --demo): they are kept in
    the cache under ``checkpoints_cache_key``, so they are computed once per
    trajectory or definition change (by a worker for the page:
    surveillance.tasks)."""
    key = checkpoints_cache_key(stay=stay)
    points = stay_checkpoints_cached(key=key)
    if points is None:
        import pandas as pd

        events = stay_events_frame(stay=stay, end=surveillance_end(stay))
        points = stay_checkpoints(
            events,
            intime=pd.Timestamp(stay.intime),
            outtime=pd.Timestamp(stay.outtime),
        )
        cache.set(key, points, CHECKPOINTS_CACHE_SECONDS)
    return points
