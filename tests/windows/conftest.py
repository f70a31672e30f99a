"""Fixtures of the windows tests."""

import pytest

from tests.factories import at, death, drip, lab, make_user, vital
from tests.windows.mimic_files import mimic_tables, write_mimic
from tests.windows.window_pages import build_stay
from windows.models import Window


@pytest.fixture
def signed_in(client):
    """The test client, signed in as a physician."""
    client.force_login(make_user(role="physician"))
    return client


@pytest.fixture
def mimic_dir(tmp_path):
    """The MIMIC-IV folder of tests/windows/mimic_files.py, as it is."""
    return write_mimic(tmp_path / "mimic", mimic_tables())


@pytest.fixture
def stay_with_events():
    """A 48 h stay and events around its window 5 ([+10 h, +10.5 h))."""
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=5)
    assert (window.start, window.end) == (at(stay, 10), at(stay, 10.5))
    heart_rate = {"category": "heart_rate", "value": 88.0, "unit": "bpm"}
    events = {
        "seven_h_before": vital(stay, hours=3, name="HR 7 h before", **heart_rate),
        "five_h_before": vital(stay, hours=5, name="HR 5 h before", **heart_rate),
        "action_before": drip(
            stay, "norepinephrine", 0.05, 9, name="Norepinephrine earlier"
        ),
        "in_window": lab(
            stay, "lactate", 3.1, 10 + 5 / 60, "mmol/L", name="Lactate in window"
        ),
        "window_action": drip(
            stay,
            "norepinephrine",
            0.2,
            10 + 10 / 60,
            "dose_change",
            name="Norepinephrine up",
        ),
        "at_end": vital(stay, hours=10.5, name="HR at window end", **heart_rate),
        "after": vital(stay, hours=13.5, name="HR later", **heart_rate),
        "death": death(stay, 10 + 20 / 60),
    }
    return stay, window, events
