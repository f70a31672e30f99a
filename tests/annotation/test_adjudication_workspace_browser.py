"""An admin merges two problems that mean the same thing with the keyboard on
the adjudication workspace (issue 13, point 4), in the system Chromium: the
evidence events, ratings side by side and status evidence are on the page;
m opens the merge panel, 2 and 3 choose the items, w picks the wording, r the
reason, Enter records it; the consensus then holds one item. The workspace is
saved as a screenshot for the issue's note."""

import pytest

from accounts.roles import Role, roles_ensure
from annotation.models import AdjudicationDecision, CampaignPhysician, ConsensusLabel
from tests.browser import browser_after, sign_in

from .conftest import make_role_user
from .workspace_data import cluster_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOT = "/tmp/adjudication_workspace.png"


browser = browser_after("built")


def test_admin_merges_two_problems_into_one_wording_by_keyboard(
    live_server, browser, built, admin_user, clinical
):
    campaign, window = built
    errors = []
    page = sign_in(browser, live_server, admin_user, errors=errors)
    page.goto(
        f"{live_server.url}/annotate/campaigns/{campaign.pk}/adjudication/{window.pk}/"
    )
    page.wait_for_load_state("load")

    # What the workspace shows before any decision.
    lactate = clinical["lactate"]
    row = page.locator(
        f"tr[data-cluster='{cluster_of(campaign, window, 'Hyperlactatemia')['id']}']"
    )
    assert "Lactate" in row.inner_text() and "4.2 mmol/L" in row.inner_text()
    assert page.locator("[data-rated-event][data-disagree]").count() == 2
    consensus_evidence = page.locator("[data-consensus-status-evidence] li")
    assert consensus_evidence.count() == 3
    assert (
        page.locator(
            f"[data-consensus-status-evidence] [data-event-id='{lactate.pk}']"
        ).count()
        == 1
    )

    # m: the acute problems' merge panel; 2 and 3: Hyperlactatemia and Elevated
    # lactate; the first wording is offered, w takes the next, w again back.
    page.keyboard.press("m")
    panel = page.locator("[data-merge-panel][data-task=acute_problems]")
    assert "is-current" in (panel.get_attribute("class") or "")
    page.keyboard.press("2")
    page.keyboard.press("3")
    wording = panel.locator("[data-merge-text]")
    assert wording.input_value() == "Hyperlactatemia"
    page.keyboard.press("w")
    assert wording.input_value() == "Elevated lactate"
    page.keyboard.press("w")
    assert wording.input_value() == "Hyperlactatemia"
    page.keyboard.press("r")
    page.keyboard.type("Same finding: lactate 4.2 mmol/L")
    page.screenshot(path=SCREENSHOT, full_page=True)
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-decision-history] li[data-action=merge]")

    assert page.locator("[data-decision=merge]").count() == 2
    assert (
        "Hyperlactatemia / Elevated lactate"
        in page.locator("[data-merged-texts]").inner_text()
    )
    decision = AdjudicationDecision.objects.get(window=window)
    assert decision.action == "merge" and decision.author == admin_user
    assert decision.new_text == "Hyperlactatemia"
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    assert [i["text"] for i in consensus.items["acute_problems"]] == [
        "Septic shock",
        "Hyperlactatemia",
    ]
    assert errors == []


def test_r_typed_in_the_merge_wording_is_a_letter_and_the_adjudicator_is_not_asked(
    live_server, browser, built, admin_user
):
    """Issue 35: in the wording field, r is a letter of the wording (the merge
    panel's r only works outside a field); "Ask a third physician" offers the
    campaign's free physicians, never the adjudicator."""
    from playwright.sync_api import expect

    campaign, window = built
    # The adjudicator is also one of the campaign's physicians, free on the
    # window, as is a third physician.
    admin_user.groups.add(roles_ensure()[Role.PHYSICIAN])
    spare = make_role_user(Role.PHYSICIAN)
    for user in (admin_user, spare):
        CampaignPhysician.objects.create(campaign=campaign, user=user)
    page = sign_in(browser, live_server, admin_user)
    page.goto(
        f"{live_server.url}/annotate/campaigns/{campaign.pk}/adjudication/{window.pk}/"
    )
    page.wait_for_load_state("load")

    page.keyboard.press("m")
    panel = page.locator("[data-merge-panel][data-task=acute_problems]")
    page.keyboard.press("2")
    page.keyboard.press("3")
    page.keyboard.press("e")  # edit the wording: the field has the focus
    wording = panel.locator("[data-merge-text]")
    page.keyboard.press("End")
    page.keyboard.type(" raised")

    assert wording.input_value() == "Hyperlactatemia raised"
    expect(wording).to_be_focused()
    assert panel.locator("[data-reason]").input_value() == ""
    options = page.locator("[data-window-action=third] select[name=physician] option")
    offered = [options.nth(i).get_attribute("value") for i in range(options.count())]
    assert offered == ["", str(spare.pk)]
