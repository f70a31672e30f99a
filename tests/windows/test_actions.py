"""An action is a clinical decision (windows.actions): hand-built trajectories for
each rule (respiratory support, infusions per order, CRRT, position, code status)."""

from __future__ import annotations

import pandas as pd

from windows.actions import action_text_of, derive_kinds
from windows.models import Domain, Event, EventKind

ACT, OBS = EventKind.ACTION.value, EventKind.OBSERVATION.value


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {
        "admission_id": 1,
        "kind": OBS,
        "value_num": float("nan"),
        "unit": "",
        "value_text": "",
        "order_id": "",
        "previous_value": "",
    }
    out = []
    for i, row in enumerate(rows):
        full = {**base, **row, "id": i + 1}
        full["time"] = pd.Timestamp("2150-01-01 00:00", tz="UTC") + pd.Timedelta(
            minutes=full.pop("minute")
        )
        out.append(full)
    return pd.DataFrame(out)


def _kinds(frame: pd.DataFrame) -> list[tuple[str, str]]:
    derived = derive_kinds(frame)
    return list(zip(derived["kind"], derived["previous_value"]))


def _setting(minute, category, value):
    return {
        "minute": minute,
        "domain": Domain.RESPIRATORY,
        "category": category,
        "value_num": value,
    }


def test_only_the_setting_that_changed_is_an_action_with_its_old_value():
    frame = _frame(
        [
            _setting(0, "fio2_set", 0.6),
            _setting(0, "peep_set", 8.0),
            _setting(60, "fio2_set", 0.6),
            _setting(60, "peep_set", 8.0),
            _setting(120, "fio2_set", 0.4),
            _setting(120, "peep_set", 8.0),
        ]
    )
    assert _kinds(frame) == [
        (ACT, ""),
        (ACT, ""),  # the first settings are set
        (OBS, ""),
        (OBS, ""),  # re-charted unchanged
        (ACT, "0.6"),
        (OBS, ""),  # FiO2 0.6 -> 0.4; PEEP charted beside it unchanged
    ]
    derived = derive_kinds(frame)
    event = Event(
        name="FiO2 set",
        category="fio2_set",
        domain=Domain.RESPIRATORY,
        value_num=0.4,
        unit="fraction",
        value_text="",
        previous_value=derived["previous_value"].iloc[4],
    )
    assert action_text_of(event) == "FiO2 0.6 -> 0.4 fraction"


def test_device_and_mode_changes_are_actions_and_a_first_room_air_is_not():
    frame = _frame(
        [
            {"minute": 0, "domain": Domain.RESPIRATORY, "category": "Room Air"},
            {"minute": 30, "domain": Domain.RESPIRATORY, "category": "Room Air"},
            {"minute": 60, "domain": Domain.RESPIRATORY, "category": "Nasal Cannula"},
            {"minute": 90, "domain": Domain.RESPIRATORY, "category": "IMV"},
            {
                "minute": 90,
                "domain": Domain.RESPIRATORY,
                "category": "mode:Assist Control-Volume Control",
            },
            {"minute": 120, "domain": Domain.RESPIRATORY, "category": "IMV"},
            {
                "minute": 120,
                "domain": Domain.RESPIRATORY,
                "category": "mode:Pressure Support/CPAP",
            },
            {
                "minute": 120,
                "domain": Domain.RESPIRATORY,
                "category": "peep_obs",
                "value_num": 7.0,
            },
        ]
    )
    assert _kinds(frame) == [
        (OBS, ""),
        (OBS, ""),
        (ACT, "Room Air"),
        (ACT, "Nasal Cannula"),
        (ACT, ""),
        (OBS, ""),
        (ACT, "Assist Control-Volume Control"),
        (OBS, ""),
    ]


def _mode(minute, category, name=""):
    return {
        "minute": minute,
        "domain": Domain.RESPIRATORY,
        "category": "mode:" + category,
        "name": name,
    }


def test_a_ventilator_resumed_from_standby_is_an_action():
    frame = _frame(
        [
            _mode(0, "", "Standby"),  # a first Standby starts nothing
            _mode(60, "Assist Control-Volume Control", "CMV/ASSIST"),
            _mode(120, "", "Standby"),
            _mode(180, "", "Standby"),
            _mode(240, "Assist Control-Volume Control", "CMV/ASSIST"),
        ]
    )
    assert _kinds(frame) == [
        (OBS, ""),
        (ACT, "Standby"),
        (ACT, "Assist Control-Volume Control"),  # ventilation paused
        (OBS, ""),
        (ACT, "Standby"),  # and resumed: a decision, as the first one
    ]


def test_settings_are_followed_per_admission():
    frame = _frame(
        [
            _setting(0, "peep_set", 5.0),
            {**_setting(10, "peep_set", 5.0), "admission_id": 2},
            _setting(20, "peep_set", 5.0),
        ]
    )
    assert _kinds(frame) == [(ACT, ""), (ACT, ""), (OBS, "")]


def _mar(minute, action, rate, order, drug="norepinephrine"):
    return {
        "minute": minute,
        "domain": Domain.MED_CONTINUOUS,
        "category": drug,
        "value_text": action,
        "value_num": rate,
        "unit": "mcg/kg/min",
        "order_id": order,
    }


def test_a_new_bag_at_the_same_rate_is_no_decision_and_the_old_bags_stop_is_none():
    frame = _frame(
        [
            _mar(0, "start", 0.30, "A"),
            _mar(60, "dose_change", 0.397, "A"),
            _mar(
                120, "start", 0.400, "B"
            ),  # new bag, same rate within conversion noise
            _mar(130, "stop", 0.0, "A"),  # the old bag stops; B keeps running
            _mar(300, "dose_change", 0.30, "B"),
            _mar(400, "stop", 0.0, "B"),
        ]
    )
    assert _kinds(frame) == [
        (ACT, ""),
        (ACT, "0.3"),
        (OBS, ""),
        (OBS, ""),
        (ACT, "0.4"),
        (ACT, ""),
    ]


def test_a_new_order_at_another_rate_is_a_rate_change_and_pause_restart_are_actions():
    frame = _frame(
        [
            _mar(0, "start", 0.10, "A"),
            _mar(30, "start", 0.20, "B"),
            _mar(40, "stop", 0.0, "A"),
            _mar(60, "stop", 0.0, "B"),  # paused
            _mar(60, "start", 0.20, "B"),  # restarted at the same time: keeps running
            _mar(90, "stop", 0.0, "B"),
            _mar(120, "start", 0.05, "B"),
            _mar(125, "going", 0.05, "B"),
        ]
    )
    kinds = _kinds(frame)
    assert kinds[0] == (ACT, "")
    assert kinds[1] == (ACT, "0.1")
    assert kinds[2] == (OBS, "")  # A stops under the higher-rate B
    assert kinds[3:5] == [(OBS, ""), (OBS, "")]  # stop + restart at one time
    assert kinds[5] == (ACT, "")  # stop
    assert kinds[6] == (ACT, "")  # start again
    assert kinds[7] == (OBS, "")  # a "going" confirmation


def test_drugs_are_followed_separately_and_a_bolus_is_an_action():
    frame = _frame(
        [
            _mar(0, "start", 0.1, "A"),
            _mar(10, "start", 50.0, "P", drug="propofol"),
            _mar(20, "bolus", 20.0, "P", drug="propofol"),
            _mar(30, "going", 0.1, "A"),
        ]
    )
    assert [k for k, _ in _kinds(frame)] == [ACT, ACT, ACT, OBS]


def test_a_carrier_fluid_is_never_an_action_whatever_other_orders_of_it_do():
    d5w = "dextrose_in_water_d5w"
    frame = _frame(
        [
            _mar(0, "start", 100.0, "F", drug=d5w),  # a maintenance D5W, alone
            _mar(10, "start", 0.3, "C", drug="nitroglycerin"),
            _mar(10, "start", 3.5, "C", drug=d5w),  # carries the nitroglycerin
            _mar(20, "dose_change", 1.0, "C", drug="nitroglycerin"),
            _mar(20, "dose_change", 11.7, "C", drug=d5w),
            _mar(60, "stop", 0.0, "F", drug=d5w),  # the maintenance D5W stops
            _mar(70, "dose_change", 0.2, "C", drug="nitroglycerin"),
            _mar(70, "dose_change", 2.3, "C", drug=d5w),
            _mar(90, "stop", 0.0, "C", drug="nitroglycerin"),
            _mar(90, "stop", 0.0, "C", drug=d5w),
        ]
    )
    assert _kinds(frame) == [
        (ACT, ""),
        (ACT, ""),
        (OBS, ""),
        (ACT, "0.3"),
        (OBS, ""),
        (ACT, ""),  # the maintenance fluid's own stop is a decision
        (ACT, "1"),
        (OBS, ""),  # the carrier follows its drug, not the other D5W order
        (ACT, ""),
        (OBS, ""),
    ]


def test_two_concurrent_orders_of_one_drug_are_two_infusions():
    nacl = "sodium chloride"
    frame = _frame(
        [
            _mar(0, "start", 50.0, "A", drug=nacl),
            _mar(60, "start", 10.0, "B", drug=nacl),  # a second line, not a bag
            _mar(120, "dose_change", 40.0, "A", drug=nacl),
            _mar(180, "dose_change", 20.0, "B", drug=nacl),
            _mar(600, "stop", 0.0, "A", drug=nacl),
        ]
    )
    assert _kinds(frame) == [
        (ACT, ""),
        (ACT, ""),
        (ACT, "50"),
        (ACT, "10"),  # the lower-rate infusion's titration is a decision too
        (ACT, ""),
    ]


def test_timed_mimic_procedures_in_derived_domains_are_actions():
    rows = [
        (0, Domain.RESPIRATORY, "intubation"),  # 224385
        (0, Domain.RESPIRATORY, "IMV"),
        (30, Domain.RESPIRATORY, "IMV"),
        (600, Domain.RESPIRATORY, "extubation"),  # 227194
        (700, Domain.RESPIRATORY, "tracheostomy"),  # 225448 / 226237
        (800, Domain.CRRT, "crrt"),  # 225802
        (900, Domain.RESPIRATORY, "invasive_ventilation"),  # a duration (225792)
    ]
    frame = _frame(
        [
            {
                "minute": m,
                "domain": d,
                "category": c,
                # derived as observations by an earlier release
                "kind": OBS,
                "source_table": "procedureevents" if c != "IMV" else "chartevents",
            }
            for m, d, c in rows
        ]
    )
    assert [k for k, _ in _kinds(frame)] == [ACT, ACT, OBS, ACT, ACT, ACT, OBS]


def test_a_crrt_start_is_one_action_and_each_changed_setting_another():
    crrt = Domain.CRRT
    frame = _frame(
        [
            {"minute": 0, "domain": crrt, "category": "crrt:cvvhdf"},
            {
                "minute": 0,
                "domain": crrt,
                "category": "blood_flow_rate",
                "value_num": 12000.0,
            },
            {"minute": 60, "domain": crrt, "category": "crrt:cvvhdf"},
            {
                "minute": 60,
                "domain": crrt,
                "category": "blood_flow_rate",
                "value_num": 12000.0,
            },
            {
                "minute": 60,
                "domain": crrt,
                "category": "ultrafiltration_out",
                "value_num": 90.0,
            },
            {
                "minute": 120,
                "domain": crrt,
                "category": "blood_flow_rate",
                "value_num": 15000.0,
            },
        ]
    )
    assert _kinds(frame) == [
        (ACT, ""),  # the start
        (OBS, ""),  # its prescription, part of the start
        (OBS, ""),
        (OBS, ""),
        (OBS, ""),  # the ultrafiltrate is a measurement
        (ACT, "12000"),
    ]


def _crrt(minute, category, value=float("nan")):
    return {
        "minute": minute,
        "domain": Domain.CRRT,
        "category": category,
        "value_num": value,
    }


def test_crrt_after_a_long_silence_starts_again_a_short_one_does_not():
    hours = 60
    frame = _frame(
        [
            _crrt(0, "blood_flow_rate", 12000.0),  # charted before its mode
            _crrt(0, "dialysate_flow_rate", 600.0),
            _crrt(40, "crrt:cvvhdf"),
            _crrt(60, "dialysate_flow_rate", 800.0),
            _crrt(60, "pre_filter_replacement_fluid_rate", 1400.0),
            _crrt(10 * hours, "crrt:cvvhdf"),  # 10 h unrecorded, same circuit
            _crrt(10 * hours, "dialysate_flow_rate", 800.0),
            _crrt(40 * hours, "crrt:cvvh"),  # restarted after a 30 h pause
            _crrt(40 * hours, "dialysate_flow_rate", 0.0),
            _crrt(41 * hours, "crrt:cvvhdf"),  # a switch of mode
            _crrt(80 * hours, "blood_flow_rate", 9000.0),  # charted without a mode
            _crrt(80 * hours, "dialysate_flow_rate", 500.0),
        ]
    )
    assert _kinds(frame) == [
        (OBS, ""),
        (OBS, ""),
        (ACT, ""),
        (ACT, "600"),
        (OBS, ""),
        (OBS, ""),
        (OBS, ""),
        (ACT, ""),
        (OBS, ""),
        (ACT, "cvvh"),
        (ACT, ""),
        (OBS, ""),
    ]


def test_proning_and_unproning_are_actions_other_turns_are_not():
    frame = _frame(
        [
            {"minute": m, "domain": Domain.POSITION, "category": c}
            for m, c in [
                (0, "semi_recumbent"),
                (60, "prone"),
                (90, "prone"),
                (180, "semi_recumbent"),
                (240, "other"),
            ]
        ]
    )
    assert [k for k, _ in _kinds(frame)] == [OBS, ACT, OBS, ACT, OBS]


def test_a_code_status_is_an_action_when_it_changes_not_at_its_first_charting():
    frame = _frame(
        [
            {"minute": m, "domain": Domain.CODE_STATUS, "category": c}
            for m, c in [(0, "Full"), (600, "Full"), (900, "DNR")]
        ]
    )
    assert _kinds(frame) == [(OBS, ""), (OBS, ""), (ACT, "Full")]


def test_other_domains_keep_their_kind():
    frame = _frame(
        [
            {
                "minute": 0,
                "domain": Domain.MED_INTERMITTENT,
                "category": "cefepime",
                "kind": ACT,
            },
            {
                "minute": 0,
                "domain": Domain.VITALS,
                "category": "heart_rate",
                "value_num": 90.0,
            },
        ]
    )
    assert [k for k, _ in _kinds(frame)] == [ACT, OBS]
