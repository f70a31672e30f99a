"""SOFA components, the 24-hour worst and the total (CLINICAL_CONCEPTS.md
section 9; Vincent 1996). Pure pandas, no database."""

import numpy as np
import pytest

from tests.windows.concept_tracks import at, tracks_for
from windows.concepts import sofa
from windows.concepts.synthetic import event

tracks = tracks_for(48)

NAN = np.nan


def score(function, *values):
    return function(*(np.array([v], dtype=float) for v in values))[0]


def norepi(rate):
    return event(
        0.5,
        "medication_admin_continuous",
        "norepinephrine",
        rate,
        unit="mcg/kg/min",
        text="start",
        kind="action",
    )


# --- cardiovascular --------------------------------------------------------------


def test_norepinephrine_0_1_scores_cardiovascular_3_and_0_11_scores_4():
    assert at(tracks([norepi(0.1)]), 2, "sofa_cardiovascular") == 3
    assert at(tracks([norepi(0.11)]), 2, "sofa_cardiovascular") == 4


@pytest.mark.parametrize(
    ("map_min", "ne", "epi", "dopa", "dobu", "expected"),
    [
        (NAN, 0, 0, 16, 0, 4),
        (NAN, 0, 0.11, 0, 0, 4),
        (NAN, 0, 0, 6, 0, 3),
        (NAN, 0, 0.05, 0, 0, 3),
        (NAN, 0, 0, 5, 0, 2),  # dopamine <= 5 counts as "any dopamine"
        (80, 0, 0, 0, 2.5, 2),
        (65, 0, 0, 0, 0, 1),
        (70, 0, 0, 0, 0, 0),
        (NAN, 0, 0, 0, 0, NAN),
    ],
)
def test_cardiovascular_thresholds(map_min, ne, epi, dopa, dobu, expected):
    assert score(sofa.cardiovascular, map_min, ne, epi, dopa, dobu) == pytest.approx(
        expected, nan_ok=True
    )


def test_vasopressin_and_phenylephrine_do_not_score_cardiovascular():
    rows = [
        event(
            0.5,
            "medication_admin_continuous",
            "vasopressin",
            2.4,
            unit="units/hour",
            text="start",
        ),
        event(
            0.5,
            "medication_admin_continuous",
            "phenylephrine",
            1,
            unit="mcg/kg/min",
            text="start",
        ),
        event(1.5, "vitals", "map", 75),
    ]
    frame = tracks(rows)
    assert at(frame, 2, "ned") == pytest.approx(0.2)
    assert at(frame, 2, "sofa_cardiovascular") == 0


def test_lowest_map_of_the_hour_scores():
    frame = tracks([event(1.2, "vitals", "map", 80), event(1.7, "vitals", "map", 62)])
    assert at(frame, 2, "map") == 71 and at(frame, 2, "map_min") == 62
    assert at(frame, 2, "sofa_cardiovascular") == 1


# --- CNS, coagulation, liver, renal -------------------------------------------------


@pytest.mark.parametrize(
    ("gcs", "expected"),
    [
        (3, 4),
        (5, 4),
        (6, 3),
        (8, 3),
        (9, 3),
        (10, 2),
        (12, 2),
        (13, 1),
        (14, 1),
        (15, 0),
    ],
)
def test_cns_from_gcs(gcs, expected):
    assert score(sofa.cns, gcs) == expected


def test_gcs_8_scores_cns_3_and_gcs_15_scores_0():
    frame = tracks(
        [
            event(1.5, "patient_assessments", "gcs_total", 8),
            event(30.5, "patient_assessments", "gcs_total", 15),
        ]
    )
    assert at(frame, 2, "sofa_cns") == 3
    # Hour 31 still sees GCS 8 within its 24 h; hour 26 is the first that does not.
    assert at(frame, 25, "sofa_cns") == 3 and at(frame, 26, "sofa_cns") == 0
    assert at(frame, 31, "sofa_cns") == 0


@pytest.mark.parametrize(
    ("platelets", "expected"),
    [
        (19, 4),
        (20, 3),
        (45, 3),
        (50, 2),
        (99, 2),
        (100, 1),
        (149, 1),
        (150, 0),
        (NAN, NAN),
    ],
)
def test_coagulation_from_platelets(platelets, expected):
    assert score(sofa.coagulation, platelets) == pytest.approx(expected, nan_ok=True)


def test_platelets_45_score_coagulation_3():
    frame = tracks([event(3.2, "labs", "platelet_count", 45)])
    assert (
        at(frame, 4, "sofa_coagulation") == 3 and at(frame, 3, "sofa_coagulation") == 0
    )


@pytest.mark.parametrize(
    ("bilirubin", "expected"),
    [(1.1, 0), (1.2, 1), (1.9, 1), (2.0, 2), (2.5, 2), (6.0, 3), (11.9, 3), (12.0, 4)],
)
def test_liver_from_bilirubin(bilirubin, expected):
    assert score(sofa.liver, bilirubin) == expected


def test_bilirubin_2_5_scores_liver_2():
    assert (
        at(tracks([event(3.2, "labs", "bilirubin_total", 2.5)]), 4, "sofa_liver") == 2
    )


@pytest.mark.parametrize(
    ("creatinine", "urine_24h", "expected"),
    [
        (1.1, NAN, 0),
        (1.2, NAN, 1),
        (2.0, NAN, 2),
        (3.5, NAN, 3),
        (5.0, NAN, 4),
        (1.0, 450, 3),
        (1.0, 150, 4),
        (NAN, 600, 0),
        (NAN, NAN, NAN),
    ],
)
def test_renal_from_creatinine_and_24h_urine(creatinine, urine_24h, expected):
    assert score(sofa.renal, creatinine, urine_24h) == pytest.approx(
        expected, nan_ok=True
    )


def test_renal_urine_criterion_needs_22_to_30_hours_of_urine_charting():
    # 8 mL every hour from 1 h: 24 h windows cover 24 h from hour 24 on
    # (192 mL/day < 200 -> 4); before 22 h nothing is scored.
    rows = [event(h, "output", "indwelling_urinary_catheter", 8) for h in range(1, 30)]
    frame = tracks(rows, weight_kg=70)
    assert at(frame, 20, "sofa_renal") == 0
    assert at(frame, 24, "sofa_renal") == 4


# --- respiration ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("vent", "novent", "expected"),
    [
        (90, NAN, 4),
        (180, NAN, 3),
        (250, NAN, 2),
        (350, NAN, 1),
        (450, NAN, 0),
        (NAN, 90, 2),
        (NAN, 180, 2),
        (NAN, 350, 1),
        (NAN, 450, 0),
        (NAN, NAN, NAN),
    ],
)
def test_respiration_caps_unventilated_ratios_at_2(vent, novent, expected):
    assert score(sofa.respiration, vent, novent) == pytest.approx(expected, nan_ok=True)


def gas_at_2h(device):
    return [
        event(0.5, "respiratory_support", device),
        event(1.0, "respiratory_support", "fio2_set", 0.4),
        event(2.0, "labs", "po2_arterial", 72),
        event(3.5, "respiratory_support", device),
    ]


def test_pf_180_on_invasive_ventilation_scores_3_and_without_it_scores_2():
    ventilated = tracks(gas_at_2h("IMV"))
    assert at(ventilated, 2, "pf_ratio") == pytest.approx(180)
    assert at(ventilated, 2, "sofa_respiration") == 3
    not_ventilated = tracks(gas_at_2h("Nasal Cannula"))
    assert at(not_ventilated, 2, "sofa_respiration") == 2


# --- 24-hour worst and total ---------------------------------------------------------


def test_components_take_the_worst_of_24_hours_and_sum():
    frame = tracks(
        [
            event(2.5, "labs", "platelet_count", 45),  # coagulation 3 in hour 3
            event(10.5, "labs", "platelet_count", 120),  # coagulation 1 in hour 11
            event(5.5, "labs", "bilirubin_total", 2.5),  # liver 2 in hour 6
            norepi(0.05),  # cardiovascular 3 from hour 1
        ]
    )
    assert at(frame, 3, "sofa") == 3 + 3
    assert at(frame, 6, "sofa") == 3 + 3 + 2
    # Hour 26 no longer sees hour 3 (platelets 45), still sees hour 11 (120).
    assert at(frame, 26, "sofa_coagulation") == 3
    assert at(frame, 27, "sofa_coagulation") == 1
    assert at(frame, 27, "sofa") == 1 + 2 + 3
    assert at(frame, 34, "sofa") == 1 + 3
    assert at(frame, 35, "sofa") == 3


def test_a_stay_without_data_scores_0():
    frame = tracks([event(1, "vitals", "heart_rate", 80)])
    assert (frame["sofa"] == 0).all()
