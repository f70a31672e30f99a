"""The admins' page of an active Gold draw (issue 33, item 3: the campaign form
draws as the command does): an admin picks the runs whose disagreement is the
uncertainty, the budget and the physicians; the campaign holds the drawn
windows and every pool window's probability is stored. Bad input is a message
on the form and writes nothing; a physician gets a 403; in Chromium the page
works and axe-core finds no WCAG 2 A/AA violation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.roles import Role
from annotation.models import Campaign, CampaignWindow
from oracle.models import GoldInclusion
from tests.annotation.conftest import make_role_user
from tests.browser import axe_violations, chromium, sign_in

URL = reverse("oracle:gold_draw")


def _post(two_runs, **overrides):
    data = {
        "name": "drawn on the page",
        "run": two_runs["a"].pk,
        "other_runs": [two_runs["b"].pk],
        "budget": 20,
        "physicians": [p.pk for p in two_runs["physicians"]],
        "annotators_per_window": 2,
        "floor": 0.5,
        "seed": 3,
        **overrides,
    }
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.django_db
def test_an_admin_draws_a_campaign_from_the_runs_disagreement(client, two_runs):
    client.force_login(two_runs["admin"])
    response = client.post(URL, _post(two_runs))
    campaign = Campaign.objects.get(name="drawn on the page")
    assert response.status_code == 302
    assert response.url == reverse("annotation:campaign_detail", args=[campaign.pk])
    rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=campaign)}
    # The same draw as the service's with these settings (test_gold_draw): the
    # 10 windows where run b disagrees are certain, the 30 others 1/3 each.
    assert len(rows) == 40
    disagree = {w.pk for w in two_runs["windows"][30:]}
    for window_id, row in rows.items():
        expected = 1.0 if window_id in disagree else (20 - 10) / 30
        assert row.probability == pytest.approx(expected)
    in_campaign = set(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )
    assert in_campaign == {w for w, g in rows.items() if g.phase == "active"}
    assert disagree <= in_campaign
    page = client.get(response.url)
    assert "every pool window&#x27;s probability" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"budget": 0}, "greater than or equal to 1"),
        ({"other_runs": None}, "This field is required"),
        ({"other_runs": "same"}, "Choose different Oracle runs"),
        ({"floor": 0}, "The uniform floor must lie in (0, 1]"),
        ({"run": 2**40}, "Select a valid choice"),
        ({"physicians": None}, "This field is required"),
    ],
)
def test_bad_input_is_a_message_and_writes_nothing(
    client,
    two_runs,
    overrides,
    message,
):
    if overrides.get("other_runs") == "same":
        overrides = {"other_runs": [two_runs["a"].pk]}
    client.force_login(two_runs["admin"])
    before = Campaign.objects.count()
    response = client.post(URL, _post(two_runs, **overrides))
    assert response.status_code == 200
    assert message in response.content.decode().replace("&#x27;", "'")
    assert Campaign.objects.count() == before
    assert not GoldInclusion.objects.exists()


@pytest.mark.django_db
def test_a_physician_is_refused_and_nothing_is_drawn(client, two_runs):
    client.force_login(make_role_user(Role.PHYSICIAN))
    # The wrong role: 403 (accounts.access).
    assert client.get(URL).status_code == 403
    assert client.post(URL, _post(two_runs)).status_code == 403
    assert not Campaign.objects.filter(name="drawn on the page").exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_draw_in_chromium(live_server, two_runs):
    with chromium() as browser:
        page = sign_in(browser, live_server, two_runs["admin"], bypass_csp=True)
        page.goto(live_server.url + reverse("annotation:campaign_new"))
        page.click("text=draw the campaign from the Oracle runs' disagreement")
        page.wait_for_url(f"**{URL}")
        assert axe_violations(page) == []
        page.fill("input[name=name]", "drawn in the browser")
        page.select_option("select[name=run]", str(two_runs["a"].pk))
        page.check(f"input[name=other_runs][value='{two_runs['b'].pk}']")
        page.fill("input[name=budget]", "20")
        for physician in two_runs["physicians"]:
            page.check(f"input[name=physicians][value='{physician.pk}']")
        page.click("button:has-text('Draw the campaign')")
        page.wait_for_url("**/campaigns/*/")
        assert "drawn:" in page.inner_text("body")
        campaign = Campaign.objects.get(name="drawn in the browser")
        assert GoldInclusion.objects.filter(campaign=campaign).count() == 40
        # A bad budget in the browser: the message, nothing drawn.
        page.goto(f"{live_server.url}{URL}")
        page.fill("input[name=name]", "bad budget")
        page.check(f"input[name=other_runs][value='{two_runs['b'].pk}']")
        page.fill("input[name=budget]", "0")
        page.click("button:has-text('Draw the campaign')")
        assert "greater than or equal to 1" in page.inner_text("form.gold-draw-form")
        assert axe_violations(page) == []
        assert not Campaign.objects.filter(name="bad budget").exists()
