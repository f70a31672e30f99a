"""The "?" shortcut panel in the system Chromium, on each main page (stays, a
window, the labelling page, adjudication, a campaign, an Oracle run, the
releases) at 1280, 1440 and 1920 px: opened with "?", its box lies within the
viewport, and its last key, scrolled to inside the panel (Page Down while it
is open), is on screen too."""

import pytest

from annotation.models import Assignment, Campaign
from annotation.services import campaign_create, window_consensus_refresh
from oracle import services as oracle_services
from tests.annotation.conftest import (  # noqa: F401 - fixtures
    clinical,
    matcher,
    physicians,
    windows,
)
from tests.annotation.consensus_data import stay, submit  # noqa: F401 - stay, a fixture
from tests.browser import chromium, sign_in
from tests.oracle.helpers import rules_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Common screens: a laptop, a larger laptop, a desktop monitor.
VIEWPORTS = ((1280, 800), (1440, 900), (1920, 1080))


@pytest.fixture
def pages(windows, physicians, admin_user, matcher):
    """The main pages, each with the user who opens it: a campaign of two
    windows, the first still to label, the second labelled by both physicians
    with different statuses (a dispute); a rules Oracle run over it."""
    w0, w1 = windows[:2]
    campaign = campaign_create(
        admin=admin_user, name="Help panel", windows=[w0, w1], physicians=physicians
    )
    # Items without evidence keep the labels short; the pages are what count.
    Campaign.objects.filter(pk=campaign.pk).update(evidence_required=False)
    a, b = physicians
    submit(a, campaign, w1, "stable")
    submit(b, campaign, w1, "deteriorating")
    window_consensus_refresh(campaign=campaign, window=w1, matcher=matcher)
    run = rules_run(admin_user, campaign, "help panel run")
    oracle_services.oracle_run_execute_inline(run_id=run.pk)
    assignment = Assignment.objects.get(campaign=campaign, window=w0, annotator=a)
    return [
        ("stays", admin_user, "/stays/"),
        ("window", admin_user, f"/stays/{w0.stay_id}/windows/{w0.index}/"),
        ("labelling", a, f"/annotate/{assignment.pk}/"),
        (
            "adjudication",
            admin_user,
            f"/annotate/campaigns/{campaign.pk}/adjudication/{w1.pk}/",
        ),
        ("campaign", admin_user, f"/annotate/campaigns/{campaign.pk}/"),
        ("oracle run", admin_user, f"/oracle/runs/{run.pk}/"),
        ("releases", admin_user, "/releases/"),
    ]


def _box(page, selector: str) -> dict:
    return page.eval_on_selector(
        selector,
        "n => { const b = n.getBoundingClientRect();"
        " return {top: b.top, left: b.left, bottom: b.bottom, right: b.right}; }",
    )


def _inside(box: dict, width: int, height: int) -> bool:
    return (
        box["top"] >= 0
        and box["left"] >= 0
        and box["bottom"] <= height
        and box["right"] <= width
    )


def test_the_help_panel_lies_within_the_viewport_on_every_main_page(live_server, pages):
    signed_in = {}
    failures = []
    scrolled = 0
    with chromium() as browser:
        for name, user, path in pages:
            if user.pk not in signed_in:
                signed_in[user.pk] = sign_in(browser, live_server, user)
            page = signed_in[user.pk]
            for width, height in VIEWPORTS:
                page.set_viewport_size({"width": width, "height": height})
                page.goto(f"{live_server.url}{path}")
                page.wait_for_load_state("load")
                # "?" from the page itself, not from a field.
                page.eval_on_selector(
                    "body",
                    "b => document.activeElement && document.activeElement.blur()",
                )
                page.keyboard.press("?")
                panel = page.locator("#shortcut-help")
                panel.wait_for(state="visible")
                box = _box(page, "#shortcut-help")
                if not _inside(box, width, height):
                    failures.append((name, width, "panel", box))
                # Every key and its meaning within the panel's width (nothing
                # cut off at a side), the list scrolling only up and down.
                for part in page.eval_on_selector_all(
                    "#shortcut-help dt, #shortcut-help dd",
                    "nodes => nodes.map(n => { const b = n.getBoundingClientRect();"
                    " return {left: b.left, right: b.right}; })",
                ):
                    if part["left"] < box["left"] or part["right"] > box["right"]:
                        failures.append((name, width, "cut at a side", part))
                        break
                overflow = page.eval_on_selector(
                    "#shortcut-help dl", "n => n.scrollWidth - n.clientWidth"
                )
                if overflow > 1:
                    failures.append((name, width, "scrolls sideways", overflow))
                # A list taller than the panel scrolls with Page Down, the page
                # behind it stays where it is.
                before = page.eval_on_selector(
                    "#shortcut-help dl",
                    "n => [n.scrollTop, n.scrollHeight - n.clientHeight, scrollY]",
                )
                if before[1] > 1:
                    scrolled += 1
                    page.keyboard.press("PageDown")
                    after = page.eval_on_selector(
                        "#shortcut-help dl", "n => [n.scrollTop, scrollY]"
                    )
                    if not (after[0] > before[0] and after[1] == before[2]):
                        failures.append((name, width, "page down", before, after))
                # The last key of the list, scrolled to within the panel.
                page.eval_on_selector(
                    "#shortcut-help dl > :last-child",
                    "n => n.scrollIntoView({block: 'nearest'})",
                )
                last = _box(page, "#shortcut-help dl > :last-child")
                if not (_inside(last, width, height) and last["top"] >= box["top"]):
                    failures.append((name, width, "last key", last))
                page.screenshot(
                    path=f"/tmp/help_panel_{name.replace(' ', '_')}_{width}.png"
                )
                page.keyboard.press("Escape")
                panel.wait_for(state="hidden")
    assert failures == []
    assert scrolled  # the labelling page's list is taller than 800 px at least
