"""The Gold budget page of a Scale submission in the system Chromium (issue
33): an admin signs in, picks a figure and a target width, reads the physician
windows a uniform and an active draw need, gets a message for a bad width, and
axe-core finds no WCAG 2 A/AA violation on the page."""

from __future__ import annotations

import pytest

from evaluation.ppi_budget import active_factor, gold_budget
from tests.browser import axe_violations, browser_after

from .helpers import scored_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"  # tests.factories.make_user's
FIGURE = "status_macro_f1"
# An active draw's stored uncertainty and probability of each Gold window.
DRAW = {("A", 0): (0.9, 0.5), ("A", 1): (0.0, 0.5), ("B", 0): (0.0, 0.5)}


@pytest.fixture
def scored(researcher, rectified_release, tiny_stays):
    from oracle.models import GoldInclusion

    submission = scored_submission(researcher, rectified_release, tiny_stays["windows"])
    submission.public = True
    submission.save(update_fields=["public"])
    campaign = rectified_release.validation_report.campaign
    windows = tiny_stays["windows"]
    GoldInclusion.objects.bulk_create(
        GoldInclusion(
            campaign=campaign,
            window=windows[stay][index],
            uncertainty=u,
            probability=p,
            floor=0.7,
            source="browser test",
        )
        for (stay, index), (u, p) in DRAW.items()
    )
    return submission


browser = browser_after("scored")


def test_an_admin_plans_a_gold_budget_and_a_bad_width_is_a_message(
    live_server, browser, scored, admin_user
):
    stored = scored.scores["intervals"]["figures"][FIGURE]
    target = round((stored["upper"] - stored["lower"]) / 2, 4)
    expected = gold_budget(
        stored, target_width=target, active=active_factor([0.9, 0.0, 0.0], [2.0] * 3)
    )
    assert expected["more_active"] < expected["more_uniform"]

    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, bypass_csp=True
    )
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", admin_user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)

    url = f"{live_server.url}/releases/submissions/{scored.pk}/budget/"
    page.goto(url)
    assert axe_violations(page) == []
    page.select_option("select[name=figure]", FIGURE)
    page.fill("input[name=width]", str(target))
    page.click("button:has-text('Plan')")
    page.wait_for_selector("[data-budget]")
    assert page.inner_text("[data-budget] caption").startswith("Status macro-F1")
    uniform = page.get_attribute("[data-more-uniform]", "data-more-uniform")
    active = page.get_attribute("[data-more-active]", "data-more-active")
    assert int(uniform) == expected["more_uniform"]
    assert int(active) == expected["more_active"]
    assert f"({expected['active']} in all)" in page.inner_text("[data-more-active]")
    # The form keeps the choice it answered.
    assert page.input_value("select[name=figure]") == FIGURE
    assert axe_violations(page) == []

    page.fill("input[name=width]", "1.5")
    page.click("button:has-text('Plan')")
    page.wait_for_selector(".errorlist")
    assert "above 0 and below 1" in page.inner_text(".errorlist")
    assert page.locator("[data-budget]").count() == 0
    assert axe_violations(page) == []
    assert errors == []
