"""Vasoactive rates at the hour end and the norepinephrine-equivalent dose
(CLINICAL_CONCEPTS.md sections 0 and 5). Pure pandas, no database."""

import numpy as np
import pytest

from tests.windows.concept_tracks import at, column, tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(12)

MED = "medication_admin_continuous"


def clif(hours, drug, dose, action, unit="mcg/kg/min"):
    return event(hours, MED, drug, dose, unit=unit, text=action, kind="action")


def mimic(start, end, drug, rate, unit="mcg/kg/min"):
    return event(
        start,
        MED,
        drug,
        rate,
        unit=unit,
        text="ChangeDose/Rate",
        end_hours=end,
        kind="action",
    )


CLIF_NOREPI = [
    clif(1.5, "norepinephrine", 0.1, "start"),
    clif(3.5, "norepinephrine", 0.2, "dose_change"),
    clif(5.0, "norepinephrine", 0, "stop"),
]


def test_clif_rate_holds_from_start_until_the_next_charting_judged_at_hour_end():
    frame = tracks(CLIF_NOREPI)
    # Hour 1 ends before the start; the stop at exactly 5 h still counts for hour 5
    # (start < H <= end).
    assert column(frame, "norepinephrine", [1, 2, 3, 4, 5, 6]) == [
        0,
        0.1,
        0.1,
        0.2,
        0.2,
        0,
    ]


def test_clif_point_events_and_mimic_intervals_give_the_same_track():
    point = tracks(CLIF_NOREPI)
    interval = tracks(
        [
            mimic(1.5, 3.5, "norepinephrine", 0.1),
            mimic(3.5, 5.0, "norepinephrine", 0.2),
        ]
    )
    for name in ("norepinephrine", "ned", "sofa_cardiovascular"):
        assert point[name].tolist() == interval[name].tolist()


def test_a_stop_and_restart_charted_at_one_time_keep_the_infusion_running():
    frame = tracks(
        [
            clif(1.5, "norepinephrine", 0.1, "start"),
            clif(
                3.0, "norepinephrine", 0.15, "start"
            ),  # new bag, listed before its stop
            clif(3.0, "norepinephrine", 0, "stop"),
            clif(6.0, "norepinephrine", 0, "stop"),
        ]
    )
    assert column(frame, "norepinephrine", [2, 3, 4, 6, 7]) == [0.1, 0.1, 0.15, 0.15, 0]


def test_a_rate_without_a_stop_holds_until_icu_discharge():
    frame = tracks([clif(1.5, "epinephrine", 0.05, "start")], hours=6)
    assert column(frame, "epinephrine", [1, 2, 6]) == [0, 0.05, 0.05]


def test_a_dose_change_to_zero_ends_the_infusion():
    frame = tracks(
        [clif(0.5, "dopamine", 5, "start"), clif(2.5, "dopamine", 0, "dose_change")]
    )
    assert column(frame, "dopamine", [1, 2, 3]) == [5, 5, 0]


def test_vasopressin_0_04_units_per_minute_is_2_4_units_per_hour_and_ned_0_1():
    frame = tracks([mimic(0.5, 4, "vasopressin", 0.04, unit="units/min")])
    assert at(frame, 2, "vasopressin") == pytest.approx(2.4)
    assert at(frame, 2, "ned") == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("drug", "rate", "unit", "ned"),
    [
        ("norepinephrine", 0.1, "mcg/kg/min", 0.1),
        ("epinephrine", 0.1, "mcg/kg/min", 0.1),
        ("phenylephrine", 1.0, "mcg/kg/min", 0.1),
        ("dopamine", 10.0, "mcg/kg/min", 0.1),
        ("vasopressin", 2.4, "units/hour", 0.1),
        ("dobutamine", 5.0, "mcg/kg/min", 0.0),
        ("milrinone", 0.5, "mcg/kg/min", 0.0),
    ],
)
def test_norepinephrine_equivalents_follow_goradia(drug, rate, unit, ned):
    frame = tracks([clif(0.5, drug, rate, "start", unit=unit)])
    assert at(frame, 1, drug) == pytest.approx(rate)
    assert at(frame, 1, "ned") == pytest.approx(ned)


def test_ned_adds_the_drugs_running_together():
    frame = tracks(
        [
            clif(0.5, "norepinephrine", 0.05, "start"),
            clif(0.5, "epinephrine", 0.02, "start"),
            clif(0.5, "phenylephrine", 0.5, "start"),
            clif(0.5, "vasopressin", 0.03, "start", unit="units/min"),
        ]
    )
    # 0.05 + 0.02 + 0.5/10 + 1.8 * 2.5/60
    assert at(frame, 1, "ned") == pytest.approx(0.195)


def test_a_rate_per_minute_without_kg_is_divided_by_the_weight_given():
    rows = [clif(0.5, "phenylephrine", 80, "start", unit="mcg/min")]
    assert at(tracks(rows, weight_kg=80), 1, "phenylephrine") == pytest.approx(1.0)
    assert at(tracks(rows, weight_kg=80), 1, "ned") == pytest.approx(0.1)


def test_a_rate_per_minute_without_kg_uses_the_charted_weight_else_is_unknown():
    rows = [clif(0.5, "norepinephrine", 8, "start", unit="mcg/min")]
    charted = tracks(rows + [event(-1, "vitals", "weight_kg", 100)])
    assert at(charted, 1, "norepinephrine") == pytest.approx(0.08)
    assert charted.attrs["weight_kg"] == 100
    unknown = tracks(rows)
    assert np.isnan(at(unknown, 1, "norepinephrine")) and np.isnan(
        at(unknown, 1, "ned")
    )
    assert at(unknown, 0, "norepinephrine") == 0  # before the start: not running


@pytest.mark.parametrize(
    ("dose", "unit", "expected"),
    [
        (6.0, "mcg/kg/hr", 0.1),
        (0.0001, "mg/kg/min", 0.1),
        (600.0, "mcg/hr", 0.1),  # with 100 kg
        (100.0, "ng/kg/min", 0.1),
        (0.1, "furlongs", np.nan),
    ],
)
def test_rate_units_are_converted_to_mcg_per_kg_per_min(dose, unit, expected):
    frame = tracks([clif(0.5, "epinephrine", dose, "start", unit=unit)], weight_kg=100)
    assert at(frame, 1, "epinephrine") == pytest.approx(expected, nan_ok=True)


def test_concurrent_interval_records_of_one_drug_take_the_highest_rate():
    frame = tracks(
        [
            mimic(0.5, 6, "norepinephrine", 0.05),
            mimic(2.5, 4, "norepinephrine", 0.2),
        ]
    )
    assert column(frame, "norepinephrine", [2, 3, 4, 5]) == [0.05, 0.2, 0.2, 0.05]


def order(hours, drug, dose, action, order_id, unit="mcg/kg/min"):
    return event(
        hours, MED, drug, dose, unit=unit, text=action, kind="action", order_id=order_id
    )


# Orders of one drug: (hours, rate, action, order id) each, and the track's
# value at the end of each hour named.
ORDER_CASES = {
    "the old bag's stop does not end a new bag already running": (
        "norepinephrine",
        [
            (1.5, 0.2, "start", "A"),
            (3.2, 0.4, "start", "B"),
            (3.4, 0, "stop", "A"),
            (6.5, 0.3, "dose_change", "B"),
            (8.0, 0, "stop", "B"),
        ],
        {2: 0.2, 3: 0.2, 4: 0.4, 5: 0.4, 6: 0.4, 7: 0.3, 8: 0.3, 9: 0},
    ),
    "concurrent orders take the highest rate until each stops": (
        "norepinephrine",
        [
            (0.5, 0.3, "start", "A"),
            (1.5, 0.1, "start", "B"),
            (3.5, 0, "stop", "A"),
            (5.5, 0, "stop", "B"),
        ],
        {1: 0.3, 2: 0.3, 3: 0.3, 4: 0.1, 5: 0.1, 6: 0},
    ),
    "a stop and the next order's start at one time hand over": (
        "epinephrine",
        [
            (0.5, 0.05, "start", "A"),
            (2.0, 0.08, "start", "B"),
            (2.0, 0, "stop", "A"),
            (4.0, 0, "stop", "B"),
        ],
        {1: 0.05, 2: 0.05, 3: 0.08, 4: 0.08, 5: 0},
    ),
}


@pytest.mark.parametrize(
    ("drug", "orders", "expected"), list(ORDER_CASES.values()), ids=list(ORDER_CASES)
)
def test_each_order_of_a_drug_keeps_its_own_state(drug, orders, expected):
    frame = tracks(
        [order(h, drug, rate, action, id_) for h, rate, action, id_ in orders]
    )
    assert column(frame, drug, list(expected)) == list(expected.values())


def test_records_without_an_order_id_keep_one_state_per_drug():
    # The old bag's records (ORDER_CASES) but without order ids: A's stop at
    # 3.4 h ends the drug, as it did before order ids existed.
    frame = tracks(
        [
            clif(1.5, "norepinephrine", 0.2, "start"),
            clif(3.2, "norepinephrine", 0.4, "start"),
            clif(3.4, "norepinephrine", 0, "stop"),
        ]
    )
    assert column(frame, "norepinephrine", [2, 3, 4, 5]) == [0.2, 0.2, 0, 0]
