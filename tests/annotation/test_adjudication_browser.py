"""An admin resolves a disagreement in the system Chromium: opens the window
from the queue, settles the status and rewrites the one-sided item by
keyboard, each with a reason; the window leaves the queue and the decisions
show with their author."""

import pytest

from annotation.models import AdjudicationDecision, ConsensusLabel
from tests.browser import browser_after, sign_in

from .consensus_data import stay  # noqa: F401 - stay, a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOT = "/tmp/adjudicate.png"


browser = browser_after("labelled")


def test_admin_settles_a_disagreement_on_the_adjudication_page(
    live_server, browser, labelled, windows, admin_user
):
    w3 = windows[3]
    errors = []
    page = sign_in(browser, live_server, admin_user, errors=errors)

    page.goto(f"{live_server.url}/annotate/campaigns/{labelled.pk}/")
    page.click("[data-adjudication-link]")
    page.wait_for_selector("[data-queue-count='3']")
    page.click(f"tr[data-window-id='{w3.pk}'] a")
    page.wait_for_selector("[data-window-state=open]")
    # The page's keys are bound by a deferred script: wait for the page to load
    # before typing, as a person would see it loaded.
    page.wait_for_load_state("load")
    assert page.locator("[data-dispute]").count() == 2

    # The status: 3 = deteriorating, then the reason, Enter records it.
    page.keyboard.press("3")
    assert page.is_checked("input[name=new_status][value=deteriorating]")
    page.keyboard.type("Lactate rising, new vasopressor")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-decision-history] li[data-action=settle_status]")
    assert page.locator("[data-dispute]").count() == 1

    # The one-sided problem: e = rewrite, type the new text, Tab to the reason.
    page.keyboard.press("j")
    page.keyboard.press("e")
    page.keyboard.type("Hypokalemia (K 2.9 mmol/L)")
    page.keyboard.press("Tab")
    page.keyboard.type("Confirmed on the labs of the window")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-window-state=settled]")
    page.screenshot(path=SCREENSHOT, full_page=True)

    history = page.locator("[data-decision-history] li")
    assert history.count() == 2
    for n in range(2):
        assert history.nth(n).locator("[data-author]").inner_text() == (
            admin_user.username
        )
    assert "Hypokalemia (K 2.9 mmol/L)" in history.nth(0).inner_text()
    assert "Lactate rising" in history.nth(1).inner_text()

    decisions = list(AdjudicationDecision.objects.filter(window=w3).order_by("pk"))
    assert [d.action for d in decisions] == ["settle_status", "rewrite"]
    assert all(d.author == admin_user and d.reason for d in decisions)
    consensus = ConsensusLabel.objects.get(campaign=labelled, window=w3)
    assert consensus.status == "deteriorating" and consensus.dispute_count == 0
    assert [i["text"] for i in consensus.items["acute_problems"]] == [
        "Hypokalemia (K 2.9 mmol/L)"
    ]

    # The next window of the queue is one key away; the settled one has left it.
    page.keyboard.press("]")
    page.wait_for_url(
        f"{live_server.url}/annotate/campaigns/{labelled.pk}/adjudication/{windows[0].pk}/"
    )
    page.keyboard.press("u")
    page.wait_for_selector("[data-queue-count='2']")
    assert page.locator(f"tr[data-window-id='{w3.pk}']").count() == 0
    assert errors == []
