"""The concept tracks of a synthetic stay, for the concept tests: events at
hours since T0 (windows.concepts.synthetic), the stay from T0 for a number of
hours, and the value of a track at an hour."""

import pandas as pd

from windows.concepts import compute_stay_tracks
from windows.concepts.synthetic import events_frame

T0 = pd.Timestamp("2150-01-01 00:00", tz="UTC")


def tracks_for(default_hours: float):
    """``tracks(rows, hours=default_hours, **kwargs)``: compute_stay_tracks of
    ``rows`` over a stay from T0 for ``hours``."""

    def tracks(rows, hours=default_hours, **kwargs):
        return compute_stay_tracks(
            events_frame(T0, rows),
            intime=T0,
            outtime=T0 + pd.Timedelta(hours=hours),
            **kwargs,
        )

    return tracks


def at(frame, hour, name):
    return frame.set_index("hour").at[hour, name]


def column(frame, name, hours):
    return frame.set_index("hour").loc[hours, name].tolist()
