"""The API documentation page in the system Chromium: Swagger UI, served from
drf-spectacular-sidecar's static files, lists the researcher API's operations
for anyone, signed in or not, under the CSP with no violation, and loads
nothing from outside this server."""

import pytest

from tests.browser import chromium, page_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_swagger_ui_lists_the_operations_offline_under_the_csp(live_server):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems, outside = page_problems(page), []
        page.on(
            "request",
            lambda request: (
                outside.append(request.url)
                if not request.url.startswith((live_server.url, "data:"))
                else None
            ),
        )
        response = page.goto(f"{live_server.url}/api/docs/")
        assert response.status == 200
        operation = page.locator(
            ".opblock-summary-path", has_text="/api/v1/releases/{release_id}/windows/"
        )
        operation.first.wait_for(timeout=30_000)
        page.wait_for_load_state("networkidle")
        assert page.locator(".opblock").count() > 5
        assert problems == []
        assert outside == []
