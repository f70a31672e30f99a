"""The edges of a stay's hourly grid (CLINICAL_CONCEPTS.md section 0): the last
row ends at ICU discharge, so nothing recorded after discharge reaches a track,
and a state running at discharge is the last row's state. Pure pandas."""

import numpy as np
import pandas as pd

from tests.windows.concept_tracks import at, tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(48)

MED = "medication_admin_continuous"


def test_an_infusion_started_after_discharge_does_not_score_the_last_hour():
    # A 34-minute stay; norepinephrine starts 6 minutes after discharge.
    frame = tracks(
        [
            event(0.3, "vitals", "map", 80),
            event(0.67, MED, "norepinephrine", 0.5, unit="mcg/kg/min", text="start"),
            event(1.5, MED, "norepinephrine", 0, unit="mcg/kg/min", text="stop"),
        ],
        hours=34 / 60,
    )
    assert frame["hour"].tolist() == [0, 1]
    assert at(frame, 1, "norepinephrine") == 0
    assert at(frame, 1, "ned") == 0
    assert at(frame, 1, "sofa_cardiovascular") == 0


def test_an_infusion_running_at_discharge_is_the_last_hours_rate():
    point = tracks(
        [event(0.5, MED, "norepinephrine", 0.2, unit="mcg/kg/min", text="start")],
        hours=2.5,
    )
    interval = tracks(
        [
            event(
                0.5,
                MED,
                "norepinephrine",
                0.2,
                unit="mcg/kg/min",
                text="ChangeDose/Rate",
                end_hours=9.0,
            )
        ],
        hours=2.5,
    )
    for frame in (point, interval):
        assert frame["norepinephrine"].tolist() == [0, 0.2, 0.2, 0.2]


def test_an_infusion_stopped_before_discharge_is_not_running_in_the_last_hour():
    frame = tracks(
        [
            event(0.5, MED, "epinephrine", 0.05, unit="mcg/kg/min", text="start"),
            event(2.2, MED, "epinephrine", 0, unit="mcg/kg/min", text="stop"),
        ],
        hours=2.5,
    )
    assert frame["epinephrine"].tolist() == [0, 0.05, 0.05, 0]


def test_vitals_and_labs_after_discharge_do_not_reach_the_last_hour():
    frame = tracks(
        [
            event(2.4, "vitals", "map", 80),
            event(2.7, "vitals", "map", 40),
            event(2.8, "labs", "lactate", 9.0),
            event(2.8, "patient_assessments", "gcs_total", 3),
        ],
        hours=2.5,
    )
    assert at(frame, 3, "map") == 80 and at(frame, 3, "map_min") == 80
    assert np.isnan(at(frame, 3, "lactate"))
    assert np.isnan(at(frame, 3, "gcs"))
    assert frame["sofa_cns"].max() == 0


def test_crrt_charted_after_discharge_is_not_carried_into_the_stay():
    frame = tracks(
        [
            event(2.2, "crrt_therapy", "crrt:cvvhdf"),
            event(3.0, "crrt_therapy", "crrt:cvvhdf"),
        ],
        hours=2.5,
    )
    # The charting at 2.2 h is the stay's last; it is not carried past discharge
    # toward the one at 3.0 h, but its own hour is on CRRT.
    assert frame["crrt_active"].tolist() == [0, 0, 0, 1]


def test_a_ventilation_status_charted_before_discharge_lasts_until_discharge():
    frame = tracks(
        [
            event(0.5, "respiratory_support", "High Flow NC"),
            event(1.5, "respiratory_support", "High Flow NC"),
            event(2.0, "respiratory_support", "NIPPV"),
            # After discharge: not read, and not needed to keep NIV running.
            event(5.0, "respiratory_support", "High Flow NC"),
        ],
        hours=3.7,
    )
    assert frame["ventilation"].tolist() == [None, "hfnc", "niv", "niv", "niv"]


def test_crrt_charted_before_discharge_runs_until_discharge_within_6_hours():
    frame = tracks(
        [
            event(0.5, "crrt_therapy", "crrt:cvvhdf"),
            event(1.5, "crrt_therapy", "crrt:cvvhdf"),
        ],
        hours=4.5,
    )
    assert frame["crrt_active"].tolist() == [0, 1, 1, 1, 1, 1]


def test_a_record_coded_after_discharge_does_not_move_the_first_hour():
    """A billing code carries a date only (05:00 of the day): it is no bedside
    event, so the grid starts where the charted events start."""
    rows = [event(0.5, "vitals", "map", 80), event(2.5, "vitals", "map", 70)]
    coded = event(-19.0, "patient_procedures", "ICD10PCS", kind="coded", name="5A1955Z")
    plain = tracks(rows, hours=3)
    with_code = tracks([coded, *rows], hours=3)
    assert plain["hour"].tolist() == with_code["hour"].tolist() == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(plain, with_code)
