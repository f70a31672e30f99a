"""Hourly vitals, GCS, RASS and laboratory tracks (CLINICAL_CONCEPTS.md sections
1, 2, 7, 8). Pure pandas, no database."""

import numpy as np
import pytest

from tests.windows.concept_tracks import at, column, tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(48)

ASSESS = "patient_assessments"


# --- vitals -------------------------------------------------------------------------


def test_vitals_are_hourly_means_of_the_right_closed_hour():
    frame = tracks(
        [
            event(2.0, "vitals", "heart_rate", 70),  # exactly at the end of hour 2
            event(2.25, "vitals", "heart_rate", 80),
            event(3.0, "vitals", "heart_rate", 100),
        ]
    )
    assert column(frame, "hr", [2, 3]) == [70, 90]
    assert np.isnan(at(frame, 1, "hr")) and np.isnan(at(frame, 4, "hr"))


def test_values_charted_at_one_time_are_averaged_before_the_hour():
    frame = tracks(
        [
            event(1.5, "vitals", "map", 60),
            event(1.5, "vitals", "map", 70),  # invasive and cuff at one time
            event(1.8, "vitals", "map", 80),
        ]
    )
    assert at(frame, 2, "map") == 72.5
    assert at(frame, 2, "map_min") == 65


@pytest.mark.parametrize(
    ("category", "track", "invalid", "valid"),
    [
        ("heart_rate", "hr", [0, 300], 299),
        ("respiratory_rate", "rr", [0, 70], 69),
        ("spo2", "spo2", [0, 101], 100),
        ("temp_c", "temp", [10, 50], 36.6),
        ("sbp", "sbp", [0, 400], 399),
    ],
)
def test_values_outside_the_valid_range_are_ignored(category, track, invalid, valid):
    rows = [event(0.5, "vitals", category, v) for v in invalid]
    rows.append(event(1.5, "vitals", category, valid))
    frame = tracks(rows)
    assert np.isnan(at(frame, 1, track))
    assert at(frame, 2, track) == valid


# --- GCS and RASS ---------------------------------------------------------------------


def test_gcs_is_the_lowest_total_of_the_hour():
    frame = tracks(
        [event(1.2, ASSESS, "gcs_total", 14), event(1.7, ASSESS, "gcs_total", 9)]
    )
    assert at(frame, 2, "gcs") == 9
    assert np.isnan(at(frame, 3, "gcs"))


def gcs(hours, eye=None, verbal=None, motor=None, verbal_text=""):
    rows = []
    if eye is not None:
        rows.append(event(hours, ASSESS, "gcs_eye", eye))
    if verbal is not None or verbal_text:
        rows.append(event(hours, ASSESS, "gcs_verbal", verbal, text=verbal_text))
    if motor is not None:
        rows.append(event(hours, ASSESS, "gcs_motor", motor))
    return rows


def test_gcs_from_components_sums_and_an_intubated_verbal_counts_as_15():
    frame = tracks(
        gcs(1.5, eye=2, verbal=3, motor=4)
        + gcs(4.5, eye=3, verbal=1, motor=5, verbal_text="No Response-ETT")
    )
    assert at(frame, 2, "gcs") == 9
    assert at(frame, 5, "gcs") == 15


def test_missing_components_come_from_a_charting_under_6_hours_old_else_normal():
    frame = tracks(
        gcs(1.5, eye=2, verbal=3, motor=4) + gcs(3.5, eye=3) + gcs(10.5, eye=3)
    )
    assert at(frame, 4, "gcs") == 3 + 3 + 4  # verbal and motor from 1.5 h
    assert at(frame, 11, "gcs") == 3 + 5 + 6  # 7 h later: normal defaults


def test_after_an_intubated_verbal_a_missing_verbal_is_15():
    frame = tracks(
        gcs(1.5, eye=1, motor=4, verbal_text="No Response-ETT")
        + gcs(2.5, eye=2, motor=3)
    )
    assert at(frame, 2, "gcs") == 15
    assert at(frame, 3, "gcs") == 15


def test_after_an_intubated_verbal_the_next_total_uses_current_components_only():
    frame = tracks(
        gcs(1.5, eye=1, motor=4, verbal_text="No Response-ETT")
        + gcs(2.5, eye=2, verbal=4)
    )
    assert at(frame, 3, "gcs") == 2 + 4 + 6  # motor normal, not the previous 4


def test_a_charted_total_wins_over_components_at_the_same_time():
    frame = tracks(
        gcs(1.5, eye=1, verbal=1, motor=1) + [event(1.5, ASSESS, "gcs_total", 7)]
    )
    assert at(frame, 2, "gcs") == 7


def test_an_untestable_verbal_is_flagged_beside_the_conventional_15():
    # CLIF charts the total with its components; E1 V0 M1 of an intubated
    # patient is 15 by section 2's rule 1, and the hour says why.
    frame = tracks(
        gcs(1.5, eye=1, verbal=0, motor=1) + [event(1.5, ASSESS, "gcs_total", 15)]
    )
    assert at(frame, 2, "gcs") == 15
    assert at(frame, 2, "gcs_unable") == 1
    assert column(frame, ["gcs_eye", "gcs_verbal", "gcs_motor"], 2) == [1, 0, 1]
    assert frame["sofa_cns"].max() == 0


def test_a_total_charted_without_the_verbal_of_an_intubated_patient_is_15():
    # A site that charts "2T" as a total of 2 gets the same 15 as one that
    # charts 15: rule 1 reads the verbal component, not the charted sum.
    frame = tracks(
        gcs(1.5, eye=1, verbal=0, motor=1) + [event(1.5, ASSESS, "gcs_total", 2)]
    )
    assert at(frame, 2, "gcs") == 15 and at(frame, 2, "gcs_unable") == 1


@pytest.mark.parametrize("text", ["No Response-ETT", "T", "1T", "VT", "Intubated"])
def test_the_verbal_t_of_intubated_patients_is_untestable(text):
    frame = tracks(gcs(1.5, eye=3, motor=5, verbal_text=text))
    assert at(frame, 2, "gcs") == 15
    assert at(frame, 2, "gcs_unable") == 1
    assert at(frame, 2, "gcs_verbal") == 0


def test_a_testable_verbal_is_not_flagged_and_the_lowest_total_decides_the_flag():
    frame = tracks(
        gcs(1.2, eye=1, verbal=0, motor=1)
        + gcs(1.7, eye=3, verbal=4, motor=6)
        + gcs(3.5, eye=2, verbal=2, motor=5, verbal_text="Incomprehensible sounds")
    )
    assert at(frame, 2, "gcs") == 13 and at(frame, 2, "gcs_unable") == 0
    assert at(frame, 4, "gcs") == 9 and at(frame, 4, "gcs_unable") == 0
    assert np.isnan(at(frame, 5, "gcs_unable"))


def test_a_missing_verbal_after_an_untestable_one_is_still_untestable():
    frame = tracks(gcs(1.5, eye=1, verbal=0, motor=4) + gcs(2.5, eye=2, motor=3))
    assert column(frame, "gcs_unable", [2, 3]) == [1, 1]
    assert at(frame, 3, "gcs_verbal") == 0  # carried from 1.5 h (section 2)


def test_a_charted_total_without_a_verbal_after_an_untestable_one_is_15():
    # Rule 2 decides, as it would from MIMIC-IV's components alone: the site's
    # 12 (E3 M4 and a verbal defaulted to 5) is not an observed GCS.
    frame = tracks(
        gcs(1.5, eye=1, verbal=0, motor=4)
        + gcs(2.5, eye=3, motor=4)
        + [event(2.5, ASSESS, "gcs_total", 12)]
    )
    assert at(frame, 3, "gcs") == 15 and at(frame, 3, "gcs_unable") == 1


def test_rass_is_the_last_value_of_the_hour():
    frame = tracks(
        [
            event(1.2, ASSESS, "RASS", -4),
            event(1.8, ASSESS, "RASS", -1),
            event(2.5, ASSESS, "RASS", 7),  # out of range
        ]
    )
    assert at(frame, 2, "rass") == -1
    assert np.isnan(at(frame, 3, "rass"))


# --- labs ---------------------------------------------------------------------


def test_creatinine_platelets_bilirubin_inr_are_carried_24_hours():
    rows = [
        event(1.5, "labs", "creatinine", 1.4),
        event(1.5, "labs", "platelet_count", 90),
        event(1.5, "labs", "bilirubin_total", 2.1),
        event(1.5, "labs", "inr", 1.7),
    ]
    frame = tracks(rows)
    for name, value in [
        ("creatinine", 1.4),
        ("platelets", 90),
        ("bilirubin", 2.1),
        ("inr", 1.7),
    ]:
        assert np.isnan(at(frame, 1, name))
        assert column(frame, name, [2, 25]) == [value, value]
        assert np.isnan(at(frame, 26, name))


def test_lactate_and_ph_are_carried_12_hours_and_the_latest_wins():
    rows = [
        event(1.5, "labs", "lactate", 4.2),
        event(3.5, "labs", "lactate", 2.0),
        event(1.5, "labs", "ph_arterial", 7.21),
        event(1.5, "labs", "ph_venous", 7.10),  # venous pH is not the ph track
    ]
    frame = tracks(rows)
    assert column(frame, "lactate", [2, 3, 4, 15]) == [4.2, 4.2, 2.0, 2.0]
    assert np.isnan(at(frame, 16, "lactate"))
    assert column(frame, "ph", [2, 13]) == [7.21, 7.21]
    assert np.isnan(at(frame, 14, "ph"))


def test_impossible_lab_values_are_ignored():
    frame = tracks(
        [
            event(1.5, "labs", "creatinine", 0),
            event(2.5, "labs", "creatinine", 151),
            event(3.5, "labs", "platelet_count", -5),
        ]
    )
    assert frame["creatinine"].isna().all() and frame["platelets"].isna().all()
