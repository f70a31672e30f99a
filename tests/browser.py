"""The system Chromium (Debian's package) driven by Playwright, for the browser
tests of every app."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
from django.db import connections

# Playwright's sync API runs an event loop in the test's thread; the test's own
# database work happens outside it, but Django cannot tell.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "correct horse battery"  # tests.factories.make_user's
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium():
    """A headless Chromium. Start it after the test's data is written; on the
    way out, the connections opened while it ran are closed, or they keep the
    test database from being dropped."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            connections.close_all()


def browser_after(*data: str):
    """A ``browser`` fixture for a module: Chromium started after the fixtures
    named in ``data`` (the test's data) are made; database work inside
    Playwright's sync API would run on a connection the test database's
    teardown does not see (it keeps the database from being dropped)."""

    @pytest.fixture
    def browser(request):
        for name in data:
            request.getfixturevalue(name)
        with chromium() as browser:
            yield browser

    return browser


def page_problems(page) -> list[str]:
    """The script errors and Content-Security-Policy violations ``page`` reports
    from now on, as a list that grows while the page runs."""
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


def sign_in(
    browser, live_server, user, *, width=1440, height=1000, errors=None, **context
):
    """A page of a new context of ``browser`` (``context`` as new_context's),
    signed in as ``user`` (a user, or a username) with make_user's password:
    each role lands on its own page. With ``errors`` (a list), the page's
    script errors are appended to it."""
    page = browser.new_context(
        viewport={"width": width, "height": height}, **context
    ).new_page()
    if errors is not None:
        page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", getattr(user, "username", user))
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page


# The WCAG 2.0 and 2.1 A and AA rules of axe-core: what the issues ask of every
# page (issue 35).
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def axe_violations(page) -> list[str]:
    """axe-core's violations of the page as it stands, one line each: the rule
    and the elements it names. axe-core is the copy axe-playwright-python
    ships (requirements-dev.txt); it is evaluated in the page, so the page's
    context must be opened with ``bypass_csp=True`` (the pages' CSP allows no
    script but their own)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(
        page,
        options={
            "runOnly": {"type": "tag", "values": AXE_TAGS},
            "resultTypes": ["violations"],
        },
    )
    return [
        f"{violation['id']}: "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
        + (f" (+{len(violation['nodes']) - 5})" if len(violation["nodes"]) > 5 else "")
        for violation in results.response["violations"]
    ]
