"""The admin pages' charts in the system Chromium: the IRR dashboard's three
bar charts and the calibration report's tau sweep are drawn by uPlot (a canvas
in each chart) from the JSON the page carries, under the CSP, with no violation
and no script error; the figures stay on the page as text."""

import pytest

from tests.browser import PASSWORD, chromium, page_problems, sign_in

from .calibration_data import judged_set  # noqa: F401
from .consensus_data import stay  # noqa: F401 - stay, a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _drawn(page, chart: str) -> None:
    page.locator(f'[data-chart="{chart}"] [data-chart-canvas] canvas').wait_for()


def test_irr_dashboard_draws_its_three_charts_with_uplot(
    live_server, labelled, admin_user
):
    with chromium() as browser:
        page = sign_in(browser, live_server, admin_user)
        problems = page_problems(page)
        page.goto(f"{live_server.url}/annotate/campaigns/{labelled.pk}/irr/")
        for chart in ("status-chart", "f1-chart", "keep-chart"):
            _drawn(page, chart)
        assert page.locator(".chart .uplot").count() == 3
        values = page.inner_text('[data-chart="status-chart"] .chart-values')
        assert "Percent agreement: 0.750" in values
        page.screenshot(path="/tmp/irr_charts.png", full_page=True)
        assert problems == []


def test_calibration_report_draws_the_tau_sweep_with_uplot(
    live_server, judged_set, admin_user
):
    with chromium() as browser:
        page = sign_in(browser, live_server, admin_user)
        problems = page_problems(page)
        page.goto(f"{live_server.url}/annotate/calibration/{judged_set.pk}/report/")
        _drawn(page, "tau-sweep-chart")
        legend = page.inner_text('[data-chart="tau-sweep-chart"] .u-legend')
        for name in ("Accuracy", "Precision", "Recall", "F1"):
            assert name in legend
        page.screenshot(path="/tmp/calibration_chart.png", full_page=True)
        assert problems == []


@pytest.fixture
def steady_stay():
    """A 12-h stay: SpO2 between 99.8 and 100 % (noise), a steady temperature,
    a heart rate of 165 bpm (past the HR/BP span), a respiratory rate of 18."""
    from datetime import timedelta

    from tests.factories import make_event, make_stay, make_user
    from windows.tracks import stay_tracks_get
    from windows.windowing import windows_build

    stay = make_stay(hours=12)
    for n in range(24):
        time = stay.intime + timedelta(minutes=30 * n)
        for category, value, unit in (
            ("spo2", 99.8 if n % 2 else 100.0, "%"),
            ("temp_c", 37.0 + (0.05 if n % 2 else 0.0), "°C"),
            ("heart_rate", 165.0, "bpm"),
            ("map", 75.0, "mmHg"),
            ("respiratory_rate", 18.0, "/min"),
        ):
            make_event(
                admission=stay.admission,
                time=time,
                category=category,
                name=category,
                value_num=value,
                unit=unit,
            )
    windows_build(stay=stay)
    stay_tracks_get(stay=stay)
    return stay, make_user(password=PASSWORD, role="physician")


def _range(page, plot: str, scale: str = "y-range") -> tuple[float, float]:
    text = page.get_attribute(f'[data-plot="{plot}"] .plot-canvas', f"data-{scale}")
    low, high = (float(v) for v in text.split())
    return low, high


def test_plots_keep_a_minimum_span_per_vital_and_widen_for_values_past_it(
    live_server, steady_stay
):
    """SpO2 noise at 99.8-100 % is drawn on at least 85-100 %, a steady
    temperature on at least 35.5-38.5 degC, and the HR/BP axis still widens to
    show a heart rate of 165."""
    stay, physician = steady_stay
    with chromium() as browser:
        page = sign_in(browser, live_server, physician)
        problems = page_problems(page)
        page.goto(f"{live_server.url}/stays/{stay.pk}/windows/3/")
        page.wait_for_selector("[data-trajectory][data-ready=true]")
        low, high = _range(page, "spo2")
        assert low <= 85 and 100 <= high < 102, (low, high)
        low, high = _range(page, "spo2", "right-range")  # respiratory rate
        assert low <= 8 and high >= 30, (low, high)
        low, high = _range(page, "temp")
        assert low <= 35.5 and high >= 38.5, (low, high)
        low, high = _range(page, "hr")
        assert low <= 40 and high >= 165, (low, high)
        page.screenshot(path="/tmp/plot_spans.png", full_page=True)
        assert problems == []
