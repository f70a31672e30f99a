"""The window page in the system Chromium: a physician signs in, the plots are
drawn, and the keyboard moves between windows."""

from datetime import timedelta

import pytest

from tests.browser import browser_after, sign_in
from tests.factories import (
    code_status,
    drip,
    make_admission,
    make_events,
    make_patient,
    make_stay,
    make_user,
    ventilation,
    vital,
    vitals,
)
from windows.models import Domain
from windows.tracks import stay_tracks_get
from windows.windowing import windows_build, windows_sample_gold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "/tmp/window_page.png"


@pytest.fixture
def septic_stay():
    """A 36 h stay with vitals, labs, a norepinephrine infusion, ventilation and
    a code status; its windows, Gold draw and concept tracks."""
    patient = make_patient(pseudo_id="PBROWSER01", sex="Female", age=58)
    stay = make_stay(admission=make_admission(patient=patient), hours=36)
    admission, t0 = stay.admission, stay.intime
    vital(stay, "weight_kg", 72.0, -2, unit="kg", name="Admission weight")
    every_30_min = {
        "heart_rate": (112.0, "bpm"),
        "map": (61.0, "mmHg"),
        "sbp": (92.0, "mmHg"),
        "dbp": (48.0, "mmHg"),
        "respiratory_rate": (24.0, "/min"),
        "spo2": (93.0, "%"),
    }
    for category, (value, unit) in every_30_min.items():
        name = category.replace("_", " ")
        vitals(stay, category, value, start_h=0, end_h=36, unit=unit, name=name)
    temperature = {"category": "temp_c", "name": "Temperature", "unit": "°C"}
    lactate = {"category": "lactate", "name": "Lactate", "unit": "mmol/L"}
    creatinine = {"category": "creatinine", "name": "Creatinine", "unit": "mg/dL"}
    lab = {"domain": Domain.LABS}
    for count, every_h, fields in (
        (9, 4, {**temperature, "value_num": 38.4}),
        (6, 6, {**lab, **lactate, "value_num": 3.8}),
        (3, 12, {**lab, **creatinine, "value_num": 1.9}),
    ):
        make_events(
            admission=admission,
            count=count,
            start=t0,
            every=timedelta(hours=every_h),
            **fields,
        )
    for hour, rate in ((1, 0.1), (8, 0.25), (20, 0.05)):
        drip(stay, "norepinephrine", rate, hour, "dose_change")
    for hour in range(2, 26, 2):  # invasive ventilation charted every 2 h
        ventilation(stay, hour)
    code_status(stay, 0)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    windows_sample_gold(stay=stay, seed=0, per_stay=4)
    stay_tracks_get(stay=stay)
    make_user(username="physician", role="physician")
    return stay


browser = browser_after()


def _canvas_sizes(page, selector: str) -> list[tuple[float, float]]:
    return page.eval_on_selector_all(
        f"{selector} canvas",
        "nodes => nodes.map(c => [c.getBoundingClientRect().width,"
        " c.getBoundingClientRect().height])",
    )


def test_physician_reads_the_plots_and_moves_between_windows_by_keyboard(
    live_server, septic_stay, browser
):
    stay = septic_stay
    errors = []
    page = sign_in(browser, live_server, "physician", errors=errors)

    page.goto(f"{live_server.url}/stays/{stay.pk}/windows/5/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")

    overview = _canvas_sizes(page, "[data-overview]")
    plots = _canvas_sizes(page, "[data-plots]")
    assert len(overview) == 6  # SOFA, NED, ventilation, AKI, lactate, MAP
    assert len(plots) >= 10
    assert all(w > 100 and h > 20 for w, h in overview + plots)
    # The window marks under the overview link the Gold windows and this one.
    marks = page.eval_on_selector_all(
        ".ov-mark", "nodes => nodes.map(a => a.getAttribute('href'))"
    )
    assert f"/stays/{stay.pk}/windows/5/" in marks
    assert page.inner_text("#window-heading").startswith("Window 5")
    page.screenshot(path=SCREENSHOT, full_page=False)

    page.keyboard.press("]")
    page.wait_for_url(f"{live_server.url}/stays/{stay.pk}/windows/6/")
    assert page.inner_text("#window-heading").startswith("Window 6")

    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"{live_server.url}/stays/{stay.pk}/windows/5/")
    page.keyboard.press("[")
    page.wait_for_url(f"{live_server.url}/stays/{stay.pk}/windows/4/")

    # "w" widens the event table in place, through htmx.
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    page.keyboard.press("w")
    page.wait_for_url(f"{live_server.url}/stays/{stay.pk}/windows/4/?scope=stay")
    page.wait_for_selector("#window-events tr.pos-after")

    # "?" shows the shortcuts, with the window keys.
    page.keyboard.press("?")
    assert "Next window" in page.inner_text("#shortcut-help")
    assert errors == []


def test_clicking_a_gold_mark_on_the_stay_page_opens_its_window(
    live_server, septic_stay, browser
):
    stay = septic_stay
    page = sign_in(browser, live_server, "physician", width=1280, height=900)

    page.goto(f"{live_server.url}/stays/{stay.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert len(_canvas_sizes(page, "[data-overview]")) == 6
    mark = page.locator(".ov-mark.is-gold").first
    index = mark.get_attribute("data-window-index")
    mark.click()
    page.wait_for_url(f"{live_server.url}/stays/{stay.pk}/windows/{index}/")
    assert page.inner_text("#window-heading").startswith(f"Window {index}")
    # Its plots' data arrives before the test ends and the server stops.
    page.wait_for_selector("[data-trajectory][data-ready=true]")
