"""The fast reads behind the builds (issue 17): times read as integer
microseconds on PostgreSQL must be the times the ORM reads, and the windows
build that writes windows and their Gold draw in one upsert must write what
windows_build then windows_sample_gold write."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from tests.factories import make_admission, make_stay
from windows.concepts import EVENT_COLUMNS, compute_stay_tracks
from windows.models import Domain, Event, EventKind, StayTracks, Window
from windows.tracks import (
    epoch_us,
    event_times_us,
    events_frame,
    stay_tracks_build,
)
from windows.windowing import (
    WINDOW_FIELDS,
    windows_build,
    windows_build_many,
    windows_sample_gold,
)

pytestmark = pytest.mark.django_db

START = datetime(2150, 3, 1, 7, 59, 59, 999_999, tzinfo=UTC)


def _events(admission, count: int, seed: int) -> None:
    """Vitals, labs and actions at irregular times with microseconds, some
    intervals (end_time set), some before the epoch's 2^53 us limit's reach."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        time = START + timedelta(microseconds=rng.randrange(0, 72 * 3600 * 10**6))
        action = rng.random() < 0.2
        interval = action and rng.random() < 0.5
        rows.append(
            Event(
                admission=admission,
                time=time,
                end_time=time + timedelta(minutes=rng.randrange(1, 600), microseconds=7)
                if interval
                else None,
                kind=EventKind.ACTION if action else EventKind.OBSERVATION,
                domain=Domain.MED_CONTINUOUS if action else Domain.VITALS,
                category="norepinephrine" if action else "heart_rate",
                name="Norepinephrine" if action else "Heart rate",
                value_num=round(rng.uniform(0.01, 150), 3),
                unit="mcg/kg/min" if action else "bpm",
                order_id=f"o{rng.randrange(3)}" if action else "",
                source_table="bench",
                source_key=f"r{seed}:{i}",
            )
        )
    Event.objects.bulk_create(rows)


def _orm_frame(queryset) -> pd.DataFrame:
    rows = queryset.values_list(*EVENT_COLUMNS)
    frame = pd.DataFrame.from_records(list(rows), columns=list(EVENT_COLUMNS))
    for column in ("time", "end_time"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def test_events_frame_reads_the_times_the_orm_reads():
    admission = make_admission(admit_time=START - timedelta(hours=30))
    _events(admission, 400, seed=1)
    queryset = Event.objects.filter(admission=admission).order_by("time", "id")

    fast = events_frame(queryset)
    slow = _orm_frame(queryset)

    assert len(fast) == 400
    assert fast["end_time"].notna().sum() > 10  # intervals and points both read
    for column in ("time", "end_time"):
        pd.testing.assert_series_equal(
            fast[column].astype("datetime64[ns, UTC]"),
            slow[column].astype("datetime64[ns, UTC]"),
        )
    for column in EVENT_COLUMNS:
        if column not in ("time", "end_time"):
            assert fast[column].tolist() == slow[column].tolist(), column
    # Microseconds survive (the last digit of every time is kept).
    assert (fast["time"].dt.microsecond == slow["time"].dt.microsecond).all()
    assert slow["time"].dt.microsecond.nunique() > 300


def test_event_times_us_are_exact():
    admission = make_admission(admit_time=START - timedelta(hours=30))
    _events(admission, 200, seed=2)
    queryset = Event.objects.filter(admission=admission).order_by("time", "id")
    times, ids, kinds = event_times_us(queryset, "id", "kind")
    expected = list(queryset.values_list("time", "id", "kind"))
    assert times.tolist() == [epoch_us(t) for t, _, _ in expected]
    assert ids == [i for _, i, _ in expected]
    assert kinds == [k for _, _, k in expected]


def test_tracks_from_the_fast_frame_are_the_tracks_of_the_orm_frame():
    admission = make_admission(admit_time=START - timedelta(hours=30))
    stay = make_stay(admission=admission, intime=START, hours=72)
    _events(admission, 600, seed=3)
    queryset = Event.objects.filter(admission=admission)
    kwargs = {
        "intime": pd.Timestamp(stay.intime),
        "outtime": pd.Timestamp(stay.outtime),
    }
    fast = compute_stay_tracks(events_frame(queryset), **kwargs)
    slow = compute_stay_tracks(queryset_frame := _orm_frame(queryset), **kwargs)
    assert len(queryset_frame) == 600
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    assert fast["ned"].notna().any()  # the infusions reached a track

    stored = stay_tracks_build(stay=stay)
    again = stay_tracks_build(stay=stay)  # an upsert: one row, same id
    assert StayTracks.objects.filter(stay=stay).count() == 1
    assert again.pk == stored.pk
    assert again.columns == stored.columns


def _snapshot(stays):
    return sorted(
        Window.objects.filter(stay__in=stays).values_list(
            "stay_id", "index", *WINDOW_FIELDS, "sampled_gold", "sample_regime"
        )
    )


def test_windows_build_many_writes_what_build_then_draw_write():
    stays = []
    for seed in range(4):
        admission = make_admission(admit_time=START - timedelta(hours=30))
        stays.append(make_stay(admission=admission, intime=START, hours=20 + 17 * seed))
        _events(admission, 300 + 100 * seed, seed=10 + seed)

    for stay in stays:
        windows_build(stay=stay)
        windows_sample_gold(stay=stay, seed=7)
    expected = _snapshot(stays)
    assert sum(row[8] for row in expected) > 8  # Gold windows drawn
    assert {row[9] for row in expected} == {"high_density", "control"}

    Window.objects.filter(stay__in=stays).delete()
    summary = windows_build_many(stays=stays, seed=7)
    assert _snapshot(stays) == expected
    assert summary.windows == len(expected)
    assert summary.gold == sum(row[8] for row in expected)

    # Again over the built windows: the rows are updated in place, not re-made.
    ids = set(Window.objects.filter(stay__in=stays).values_list("pk", flat=True))
    windows_build_many(stays=stays, seed=7)
    assert _snapshot(stays) == expected
    assert (
        set(Window.objects.filter(stay__in=stays).values_list("pk", flat=True)) == ids
    )
