"""The pages a physician and an admin read, in the system Chromium (issue 35):
axe-core finds no WCAG 2 A/AA violation on any of them, the campaign form's
boxes sit beside their names, and a window's routine actions are listed with
the reason they are not rated."""

import pytest

from tests.browser import axe_violations, browser_after, sign_in
from windows.tracks import stay_tracks_get

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def built(built, stay):
    """conftest's hand-built window, its stay's tracks computed for the charts."""
    stay_tracks_get(stay=stay)
    return built


browser = browser_after("built")


def _violations(page, url: str) -> list[str]:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return [f"{url}: {line}" for line in axe_violations(page)]


def test_no_page_of_a_physician_or_an_admin_has_an_accessibility_violation(
    live_server, browser, built, admin_user, physicians, stay
):
    campaign, window = built
    base = live_server.url
    assignment = campaign.assignments.get(annotator=physicians[0])
    found = []

    physician = sign_in(browser, live_server, physicians[0], bypass_csp=True)
    for path in ("/annotate/", f"/annotate/{assignment.pk}/"):
        found += _violations(physician, base + path)

    admin = sign_in(browser, live_server, admin_user, bypass_csp=True)
    for path in (
        "/annotate/campaigns/",
        "/annotate/campaigns/new/",
        f"/annotate/campaigns/{campaign.pk}/",
        f"/annotate/campaigns/{campaign.pk}/adjudication/",
        f"/annotate/campaigns/{campaign.pk}/adjudication/{window.pk}/",
        f"/annotate/campaigns/{campaign.pk}/irr/",
        "/annotate/calibration/",
        "/stays/",
        f"/stays/{stay.pk}/",
        f"/stays/{stay.pk}/windows/{window.index}/",
        "/releases/",
    ):
        found += _violations(admin, base + path)

    assert found == []


def test_the_campaign_forms_boxes_sit_beside_their_names(
    live_server, browser, built, admin_user, physicians
):
    page = sign_in(browser, live_server, admin_user, bypass_csp=True)
    page.goto(f"{live_server.url}/annotate/campaigns/new/")
    ids = [f"id_physicians_{n}" for n in range(len(physicians))]
    ids.append("id_evidence_required")

    for box_id in ids:
        box = page.locator(f"#{box_id}").bounding_box()
        label = page.locator(f"label[for={box_id}]").bounding_box()
        # On one line, the name just right of its box.
        middle = box["y"] + box["height"] / 2
        assert label["y"] <= middle <= label["y"] + label["height"], box_id
        gap = label["x"] - (box["x"] + box["width"])
        assert 0 <= gap <= 16, (box_id, gap)


def test_a_windows_routine_action_is_listed_apart_with_why_it_is_not_rated(
    live_server, browser, built, physicians, clinical
):
    campaign, _ = built
    assignment = campaign.assignments.get(annotator=physicians[0])
    page = sign_in(browser, live_server, physicians[0], bypass_csp=True)
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")

    routine = page.locator("[data-routine-actions]")
    assert routine.is_visible()
    assert "Not rated: routine" in routine.inner_text()
    assert "Insulin" in routine.locator("li").first.inner_text()
    rated = page.locator("[data-action-id]")
    assert str(clinical["insulin"].pk) not in [
        rated.nth(i).get_attribute("data-action-id") for i in range(rated.count())
    ]
