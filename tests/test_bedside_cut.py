"""The one bedside cut (windows.selectors_context) through every context
builder on one hand-built stay whose rows sit on the edges: an event stamped
exactly at a window's end, an insulin start with its carrier line (same order,
same time), a later row of the same order, and a row of another order at the
same time. Each builder must give each window the same events as the
independent reference (tests.bedside_reference): releases as the client reads
them, agent contexts and endpoint payloads, and the SQL form."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from realicu_client import iterate_windows

from accounts.roles import Role
from agents.context import stay_contexts
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from tests.bedside_reference import BEDSIDE_STATIC_KEYS, BedsideReference
from tests.exports.helpers import make_oracle_run, oracle_payload
from tests.factories import make_admission, make_event, make_stay, make_user
from windows.models import Domain, EventKind
from windows.selectors_context import WindowDecisions, bedside_events
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db


INFUSION = {
    "domain": Domain.MED_CONTINUOUS,
    "source_table": "medication_admin_continuous",
}
INSULIN = {"category": "insulin", "name": "Insulin - Regular", "unit": "units/hour"}
SALINE = {"category": "sodium chloride", "name": "NaCl 0.9%", "unit": "mL/hour"}
HEPARIN = {"category": "heparin", "name": "Heparin Sodium", "unit": "units/hour"}
DECIDED = {"kind": EventKind.ACTION, "value_text": "start"}


def _infusion(admission, time, drug: dict, rate, order_id, **fields):
    """A row of a continuous infusion's order (a drug, or its carrier fluid)."""
    fields = INFUSION | drug | {"value_num": rate, "order_id": order_id} | fields
    return make_event(admission=admission, time=time, **fields)


@pytest.fixture
def edge_stay():
    stay = make_stay(admission=make_admission(), hours=6)
    windows = windows_build(stay=stay)
    assert len(windows) == 3
    first, second = windows[0], windows[1]
    a = stay.admission
    ten_min = timedelta(minutes=10)
    drug_time = second.start + ten_min
    rows = {
        "early": make_event(admission=a, time=first.start + timedelta(minutes=5)),
        # Stamped at the first window's end: it belongs to what follows.
        "at_first_end": make_event(admission=a, time=first.end),
        # The drug's start is the decision; its carrier is charted with it.
        "insulin": _infusion(a, drug_time, INSULIN | DECIDED, 2.0, "O-1"),
        "carrier": _infusion(a, drug_time, SALINE, 2.0, "O-1", value_text="start"),
        "carrier_later": _infusion(a, drug_time + ten_min, SALINE, 3.0, "O-1"),
        "other_order": _infusion(a, drug_time, HEPARIN, 500.0, "O-2"),
        "at_second_end": make_event(admission=a, time=second.end),
    }
    return stay, windows, rows


def _expected(stay, windows, rows):
    """What each window may see, by hand."""
    r = {name: e.pk for name, e in rows.items()}
    return {
        windows[0].pk: [r["early"]],
        # The carrier's later row is a charting of its own, not the decision.
        windows[1].pk: [
            r["early"],
            r["at_first_end"],
            r["other_order"],
            r["carrier_later"],
        ],
        windows[2].pk: [
            r["early"],
            r["at_first_end"],
            r["insulin"],
            r["carrier"],
            r["other_order"],
            r["carrier_later"],
            r["at_second_end"],
        ],
    }


def test_window_decisions_take_the_carrier_with_its_drug():
    decisions = WindowDecisions()
    decisions.add(time=1, event_id=10, is_action=False, order_id="")
    decisions.add(time=5, event_id=11, is_action=True, order_id="O-1")
    decisions.add(time=5, event_id=12, is_action=False, order_id="O-1")
    decisions.add(time=5, event_id=13, is_action=False, order_id="O-2")
    decisions.add(time=5, event_id=14, is_action=False, order_id="")
    decisions.add(time=6, event_id=15, is_action=False, order_id="O-1")
    decisions.add(time=9, event_id=16, is_action=True, order_id="")
    assert decisions.of_window(0, 9) == ([11], [12])
    # The end is exclusive; an action without an order is a decision alone.
    assert decisions.of_window(5, 10) == ([11, 16], [12])
    assert decisions.of_window(6, 9) == ([], [])


def test_the_reference_agrees_with_the_hand_count(edge_stay):
    stay, windows, rows = edge_stay
    reference = BedsideReference()
    for window, expected in _expected(stay, windows, rows).items():
        w = next(x for x in windows if x.pk == window)
        assert (
            reference.expected(admission_id=stay.admission_id, start=w.start, end=w.end)
            == expected
        )


def test_agent_contexts_and_endpoint_payloads(edge_stay):
    stay, windows, rows = edge_stay
    expected = _expected(stay, windows, rows)
    contexts = list(stay_contexts(stay, [w.pk for w in windows]))
    assert [c.window_id for c in contexts] == [w.pk for w in windows]
    for ctx in contexts:
        assert [e["event_id"] for e in ctx.events] == expected[ctx.window_id]
        payload = json.loads(json.dumps(ctx.payload()))
        assert [e["event_id"] for e in payload["events"]] == expected[ctx.window_id]
        assert set(payload["static"]) == BEDSIDE_STATIC_KEYS
        assert "disease_group" not in json.dumps(payload)


def test_sql_form(edge_stay):
    stay, windows, rows = edge_stay
    expected = _expected(stay, windows, rows)
    for window in windows:
        ids = list(
            bedside_events(window=window, exclude_window_actions=True).values_list(
                "id", flat=True
            )
        )
        assert sorted(ids) == sorted(expected[window.pk])


def test_release_read_by_the_client(edge_stay, settings, tmp_path):
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    stay, windows, rows = edge_stay
    expected = _expected(stay, windows, rows)
    admin = make_user(role=Role.ADMIN)
    run = make_oracle_run(
        admin=admin,
        labels={
            w: ("stable", oracle_payload(problems=["Hyperglycaemia"])) for w in windows
        },
    )
    release = release_build(
        release=release_create(user=admin, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    folder = settings.REALICU_RELEASES_DIR / release.directory
    seen = {w.window_id: w for w in iterate_windows(folder)}
    assert set(seen) == set(expected)
    for window_id, window in seen.items():
        assert [e["event_id"] for e in window.context] == expected[window_id]
        assert "hindsight" not in window.model_input()
        assert "disease_group" not in window.record
    second = seen[windows[1].pk].record
    assert second["window_action_event_ids"] == [rows["insulin"].pk]
    assert second["window_companion_event_ids"] == [rows["carrier"].pk]
