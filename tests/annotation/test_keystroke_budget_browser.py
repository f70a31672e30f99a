"""The keystroke budget of labelling one window (issue 13): a physician labels a
demo-like window with the keyboard only: the status with evidence, two acute
problems with evidence, ratings of the window's eight recorded critical actions,
one added action and one red flag, each with evidence, and submits. Command keys
and typed characters are counted apart and printed; the goal is 40 command keys
or fewer, and the submitted label holds exactly what was typed and cited."""

import pytest

from accounts.roles import Role
from annotation.models import Assignment, AssignmentState, Label
from annotation.services import campaign_create
from tests.annotation.conftest import make_role_user
from tests.browser import chromium, sign_in
from tests.factories import drip, event_at, lab, make_admission, make_stay, vitals
from windows.models import Domain, EventKind, Window
from windows.tracks import stay_tracks_get
from windows.windowing import windows_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FORM = "[data-label-form]"
BUDGET = 40
WINDOW_INDEX = 5  # one every 2 h: 10.0 h to 10.5 h since ICU admission


def _respiratory(stay, minute, category, name, value, unit):
    """A ventilator setting ``minute`` minutes into the window's first hour."""
    return event_at(
        stay,
        10 + minute / 60,
        kind=EventKind.ACTION,
        domain=Domain.RESPIRATORY,
        category=category,
        name=name,
        value_num=value,
        unit=unit,
        source_table="respiratory_support",
    )


@pytest.fixture
def demo_window(db):
    """A 24 h stay shaped like a demo window's surroundings: four vitals every
    15 min and hourly temperatures (about 110 rows in the window's 6.5 h), labs
    twice, sedation and insulin before the window; in the window seven
    ventilator setting changes and a norepinephrine start (the eight critical
    actions to rate), and an SpO2 of 88 and a MAP of 58 among the vitals."""
    stay = make_stay(admission=make_admission(), hours=24)
    for category, name, value, unit, every_min in (
        ("heart_rate", "Heart rate", 96.0, "bpm", 15),
        ("spo2", "SpO2", 95.0, "%", 15),
        ("respiratory_rate", "Respiratory rate", 22.0, "/min", 15),
        ("map", "Mean arterial pressure", 71.0, "mmHg", 15),
        ("temp_c", "Temperature", 38.1, "°C", 60),
    ):
        vitals(
            stay,
            category,
            value,
            start_h=0,
            end_h=24,
            every_min=every_min,
            unit=unit,
            name=name,
        )
    spo2 = event_at(
        stay, 10 + 20 / 60, category="spo2", name="SpO2", value_num=88.0, unit="%"
    )
    low_map = event_at(
        stay,
        10 + 22 / 60,
        category="map",
        name="Mean arterial pressure",
        value_num=58.0,
        unit="mmHg",
    )
    labs = {}
    for hours, lactate in ((5, 3.1), (9, 4.2)):
        labs[lactate] = lab(stay, "lactate", lactate, hours, "mmol/L", name="Lactate")
        for category, name, value, unit in (
            ("creatinine", "Creatinine", 1.9, "mg/dL"),
            ("potassium", "Potassium", 4.8, "mmol/L"),
            ("hemoglobin", "Hemoglobin", 9.1, "g/dL"),
            ("wbc", "WBC", 16.2, "10^3/uL"),
        ):
            lab(stay, category, value, hours, unit, name=name)
    drip(stay, "propofol", 30, 5.5, text="")
    drip(stay, "insulin", 4, 8.0, text="", unit="units/hr")
    actions = [
        _respiratory(stay, 1, "device_category", "IMV", None, ""),
        _respiratory(stay, 2, "mode_category", "Assist control", None, ""),
        _respiratory(stay, 3, "fio2_set", "FiO2 set", 60, "%"),
        _respiratory(stay, 4, "peep_set", "PEEP set", 10, "cmH2O"),
        _respiratory(stay, 5, "tidal_volume_set", "VT set", 420, "mL"),
        _respiratory(stay, 6, "resp_rate_set", "RR set", 24, "/min"),
        _respiratory(stay, 7, "pressure_support_set", "PS", 8, ""),
        drip(stay, "norepinephrine", 0.08, 10 + 13 / 60, text=""),
    ]
    windows_build(stay=stay)
    window = Window.objects.get(stay=stay, index=WINDOW_INDEX)
    Window.objects.filter(pk=window.pk).update(sampled_gold=True)
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    campaign = campaign_create(
        admin=make_role_user(Role.ADMIN),
        name="Budget",
        windows=[window],
        physicians=physicians,
    )
    stay_tracks_get(stay=stay)
    return {
        "assignment": campaign.assignments.get(annotator=physicians[0]),
        "physician": physicians[0],
        "spo2": spo2,
        "map": low_map,
        "lactate": labs[4.2],
        "fio2": actions[2],
        "actions": actions,
    }


class Keyboard:
    """The page's keyboard, counting command keys (any key press: shortcuts,
    Enter, arrows, Ctrl+Enter) apart from characters typed into text fields."""

    def __init__(self, page):
        self.page = page
        self.commands = 0
        self.typed = 0

    def press(self, key: str, times: int = 1):
        for _ in range(times):
            self.page.keyboard.press(key)
            self.commands += 1

    def type(self, text: str):
        self.page.keyboard.type(text)
        self.typed += len(text)


def cite_by_finder(keys, query, *, opened=False):
    """The finder: c opens it (it opens by itself after a new item that needs
    evidence), the query narrows the events, Enter cites the first match."""
    if not opened:
        keys.press("c")
    keys.page.wait_for_selector("[data-event-finder]:not([hidden])")
    keys.type(query)
    keys.press("Enter")


def add_item(keys, shortcut, text, query):
    """A new item: its shortcut, its text and Enter; the finder, open by itself,
    cites the first match of ``query``."""
    keys.press(shortcut)
    keys.type(text)
    keys.press("Enter")
    cite_by_finder(keys, query, opened=True)


def test_a_demo_window_is_labelled_in_40_command_keys_or_fewer(
    live_server, demo_window
):
    d = demo_window
    with chromium() as browser:
        errors = []
        page = sign_in(browser, live_server, d["physician"], errors=errors)
        page.goto(f"{live_server.url}/annotate/{d['assignment'].pk}/")
        page.wait_for_selector("[data-trajectory][data-ready=true]")
        keys = Keyboard(page)

        keys.press("3")
        cite_by_finder(keys, "spo2 88")
        add_item(keys, "a", "Hypoxemic respiratory failure", "spo2 88")
        add_item(keys, "a", "Hyperlactatemia", "lact 4.2")
        ratings = ["4", "4", "5", "4", "4", "5", "4", "6"]
        for key in ratings:
            keys.press(key)
        add_item(keys, "d", "Fluid bolus", "map 58")
        add_item(keys, "f", "Rising oxygen need", "fio2")
        keys.press("Control+Enter")
        page.wait_for_url(lambda url: f"/annotate/{d['assignment'].pk}/" not in url)

        print(
            f"\nKeystroke budget of a demo-like window: {keys.commands} command keys "
            f"and {keys.typed} typed characters (goal: {BUDGET} command keys)"
        )
        assert errors == []

    label = Label.objects.get(assignment=d["assignment"])
    assert label.assignment.state == AssignmentState.SUBMITTED
    assert label.status == "deteriorating"
    assert label.payload["status_evidence"] == [d["spo2"].pk]
    assert label.payload["acute_problems"] == [
        {"text": "Hypoxemic respiratory failure", "evidence": [d["spo2"].pk]},
        {"text": "Hyperlactatemia", "evidence": [d["lactate"].pk]},
    ]
    names = {"4": "best_practice", "5": "acceptable", "6": "potentially_harmful"}
    assert label.payload["action_ratings"] == [
        {"event_id": action.pk, "rating": names[key], "evidence": []}
        for action, key in zip(d["actions"], ratings, strict=True)
    ]
    assert label.payload["added_actions"] == [
        {"text": "Fluid bolus", "evidence": [d["map"].pk]}
    ]
    assert label.payload["red_flags"] == [
        {"text": "Rising oxygen need", "evidence": [d["fio2"].pk]}
    ]
    assert Assignment.objects.get(pk=d["assignment"].pk).state == "submitted"
    assert keys.commands <= BUDGET
