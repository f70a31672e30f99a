"""Urine output, CRRT and KDIGO AKI staging (CLINICAL_CONCEPTS.md sections 3, 4
and 11). Pure pandas, no database."""

import numpy as np
import pytest

from tests.windows.concept_tracks import at, column, tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(48)


def creat(hours, value):
    return event(hours, "labs", "creatinine", value)


# --- creatinine criteria (4b) -------------------------------------------------------


def test_a_rise_of_0_3_within_48_hours_is_stage_1():
    frame = tracks([creat(-30, 1.0), creat(10.5, 1.3)])
    assert at(frame, 11, "aki_stage_creat") == 1
    assert at(frame, 11, "aki_stage") == 1


@pytest.mark.parametrize(
    ("low", "value", "stage"),
    [
        (1.1, 1.4, 1),  # 1.1 + 0.3 is 1.4000000000000001 in floating point
        (12.3, 12.6, 1),
        (1.6, 1.9, 1),
        (1.1, 1.39, 0),
        (1.1, 1.65, 1),  # 1.5 x 1.1 exactly
        (1.1, 2.2, 2),  # 2 x exactly
        (1.1, 3.3, 3),  # 3 x exactly
        (3.7, 4.0, 3),  # 4.0 after a 48 h low of 3.7
    ],
)
def test_exact_thresholds_count_in_hundredths_of_mg_per_dl(low, value, stage):
    frame = tracks([creat(-30, low), creat(10.5, value)])
    assert at(frame, 11, "aki_stage_creat") == stage


def test_a_rise_below_0_3_and_below_1_5_times_baseline_is_stage_0():
    frame = tracks([creat(-30, 1.0), creat(10.5, 1.25)])
    assert at(frame, 11, "aki_stage_creat") == 0


def test_a_rise_of_0_3_over_more_than_48_hours_needs_1_5_times_the_7_day_low():
    slow = tracks([creat(-100, 1.0), creat(10.5, 1.4)])
    assert at(slow, 11, "aki_stage_creat") == 0
    ratio = tracks([creat(-100, 1.0), creat(10.5, 1.5)])
    assert at(ratio, 11, "aki_stage_creat") == 1


def test_twice_the_7_day_low_is_stage_2_and_three_times_stage_3():
    assert at(tracks([creat(-100, 1.0), creat(10.5, 2.0)]), 11, "aki_stage_creat") == 2
    assert at(tracks([creat(-100, 1.0), creat(10.5, 3.0)]), 11, "aki_stage_creat") == 3


def test_creatinine_4_after_a_48_hour_low_of_3_7_or_less_is_stage_3():
    assert at(tracks([creat(-30, 3.7), creat(5.5, 4.0)]), 6, "aki_stage_creat") == 3
    # 4.0 against a 48 h low of 3.8 and a 7-day low of 3.8: only +0.2, ratio 1.05.
    assert at(tracks([creat(-30, 3.8), creat(5.5, 4.0)]), 6, "aki_stage_creat") == 0


def test_baseline_ignores_values_older_than_7_days_and_a_first_value_is_stage_0():
    frame = tracks([creat(-200, 0.5), creat(1.5, 1.0), creat(20.5, 1.1)])
    assert at(frame, 2, "aki_stage_creat") == 0
    assert at(frame, 21, "aki_stage_creat") == 0


# --- urine criteria (4c) -----------------------------------------------------------


def hourly_urine(ml, last=30, category="indwelling_urinary_catheter"):
    return [event(h, "output", category, ml) for h in range(1, last + 1)]


def test_urine_below_0_5_ml_per_kg_per_hour_is_stage_1_over_6_hours_and_2_over_12():
    frame = tracks(hourly_urine(40), weight_kg=100)  # 0.4 mL/kg/h
    # Hour 5: less than 6 h charted (no 6 h rate); hour 6: the first 6 h are stage 0.
    assert np.isnan(at(frame, 5, "aki_stage_uo"))
    assert column(frame, "aki_stage_uo", [6, 7, 11, 12, 24]) == [0, 1, 1, 2, 2]


def test_anuria_for_12_hours_is_stage_3():
    frame = tracks(hourly_urine(0), weight_kg=100)
    assert column(frame, "aki_stage_uo", [6, 7, 11, 12]) == [0, 1, 1, 3]


def test_urine_below_0_3_for_24_hours_is_stage_3():
    frame = tracks(hourly_urine(25), weight_kg=100)  # 0.25 mL/kg/h
    assert column(frame, "aki_stage_uo", [23, 24]) == [2, 3]


def test_adequate_urine_is_stage_0_and_no_weight_means_no_urine_stage():
    assert at(tracks(hourly_urine(80), weight_kg=100), 12, "aki_stage_uo") == 0
    assert np.isnan(at(tracks(hourly_urine(40)), 12, "aki_stage_uo"))


def test_urine_rate_is_the_trailing_6_hours_per_kg():
    rows = hourly_urine(40) + [event(-2, "vitals", "weight_kg", 80)]
    frame = tracks(rows)
    assert np.isnan(at(frame, 5, "urine_ml_kg_h"))
    assert at(frame, 6, "urine_ml_kg_h") == pytest.approx(240 / 80 / 6)
    assert at(frame, 30, "urine_ml") == 40
    # Hour 35 (rows 30-35) still holds the last charting; hours 31-36 hold
    # none: unknown, not zero.
    assert at(frame, 35, "urine_ml_kg_h") == pytest.approx(40 / 80 / 6)
    assert np.isnan(at(frame, 36, "urine_ml_kg_h"))


def test_gu_irrigant_in_is_netted_out_of_urine():
    frame = tracks(
        [
            event(1.5, "output", "indwelling_urinary_catheter", 100),
            event(1.5, "input", "flush_irrigation_urine", 30),
        ]
    )
    assert at(frame, 2, "urine_ml") == 70


# --- CRRT and the combined stage (4d) --------------------------------------------


def test_crrt_mode_charting_is_stage_3_carried_6_hours_and_smoothed_6_more():
    frame = tracks([creat(1.5, 1.0), event(5.5, "crrt_therapy", "crrt:cvvhdf")])
    # a last charting runs for CRRT_MAX_GAP (5.5 -> 11.5)
    assert column(frame, "crrt_active", [5, 6, 12, 13]) == [0, 1, 1, 0]
    assert at(frame, 2, "aki_stage") == 0
    assert column(frame, "aki_stage", [6, 12]) == [3, 3]
    assert column(frame, "aki_stage_smoothed", [2, 6, 17]) == [0, 3, 3]
    assert np.isnan(at(frame, 18, "aki_stage_smoothed"))


def test_crrt_from_mimic_mode_text_and_procedure_intervals():
    mode = tracks([event(3.5, "crrt_therapy", "crrt_mode_name", text="CVVHDF")])
    assert at(mode, 4, "crrt_active") == 1 and at(mode, 4, "aki_stage") == 3
    interval = tracks([event(2.5, "crrt_therapy", "cvvhdf", end_hours=5.5)])
    assert column(interval, "crrt_active", [2, 3, 6, 7]) == [0, 1, 1, 0]
    assert at(interval, 4, "aki_stage") == 3
    # A circuit flow or volume shows the machine running; other readings do not.
    readings = tracks([event(3.5, "crrt_therapy", "blood_flow_rate", 200)])
    assert column(readings, "crrt_active", [3, 4, 10, 11]) == [0, 1, 1, 0]
    ultrafiltrate = tracks([event(3.5, "crrt_therapy", "ultrafiltration_out", 150)])
    assert column(ultrafiltrate, "crrt_active", [3, 4, 10, 11]) == [0, 1, 1, 0]
    pressure = tracks([event(3.5, "crrt_therapy", "crrt_access_pressure", -80)])
    assert pressure["crrt_active"].max() == 0


def crrt(hours, category="crrt:cvvhdf", value=None, text=""):
    return event(hours, "crrt_therapy", category, value, text=text)


def test_crrt_is_carried_from_each_charting_for_6_hours_at_most():
    frame = tracks([crrt(2.5), crrt(4.5), crrt(10.0), crrt(20.0)])
    # 4.5 -> 10.0 (5.5 h) is carried; 10.0 -> 20.0 (10 h): on until 16.0, as
    # after the last charting (20.0 -> 26.0), then off.
    assert column(frame, "crrt_active", list(range(2, 28))) == (
        [0] + [1] * 14 + [0] * 3 + [1] * 7 + [0]
    )
    assert column(frame, "aki_stage", list(range(3, 17))) == [3] * 14
    assert np.isnan(at(frame, 18, "aki_stage"))


def test_a_discontinued_circuit_or_a_blood_flow_of_0_stops_crrt():
    for stop in (
        crrt(3.5, "crrt_system_integrity", text="Discontinued"),
        crrt(3.5, "blood_flow_rate", 0),
    ):
        frame = tracks([crrt(1.5), stop, crrt(6.5)])
        assert column(frame, "crrt_active", [2, 3, 4, 5, 6, 7, 13, 14]) == [
            1,
            1,
            1,
            0,
            0,
            1,
            1,
            0,
        ]


def test_an_active_circuit_charted_in_mimic_text_is_crrt():
    frame = tracks([crrt(1.5, "crrt_system_integrity", text="Active"), crrt(3.5)])
    assert column(frame, "crrt_active", [1, 2, 3, 4, 10, 11]) == [0, 1, 1, 1, 1, 0]


def test_combined_stage_is_the_highest_criterion_in_the_hour():
    rows = hourly_urine(40) + [creat(-30, 1.0), creat(11.5, 2.1)]
    frame = tracks(rows, weight_kg=100)
    assert at(frame, 12, "aki_stage_creat") == 2
    assert at(frame, 12, "aki_stage_uo") == 2
    assert at(frame, 7, "aki_stage") == 1
    assert at(frame, 12, "aki_stage") == 2
