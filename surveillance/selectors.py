"""Reads for the surveillance companion: a stay's bedside events as the concept
tracks take them, and its checkpoints computed from them."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from surveillance.checkpoints import Checkpoint, checkpoint_hours, stay_checkpoints
from windows.models import Stay
from windows.selectors_context import bedside_filter
from windows.tracks import events_frame


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


def stay_checkpoints_get(*, stay: Stay) -> list[Checkpoint]:
    """The stay's checkpoints, each from the bedside events before it."""
    events = stay_events_frame(stay=stay, end=surveillance_end(stay))
    return stay_checkpoints(
        events, intime=pd.Timestamp(stay.intime), outtime=pd.Timestamp(stay.outtime)
    )
