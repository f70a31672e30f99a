"""The compute_stay_tracks contract: grid, columns, metadata, input checks, and a
long synthetic stay. Pure pandas, no database."""

import pandas as pd
import pytest

from tests.windows.concept_tracks import T0, tracks_for
from windows.concepts import CONCEPT_COLUMNS, compute_stay_tracks
from windows.concepts.synthetic import event, events_frame, synthetic_stay

tracks = tracks_for(10.5)


def test_columns_are_hour_hour_end_and_the_documented_concepts():
    frame = tracks([event(1, "vitals", "heart_rate", 80)])
    assert list(frame.columns) == ["hour", "hour_end", *CONCEPT_COLUMNS]
    for name, meta in CONCEPT_COLUMNS.items():
        assert meta.label and meta.group and meta.rule and meta.source, name
        assert meta.value in {"number", "stage", "flag", "category"}, name


@pytest.mark.parametrize(
    ("first_event", "first_hour"),
    [(-30.0, -24), (-3.5, -3), (-0.5, 0), (0.5, 0), (5.0, 0)],
)
def test_the_grid_starts_at_the_first_events_hour_between_minus_24_and_0(
    first_event, first_hour
):
    frame = tracks([event(first_event, "vitals", "heart_rate", 80)])
    assert frame["hour"].iloc[0] == first_hour
    assert frame["hour"].iloc[-1] == 11  # ceil(10.5 h)
    assert frame["hour"].diff().dropna().eq(1).all()
    assert (frame["hour_end"] == T0 + pd.to_timedelta(frame["hour"], unit="h")).all()


def test_naive_times_are_read_as_utc():
    events = events_frame(T0, [event(1.5, "vitals", "heart_rate", 80)])
    events["time"] = events["time"].dt.tz_localize(None)
    frame = compute_stay_tracks(
        events, intime=T0.tz_localize(None), outtime=T0 + pd.Timedelta(hours=3)
    )
    assert frame.set_index("hour").at[2, "hr"] == 80
    assert str(frame["hour_end"].dt.tz) == "UTC"


def test_times_in_another_zone_are_placed_by_their_instant():
    events = events_frame(T0, [event(1.5, "vitals", "heart_rate", 80)])
    events["time"] = events["time"].dt.tz_convert("America/Chicago")
    frame = compute_stay_tracks(events, intime=T0, outtime=T0 + pd.Timedelta(hours=3))
    assert frame.set_index("hour").at[2, "hr"] == 80


def test_only_time_domain_and_category_are_required():
    events = pd.DataFrame(
        {
            "time": [T0 + pd.Timedelta(hours=1.5), pd.NaT],
            "domain": ["patient_assessments", "vitals"],
            "category": ["gcs_total", "heart_rate"],
        }
    )
    frame = compute_stay_tracks(events, intime=T0, outtime=T0 + pd.Timedelta(hours=3))
    assert frame["gcs"].isna().all()  # no value_num column: no value
    assert frame["hr"].isna().all()


def test_an_empty_stay_gives_a_grid_of_unknowns():
    frame = tracks([])
    assert frame["hour"].tolist() == list(range(12))
    assert frame["hr"].isna().all() and frame["aki_stage"].isna().all()
    assert (frame["ned"] == 0).all() and (frame["sofa"] == 0).all()
    assert frame.attrs == {"weight_kg": None, "sepsis3": None}


@pytest.mark.parametrize(
    ("events", "kwargs", "message"),
    [
        (pd.DataFrame({"time": [], "domain": []}), {}, "lacks column"),
        (
            events_frame(T0, []),
            {"outtime": T0 - pd.Timedelta(hours=1)},
            "before intime",
        ),
        (events_frame(T0, []), {"weight_kg": 0}, "weight_kg must be positive"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(events, kwargs, message):
    arguments = {"intime": T0, "outtime": T0 + pd.Timedelta(hours=5), **kwargs}
    with pytest.raises(ValueError, match=message):
        compute_stay_tracks(events, **arguments)


def test_the_weight_given_overrides_the_charted_one():
    rows = [
        event(0.5, "vitals", "weight_kg", 70),
        event(
            0.5,
            "medication_admin_continuous",
            "norepinephrine",
            7,
            unit="mcg/min",
            text="start",
        ),
    ]
    assert tracks(rows).set_index("hour").at[1, "norepinephrine"] == pytest.approx(0.1)
    frame = tracks(rows, weight_kg=100)
    assert frame.set_index("hour").at[1, "norepinephrine"] == pytest.approx(0.07)
    assert frame.attrs["weight_kg"] == 100


def test_a_long_synthetic_stay_computes_every_track():
    events, intime, outtime = synthetic_stay(hours=1800)
    frame = compute_stay_tracks(events, intime=intime, outtime=outtime)
    assert len(frame) == 1800 + 24 + 1
    assert frame["sofa"].between(0, 24).all()
    assert set(frame["ventilation"].dropna()) <= {"invasive", "supplemental_o2"}
    assert (frame["ned"] >= 0).all()
    assert frame["aki_stage"].dropna().between(0, 3).all()
    assert frame.loc[frame["hour"] >= 0, "hr"].notna().mean() > 0.99
    assert frame["suspected_infection"].iloc[-1] == 1
