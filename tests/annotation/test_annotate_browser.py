"""Labelling a window in the system Chromium, by keyboard, with evidence clicked
in the event table; the draft survives a reload, submit opens the next window,
and a second physician sees none of it."""

import os

import pytest
from django.db import connections

from annotation.models import Assignment, AssignmentState, Label
from windows.tracks import stay_tracks_get

# Playwright's sync API runs an event loop in this thread; the database work of
# the test itself happens outside it, but Django cannot tell.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "correct horse battery"  # tests.factories.make_user's
SCREENSHOT = "/tmp/annotate.png"
FORM = "[data-label-form]"


@pytest.fixture
def labelling(campaign, physicians, gold_windows, clinical, stay):
    """The campaign's data, written before Chromium starts."""
    stay_tracks_get(stay=stay)
    first, second = (
        list(Assignment.objects.filter(annotator=p).order_by("window__index"))
        for p in physicians
    )
    return {"first": first, "second": second}


@pytest.fixture
def browser(labelling):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            # Queries made while Playwright ran used a connection of their own:
            # close it, or it keeps the test database from being dropped.
            connections.close_all()


def sign_in(browser, live_server, user):
    page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/stays/")
    return page


def wait_saved(page):
    page.wait_for_function(
        f"document.querySelector('{FORM}').dataset.saveState === 'saved'"
    )


def add_item(page, key: str, text: str):
    page.keyboard.press(key)
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def cite(page, event):
    page.click(f'#window-events tr[data-event-id="{event.pk}"] td:nth-child(5)')


def test_physician_labels_a_window_by_keyboard_and_the_next_one_opens(
    live_server, browser, labelling, physicians, clinical
):
    c = clinical
    first, second = labelling["first"], labelling["second"]
    page = sign_in(browser, live_server, physicians[0])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{live_server.url}/annotate/")
    page.keyboard.press("n")
    page.wait_for_url(f"{live_server.url}/annotate/{first[0].pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")

    page.keyboard.press("3")
    add_item(page, "a", "Septic shock")
    cite(page, c["lactate"])
    cite(page, c["norepinephrine"])
    add_item(page, "a", "Respiratory failure")
    cite(page, c["intubation"])
    page.keyboard.press("4")  # the first unrated action, then on to the next
    page.keyboard.press("5")
    wait_saved(page)
    page.screenshot(path=SCREENSHOT, full_page=False)

    # Mid-way, a reload finds the draft.
    page.reload()
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert page.is_checked("input[name=status][value=deteriorating]")
    problems = page.locator('[data-list="acute_problems"] [data-text]')
    assert [problems.nth(i).input_value() for i in range(2)] == [
        "Septic shock",
        "Respiratory failure",
    ]
    first_chips = page.locator(
        '[data-list="acute_problems"] [data-item]'
    ).first.locator("[data-evidence-id]")
    assert first_chips.count() == 2
    assert page.is_checked(
        f'input[name="rating-{c["norepinephrine"].pk}"][value=best_practice]'
    )
    assert page.is_checked(
        f'input[name="rating-{c["intubation"].pk}"][value=acceptable]'
    )

    add_item(page, "d", "Blood cultures")
    cite(page, c["lactate"])
    add_item(page, "f", "Avoid fluid overload")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{live_server.url}/annotate/{first[1].pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert page.locator("input[name=status]:checked").count() == 0

    label = Label.objects.get(assignment=first[0])
    assert label.assignment.state == AssignmentState.SUBMITTED
    assert label.status == "deteriorating"
    assert label.payload["acute_problems"] == [
        {"text": "Septic shock", "evidence": [c["lactate"].pk, c["norepinephrine"].pk]},
        {"text": "Respiratory failure", "evidence": [c["intubation"].pk]},
    ]
    assert {r["event_id"]: r["rating"] for r in label.payload["action_ratings"]} == {
        c["norepinephrine"].pk: "best_practice",
        c["intubation"].pk: "acceptable",
    }
    assert label.payload["added_actions"] == [
        {"text": "Blood cultures", "evidence": [c["lactate"].pk]}
    ]
    assert label.payload["red_flags"] == [
        {"text": "Avoid fluid overload", "evidence": []}
    ]
    assert label.revisions.filter(kind="submit").count() == 1
    assert errors == []

    # The second physician opens the same window: an empty form.
    other = sign_in(browser, live_server, physicians[1])
    other.goto(f"{live_server.url}/annotate/{second[0].pk}/")
    other.wait_for_selector("[data-trajectory][data-ready=true]")
    assert other.locator("input[name=status]:checked").count() == 0
    assert other.locator("[data-items] [data-item]").count() == 0
    assert other.locator(f"{FORM} [data-evidence-id]").count() == 0
    assert other.locator(f"{FORM} input[type=radio]:checked").count() == 0
    assert "Septic shock" not in other.content()


def test_stale_tab_is_told_of_the_conflict_and_errors_show_by_their_fields(
    live_server, browser, labelling, physicians
):
    assignment = labelling["first"][0]
    url = f"{live_server.url}/annotate/{assignment.pk}/"
    first = sign_in(browser, live_server, physicians[0])
    second = first.context.new_page()
    first.goto(url)
    second.goto(url)
    first.wait_for_selector("[data-trajectory][data-ready=true]")
    second.wait_for_selector("[data-trajectory][data-ready=true]")

    first.keyboard.press("2")
    wait_saved(first)
    # The second tab still holds version 0: its save is refused, and says so.
    add_item(second, "f", "Avoid sedation")
    second.wait_for_selector("[data-conflict]:not([hidden])")
    assert "changed in another tab" in second.inner_text("[data-conflict]")
    assert second.get_attribute(FORM, "data-save-state") == "conflict"

    # Submitting with answers missing: the messages sit by their fields, and
    # what was typed stays.
    add_item(first, "a", "x" * 301)
    first.wait_for_selector('[data-errors-for="acute_problems"] .field-error')
    assert "the limit is 300" in first.inner_text('[data-errors-for="acute_problems"]')
    first.fill('[data-list="acute_problems"] [data-text]', "Shock")
    wait_saved(first)
    first.keyboard.press("Control+Enter")
    first.wait_for_selector('[data-errors-for="action_ratings"] .field-error')
    assert "Rate every recorded critical action" in first.inner_text(
        '[data-errors-for="action_ratings"]'
    )
    assert first.input_value('[data-list="acute_problems"] [data-text]') == "Shock"
    assert first.url == url

    # "?" lists the page's shortcuts.
    first.keyboard.press("?")
    help_text = first.inner_text("#shortcut-help")
    assert "Add an acute problem" in help_text and "Submit the label" in help_text

    label = Label.objects.get(assignment=assignment)
    assert label.status == "stable"
    assert label.payload["red_flags"] == []
    assert label.payload["acute_problems"] == [{"text": "Shock", "evidence": []}]
