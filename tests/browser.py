"""The system Chromium (Debian's package) driven by Playwright, for the browser
tests of every app."""

from __future__ import annotations

import os
from contextlib import contextmanager

from django.db import connections

# Playwright's sync API runs an event loop in the test's thread; the test's own
# database work happens outside it, but Django cannot tell.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

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
