"""The Content-Security-Policy in the system Chromium: an admin who also rates
signs in through the form and opens the pages of every app, a stay's window page
with its plots included; the browser reports no CSP violation and no script
error."""

import pytest

from accounts.roles import Role, roles_ensure
from tests.browser import chromium, page_problems
from tests.factories import make_admission, make_events, make_stay, make_user
from windows.windowing import windows_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long passphrase"


def test_pages_of_every_app_run_under_the_csp_without_a_violation(live_server):
    user = make_user(
        username="csp-admin", password=PASSWORD, staff=True, is_superuser=True
    )
    groups = roles_ensure()
    user.groups.add(groups[Role.ADMIN], groups[Role.PHYSICIAN], groups[Role.RESEARCHER])
    stay = make_stay(admission=make_admission(), hours=8)
    make_events(
        admission=stay.admission,
        count=16,
        start=stay.intime,
        category="heart_rate",
        name="heart rate",
        value_num=100.0,
        unit="bpm",
    )
    windows_build(stay=stay)
    paths = [
        "/stays/",
        f"/stays/{stay.pk}/",
        f"/stays/{stay.pk}/windows/1/",
        "/annotate/",
        "/oracle/",
        "/releases/",
        "/releases/token/",
        "/api/docs/",
        "/admin/",
    ]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = page_problems(page)
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "csp-admin")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        assert "/accounts/login/" not in page.url
        for path in paths:
            response = page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("networkidle")
            assert response.status < 400, (path, response.status)
        assert problems == []
