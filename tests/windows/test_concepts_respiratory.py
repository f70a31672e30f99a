"""Ventilation status episodes, FiO2 and P/F (CLINICAL_CONCEPTS.md sections 6
and 7). Pure pandas, no database."""

import numpy as np
import pandas as pd
import pytest

from tests.windows.concept_tracks import T0, at, column, tracks_for
from windows.concepts import compute_stay_tracks
from windows.concepts.respiratory import clean_fio2
from windows.concepts.synthetic import event, events_frame

tracks = tracks_for(48)

RESP = "respiratory_support"


def device(hours, category, **kwargs):
    return event(hours, RESP, category, **kwargs)


@pytest.mark.parametrize(
    ("category", "status"),
    [
        ("IMV", "invasive"),
        ("NIPPV", "niv"),
        ("CPAP", "niv"),
        ("High Flow NC", "hfnc"),
        ("Nasal Cannula", "supplemental_o2"),
        ("Face Mask", "supplemental_o2"),
        ("Trach Collar", "supplemental_o2"),
        ("Other", "supplemental_o2"),
        ("Room Air", "none"),
    ],
)
def test_device_categories_map_to_ventilation_status(category, status):
    frame = tracks([device(1.5, category), device(3.5, category)])
    # the last charting is carried for 14 h (3.5 -> 17.5)
    assert column(frame, "ventilation", [1, 2, 4, 18, 19]) == [
        None,
        status,
        status,
        status,
        None,
    ]


def test_a_status_carries_forward_while_chartings_are_less_than_14_hours_apart():
    frame = tracks([device(1.0, "IMV"), device(14.5, "IMV")])
    assert column(frame, "ventilation", [0, 1, 8, 15, 28, 29, 30]) == [
        None,
        "invasive",
        "invasive",
        "invasive",
        "invasive",
        "invasive",
        None,
    ]


def test_a_charting_is_carried_for_14_hours_at_most():
    # 1.0 -> 20.0 is a 19 h silence: ventilated until 15.0, then not known
    frame = tracks([device(1.0, "IMV"), device(20.0, "IMV")])
    assert column(frame, "ventilation", [1, 15, 16, 19, 20, 34, 35]) == [
        "invasive",
        "invasive",
        None,
        None,
        "invasive",
        "invasive",
        None,
    ]


def test_a_new_status_ends_the_previous_episode_and_the_hour_shows_the_higher_one():
    frame = tracks(
        [
            device(1.0, "IMV"),
            device(5.0, "IMV"),
            device(7.5, "Nasal Cannula"),
            device(12.0, "Nasal Cannula"),
        ]
    )
    assert column(frame, "ventilation", [1, 7, 8, 9, 12, 26, 27]) == [
        "invasive",
        "invasive",
        "invasive",
        "supplemental_o2",
        "supplemental_o2",
        "supplemental_o2",
        None,
    ]


def test_an_invasive_mode_without_a_device_is_invasive_ventilation():
    frame = tracks(
        [
            device(1.5, "mode:Assist Control-Volume Control"),
            device(4.5, "SIMV"),  # MIMIC mode events carry no "mode:" prefix
        ]
    )
    assert column(frame, "ventilation", [2, 5, 19, 20]) == [
        "invasive",
        "invasive",
        "invasive",  # 4.5 carried for 14 h
        None,
    ]


def test_a_trach_collar_with_a_ventilator_mode_is_invasive():
    frame = tracks(
        [
            device(1.5, "Trach Collar", text="tracheostomy"),
            device(1.5, "mode:Pressure Control"),
            device(3.5, "Trach Collar", text="tracheostomy"),
            device(6.5, "Trach Collar", text="tracheostomy"),
        ]
    )
    assert column(frame, "ventilation", [2, 4, 5, 7]) == [
        "invasive",
        "invasive",
        "supplemental_o2",
        "supplemental_o2",
    ]


def test_pressure_support_chartings_continue_a_ventilator_status_but_not_start_one():
    frame = tracks(
        [
            device(1.0, "IMV"),
            device(10.0, "mode:Pressure Support/CPAP"),
            device(20.0, "mode:Pressure Support/CPAP"),
            device(30.0, "IMV"),
        ]
    )
    assert column(frame, "ventilation", [5, 15, 25, 30, 44, 45]) == ["invasive"] * 5 + [
        None
    ]
    alone = tracks(
        [
            device(1.0, "mode:Pressure Support/CPAP"),
            device(3.0, "mode:Pressure Support/CPAP"),
        ]
    )
    assert set(alone["ventilation"]) == {None}


def test_a_mimic_device_charted_as_none_means_no_support():
    rows = [
        event(1.5, RESP, "", text="None"),
        event(3.5, RESP, "", text="None"),
    ]
    frame = events_frame(T0, rows)
    frame["name"] = "O2 Delivery Device(s)"
    result = compute_stay_tracks(frame, intime=T0, outtime=T0 + pd.Timedelta(hours=6))
    assert at(result, 2, "ventilation") == "none"


# --- FiO2 and P/F -----------------------------------------------------------------


def test_fio2_is_a_fraction_and_percentages_are_converted():
    values = pd.Series([0.21, 0.5, 1.0, 40.0, 100.0, 5.0, 0.1, 150.0])
    assert clean_fio2(values).tolist() == pytest.approx(
        [0.21, 0.5, 1.0, 0.4, 1.0, np.nan, np.nan, np.nan], nan_ok=True
    )


def test_pf_uses_the_latest_fio2_of_the_4_hours_before_the_gas():
    rows = [
        event(1.0, RESP, "fio2_set", 50),  # percent
        event(4.5, "labs", "po2_arterial", 100),  # 3.5 h later: 200
        event(10.0, RESP, "fio2_set", 0.8),
        event(10.0, "labs", "po2_arterial", 80),  # same time counts: 100
        event(20.0, "labs", "po2_arterial", 90),  # 10 h after the last FiO2: none
    ]
    frame = tracks(rows)
    assert at(frame, 5, "pf_ratio") == pytest.approx(200)
    assert at(frame, 10, "pf_ratio") == pytest.approx(100)
    assert at(frame, 5, "fio2") == pytest.approx(0.5)
    assert np.isnan(at(frame, 6, "fio2"))  # 5 h after its charting
    # The P/F of 10 h is carried 12 h; the 20 h gas has no FiO2 and adds nothing.
    assert at(frame, 22, "pf_ratio") == pytest.approx(100)
    assert np.isnan(at(frame, 23, "pf_ratio"))


def test_a_blood_gas_fio2_at_the_same_time_wins_over_the_charted_one():
    rows = [
        event(1.0, RESP, "fio2_set", 0.4),
        event(2.0, "labs", "fio2_lab", 60),
        event(2.0, "labs", "po2_arterial", 120),
    ]
    assert at(tracks(rows), 2, "pf_ratio") == pytest.approx(200)


# --- pO2 specimen (section 7: SOFA reads arterial gases) --------------------------


def gas(hours, po2, specimen="", name="pO2"):
    return event(hours, "labs", "po2_arterial", po2, text=specimen, name=name)


def test_a_venous_po2_gives_no_p_f_ratio():
    rows = [
        event(1.0, RESP, "fio2_set", 0.5),
        gas(2.0, 35, "venous"),
        gas(4.5, 90, "arterial"),
    ]
    frame = tracks(rows)
    assert np.isnan(at(frame, 2, "pf_ratio"))
    assert at(frame, 5, "pf_ratio") == pytest.approx(180)
    assert at(frame, 5, "pf_specimen_unknown") == 0
    assert np.isnan(at(frame, 2, "pf_specimen_unknown"))
    assert frame["sofa_respiration"].max() == 2


def test_a_po2_of_unknown_specimen_is_used_and_flagged():
    rows = [event(1.0, RESP, "fio2_set", 0.5), gas(2.0, 60)]
    frame = tracks(rows)
    assert at(frame, 2, "pf_ratio") == pytest.approx(120)
    assert column(frame, "pf_specimen_unknown", [1, 2, 14, 15]) == [
        pytest.approx(np.nan, nan_ok=True),
        1,
        1,
        pytest.approx(np.nan, nan_ok=True),
    ]


def test_the_mimic_specimen_type_of_the_same_time_tells_the_specimen():
    rows = [
        event(1.0, RESP, "fio2_set", 0.5),
        event(2.0, "labs", "specimen_type", text="VEN."),
        gas(2.0, 38),
        event(5.0, "labs", "specimen_type", text="ART."),
        gas(5.0, 75),
        event(8.0, "labs", "specimen_type", text="MIX."),
        gas(8.0, 30),
    ]
    frame = tracks(rows)
    assert np.isnan(at(frame, 2, "pf_ratio"))
    assert at(frame, 5, "pf_ratio") == pytest.approx(150)
    assert at(frame, 5, "pf_specimen_unknown") == 0
    assert at(frame, 8, "pf_ratio") == pytest.approx(150)  # carried from 5 h


def test_a_gas_named_arterial_is_arterial_and_wins_at_its_time():
    rows = [
        event(1.0, RESP, "fio2_set", 0.5),
        gas(2.0, 100, name="Arterial O2 pressure"),
        gas(2.0, 40),  # unknown specimen at the same time: not averaged in
    ]
    frame = tracks(rows)
    assert at(frame, 2, "pf_ratio") == pytest.approx(200)
    assert at(frame, 2, "pf_specimen_unknown") == 0
