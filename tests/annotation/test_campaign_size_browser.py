"""Campaigns of any size in the system Chromium: an admin asks for a number of
windows from a number of stays, sees an impossible request refused with a
message, creates the campaign, pages through its windows with n; the physician's
queue opens with the next window to label, which n opens."""

import pytest

from annotation.models import Assignment, AssignmentState, Campaign
from tests.browser import browser_after, sign_in

from .conftest import make_gold_stays

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOT = "/tmp/campaign_size.png"


@pytest.fixture
def stays(db):
    """Six stays of 12 Gold windows each: 72 windows."""
    return make_gold_stays(stays=6)


browser = browser_after("stays", "physicians", "admin_user")


def test_admin_draws_a_campaign_and_pages_through_it(
    live_server, browser, stays, physicians, admin_user
):
    errors = []
    page = sign_in(browser, live_server, admin_user, errors=errors)
    page.goto(f"{live_server.url}/annotate/campaigns/new/")
    assert page.locator("[data-available-windows='72']").count() == 1
    page.fill("input[name=name]", "Drawn in the browser")
    for physician in physicians:
        page.check(f"input[name=physicians][value='{physician.pk}']")
    page.fill("input[name=annotators_per_window]", "2")
    page.fill("input[name=stay_count]", "5")
    page.fill("input[name=window_count]", "61")
    page.fill("input[name=seed]", "3")
    assert page.is_checked("input[name=evidence_required]")

    # 61 windows from 5 stays of 12: refused, nothing created, the form kept.
    page.click(".campaign-form button[type=submit]")
    page.wait_for_selector(".form-errors")
    assert "hold only 60 Gold windows" in page.inner_text(".form-errors")
    assert not Campaign.objects.exists()
    assert page.input_value("input[name=window_count]") == "61"

    page.fill("input[name=window_count]", "55")
    page.click(".campaign-form button[type=submit]")
    page.wait_for_selector("[data-windows-complete]")
    campaign = Campaign.objects.get(name="Drawn in the browser")
    assert campaign.evidence_required
    assert campaign.campaign_windows.count() == 55
    assert campaign.assignments.count() == 110
    assert "1–50 of 55 windows" in page.inner_text(".pager-status")
    assert page.locator("tr[data-window-id]").count() == 50
    page.screenshot(path=SCREENSHOT, full_page=True)

    # n: the next page of windows, swapped in place.
    page.wait_for_load_state("load")
    page.keyboard.press("n")
    page.wait_for_url(lambda url: "page=2" in url)
    page.wait_for_selector(".pager-status:has-text('51–55 of 55')")
    assert page.locator("tr[data-window-id]").count() == 5
    assert errors == []


def test_queue_opens_with_the_next_window(
    live_server, browser, stays, physicians, admin_user
):
    from annotation.services import campaign_create

    campaign = campaign_create(
        admin=admin_user,
        name="Queue",
        windows=[w.pk for stay in stays[:2] for w in stay],
        physicians=physicians,
        annotators_per_window=2,
    )
    mine = list(
        Assignment.objects.filter(campaign=campaign, annotator=physicians[0]).order_by(
            "window__stay_id", "window__index"
        )
    )
    Assignment.objects.filter(pk__in=[a.pk for a in mine[:2]]).update(
        state=AssignmentState.SUBMITTED
    )
    page = sign_in(browser, live_server, physicians[0])
    page.goto(f"{live_server.url}/annotate/")
    first = page.locator("tr[data-assignment-id]").first
    assert first.get_attribute("data-assignment-id") == str(mine[2].pk)
    assert first.get_attribute("data-next-row") is not None
    page.wait_for_load_state("load")
    page.keyboard.press("n")
    page.wait_for_url(f"{live_server.url}/annotate/{mine[2].pk}/")
