"""The admin pages' charts in the system Chromium: the IRR dashboard's three
bar charts and the calibration report's tau sweep are drawn by uPlot (a canvas
in each chart) from the JSON the page carries, under the CSP, with no violation
and no script error; the figures stay on the page as text."""

import pytest

from tests.browser import chromium

from .test_annotate_browser import sign_in
from .test_calibration import judged_set  # noqa: F401
from .test_consensus import gold, labelled, matcher, stay, windows  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _watch(page) -> list[str]:
    """Script errors and CSP violations the page reports from now on."""
    problems = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(message.text)
            if "Content Security Policy" in message.text
            else None
        ),
    )
    return problems


def _drawn(page, chart: str) -> None:
    page.locator(f'[data-chart="{chart}"] [data-chart-canvas] canvas').wait_for()


def test_irr_dashboard_draws_its_three_charts_with_uplot(
    live_server, labelled, admin_user
):
    with chromium() as browser:
        page = sign_in(browser, live_server, admin_user)
        problems = _watch(page)
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
        problems = _watch(page)
        page.goto(f"{live_server.url}/annotate/calibration/{judged_set.pk}/report/")
        _drawn(page, "tau-sweep-chart")
        legend = page.inner_text('[data-chart="tau-sweep-chart"] .u-legend')
        for name in ("Accuracy", "Precision", "Recall", "F1"):
            assert name in legend
        page.screenshot(path="/tmp/calibration_chart.png", full_page=True)
        assert problems == []
