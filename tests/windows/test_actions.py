"""An action is a clinical decision (windows.actions): hand-built trajectories for
each rule, then the real CLIF demo read against its source files."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command

from windows.actions import (
    DERIVED_DOMAINS,
    action_text_of,
    actions_derive,
    derive_kinds,
)
from windows.importers.clif import clif_import
from windows.models import Admission, Domain, Event, EventKind, Patient, Stay, Window
from windows.selectors_context import bedside_events, window_actions
from windows.windowing import windows_build_many

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


# --- respiratory support ----------------------------------------------------------


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


# --- infusions per order ----------------------------------------------------------


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


# --- CRRT, position, code status --------------------------------------------------


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


@pytest.mark.django_db
def test_no_first_code_status_of_a_demo_admission_is_an_action(demo):
    codes = Event.objects.filter(domain=Domain.CODE_STATUS).order_by(
        "admission_id", "time", "pk"
    )
    first = {}
    for event in codes:
        first.setdefault(event.admission_id, event)
    assert len(first) > 10
    assert {e.kind for e in first.values()} == {OBS}
    # every later charting that differs from the one before is an action
    changes = codes.filter(kind=EventKind.ACTION)
    assert changes.exists() and not changes.filter(previous_value="").exists()


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


# --- the real CLIF demo ------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker, clif_demo_dir):
    with django_db_blocker.unblock():
        summary = clif_import(directory=clif_demo_dir)
        windows_build_many(stays=Stay.objects.order_by("pk"), seed=0)
        yield summary
        Patient.objects.all().delete()


# Every derived-domain event of the demo as the row-by-row derivation before
# issue 35 left it: (source_table, source_key, kind, previous_value), written by
# an import of the demo with that code (windows/actions.py at d8cca22).
DEMO_DERIVED = Path(__file__).parent / "data" / "clif_demo_actions.json.gz"


@pytest.mark.django_db
def test_every_demo_event_keeps_the_kind_and_previous_state_of_the_row_by_row_code(
    demo,
):
    with gzip.open(DEMO_DERIVED, "rt") as stored:
        expected = {tuple(row) for row in json.load(stored)}
    derived = set(
        Event.objects.filter(domain__in=DERIVED_DOMAINS)
        .exclude(kind__in=(EventKind.OUTCOME, EventKind.CODED))
        .values_list("source_table", "source_key", "kind", "previous_value")
    )
    assert len(expected) == 40902
    assert sum(1 for row in expected if row[2] == ACT) == 8131
    assert derived - expected == set()
    assert expected - derived == set()


def _previous_equal(frame: pd.DataFrame) -> pd.Series:
    """Independent check: a charting whose value equals the same item's previous
    charting in the admission (numbers for settings, the category otherwise)."""
    frame = frame.sort_values(["admission_id", "time", "id"], kind="mergesort")
    is_set = frame["category"].str.endswith("_set")
    is_mode = frame["category"].str.startswith("mode:")
    state = (
        frame["value_num"]
        .astype(object)
        .where(is_set, frame["category"].str.split(":").str[-1])
    )
    item = frame["category"].where(is_set, is_mode.map({True: "mode", False: "device"}))
    previous = state.groupby([frame["admission_id"], item]).shift(1)
    return state.eq(previous)


@pytest.mark.django_db
def test_no_re_charted_unchanged_respiratory_item_is_an_action_over_the_demo(demo):
    rows = pd.DataFrame.from_records(
        Event.objects.filter(domain=Domain.RESPIRATORY)
        .exclude(category__endswith="_obs")
        .values("id", "admission_id", "time", "category", "value_num", "kind")
    )
    unchanged = _previous_equal(rows)
    kinds = rows.set_index("id")["kind"]
    ids = rows.loc[unchanged.index[unchanged.to_numpy()], "id"]
    assert len(ids) > 5000  # the demo re-charts its respiratory support hourly or so
    assert (kinds.loc[ids] == OBS).all()
    # and every change is an action, with the value it changed from
    changed_settings = Event.objects.filter(
        domain=Domain.RESPIRATORY, category__endswith="_set", kind=EventKind.ACTION
    ).exclude(previous_value="")
    assert changed_settings.count() > 300
    sample = changed_settings.order_by("pk").first()
    before = (
        Event.objects.filter(
            admission_id=sample.admission_id,
            category=sample.category,
            time__lt=sample.time,
        )
        .order_by("-time", "-pk")
        .first()
    )
    assert float(sample.previous_value) == pytest.approx(before.value_num, rel=1e-3)
    assert before.value_num != pytest.approx(sample.value_num)


@pytest.mark.django_db
def test_window_5_of_the_first_stay_offers_its_nitroglycerin_and_its_peep_change(demo):
    stay = Stay.objects.get(source_id="20044587:678")
    window = Window.objects.get(stay=stay, index=5)
    texts = [action_text_of(e) for e in window_actions(window=window)]
    assert "start Nitroglycerin 0.5 mcg/kg/min" in texts
    assert "PEEP 5 -> 10 cmH2O" in texts
    # the ventilator settings charted beside the PEEP change did not change
    assert not [
        e
        for e in window_actions(window=window)
        if e.domain == Domain.RESPIRATORY and e.category != "peep_set"
    ]
    assert window.action_count == len(texts)


@pytest.mark.django_db
def test_a_norepinephrine_bag_change_is_no_decision_in_hospitalization_22987108(demo):
    adm = Admission.objects.get(source_id="22987108")
    ne = Event.objects.filter(admission=adm, category="norepinephrine")
    # 12:10 order 124411 starts at 0.40 while order 3745719 runs at 0.398;
    # 12:20 order 3745719 stops: the drug keeps running at 0.40.
    new_bag = ne.get(order_id="124411", value_text="start")
    old_stop = ne.get(order_id="3745719", value_text="stop")
    assert (new_bag.kind, old_stop.kind) == (OBS, OBS)
    # its titrations are decisions, with the rate they changed from
    change = ne.get(order_id="124411", time__hour=17, time__minute=13)
    assert change.kind == ACT and float(change.previous_value) == pytest.approx(
        0.4, abs=0.01
    )
    assert action_text_of(change).startswith("Norepinephrine 0.4 -> 0.2996")


@pytest.mark.django_db
def test_carrier_fluids_of_the_demo_are_observations_and_a_second_line_is_a_start(
    demo,
):
    adm = Admission.objects.get(source_id="20044587")
    # D5W carrying nitroglycerin (order 790396): its changes at 22:29, 22:56 and
    # 23:13 follow the drug, though another D5W order stopped at 23:03.
    carrier = Event.objects.filter(
        admission=adm, order_id="790396", category="dextrose_in_water_d5w"
    )
    assert carrier.count() == 5
    assert set(carrier.values_list("kind", flat=True)) == {OBS}
    assert (
        Event.objects.get(
            admission=adm, order_id="790396", category="nitroglycerin", time__minute=13
        ).kind
        == ACT
    )
    # NaCl 10 mL/h started 2137-02-26 09:10 beside the NaCl carrying
    # norepinephrine: a second infusion of its own.
    second = Event.objects.get(
        admission__source_id="20214994", order_id="2610492", value_text="start"
    )
    assert second.kind == ACT and action_text_of(second).startswith("start")


@pytest.mark.django_db
def test_a_demo_crrt_start_is_one_action_in_hospitalization_22987108(demo):
    crrt = Event.objects.filter(
        admission__source_id="22987108", domain=Domain.CRRT, kind=EventKind.ACTION
    )
    # CVVHDF started 2146-06-23 02:10 with its four settings; a 10 h gap in
    # its charting that evening is no new start, and the prescription never
    # changed.
    assert list(crrt.values_list("category", flat=True)) == ["crrt:cvvhdf"]
    # Over the demo: 5 first starts, 4 restarts after pauses of 21 h to 2 days
    # (one charted without its mode), 9 changed settings; before, every start
    # counted its four settings too (34 actions).
    actions = Event.objects.filter(domain=Domain.CRRT, kind=EventKind.ACTION)
    assert actions.filter(category__startswith="crrt:").count() == 8
    assert actions.exclude(previous_value="").count() == 9
    assert actions.count() == 18


@pytest.mark.django_db
def test_the_demo_ventilator_resumed_from_standby_in_hospitalization_21027282(demo):
    modes = Event.objects.filter(
        admission__source_id="21027282",
        domain=Domain.RESPIRATORY,
        category__startswith="mode:",
        time__date="2133-12-20",
        time__hour__in=(17, 21),
    ).order_by("time")
    assert [(e.name, e.kind, e.previous_value) for e in modes] == [
        ("Standby", ACT, "Pressure Support/CPAP"),
        ("CPAP/PSV", ACT, "Standby"),
    ]
    assert action_text_of(modes[1]) == (
        "Ventilator mode: Standby -> Pressure Support/CPAP (CPAP/PSV)"
    )


@pytest.mark.django_db
def test_billing_codes_are_coded_records_never_actions_nor_at_the_bedside(demo):
    procedures = Event.objects.filter(source_table="clif_patient_procedures")
    assert procedures.count() == 556
    assert set(procedures.values_list("kind", flat=True)) == {EventKind.CODED}
    stay = Stay.objects.get(admission__source_id="22987108")
    last = Window.objects.filter(stay=stay).order_by("-index").first()
    assert not bedside_events(window=last).filter(kind=EventKind.CODED).exists()
    assert procedures.filter(admission=stay.admission).exists()


@pytest.mark.django_db
def test_the_import_summary_counts_the_decisions(demo):
    assert (
        demo.actions[Domain.RESPIRATORY]
        == Event.objects.filter(
            domain=Domain.RESPIRATORY, kind=EventKind.ACTION
        ).count()
    )
    assert "actions derived by windows.actions" in str(demo)


@pytest.mark.django_db
def test_rederiving_changes_nothing_and_rebuild_reports_the_figures(demo):
    kinds = dict(Event.objects.values_list("pk", "kind"))
    actions_derive(admission_ids=Admission.objects.values_list("pk", flat=True))
    assert dict(Event.objects.values_list("pk", "kind")) == kinds
    # an older import: every re-charted setting an action, billing codes actions
    Event.objects.filter(domain=Domain.RESPIRATORY, category__endswith="_set").update(
        kind=EventKind.ACTION
    )
    Event.objects.filter(source_table="clif_patient_procedures").update(
        kind=EventKind.ACTION
    )
    orders = dict(Event.objects.exclude(order_id="").values_list("pk", "order_id"))
    Event.objects.update(order_id="")
    windows_build_many(stays=Stay.objects.order_by("pk"), seed=0)
    out = io.StringIO()
    call_command(
        "rebuild_actions", clif_orders="demo", stdout=out, stderr=io.StringIO()
    )
    report = out.getvalue()
    assert f"{len(orders)} CLIF medication events given their order id" in report
    assert (
        dict(Event.objects.exclude(order_id="").values_list("pk", "order_id")) == orders
    )
    assert "556 coded records" in report
    assert "respiratory_support" in report and "actions per window, mean" in report
    assert dict(Event.objects.values_list("pk", "kind")) == kinds
    window = Window.objects.get(stay__source_id="20044587:678", index=5)
    assert window.action_count == window_actions(window=window).count()
