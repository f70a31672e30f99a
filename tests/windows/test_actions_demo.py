"""Actions (windows.actions) over the real CLIF demo, read against its source files
and against the row-by-row derivation the demo's events were stored with."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command

from windows.actions import DERIVED_DOMAINS, action_text_of, actions_derive
from windows.importers.clif import clif_import
from windows.models import Admission, Domain, Event, EventKind, Patient, Stay, Window
from windows.selectors_context import bedside_events, window_actions
from windows.windowing import windows_build_many

ACT, OBS = EventKind.ACTION.value, EventKind.OBSERVATION.value


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker, clif_demo_dir):
    with django_db_blocker.unblock():
        summary = clif_import(directory=clif_demo_dir)
        windows_build_many(stays=Stay.objects.order_by("pk"), seed=0)
        yield summary
        Patient.objects.all().delete()


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
