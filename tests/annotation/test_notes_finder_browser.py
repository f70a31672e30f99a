"""A radiology report on the labelling page (issue 21), in the system Chromium:
the event finder finds it by a word of its findings and cites it to an item
that is saved with it; the discharge summary is shown apart, written at
discharge, and the finder never offers it."""

import pytest

from annotation.models import Assignment, Label
from tests.browser import chromium, sign_in
from tests.factories import discharge_summary, radiology_report
from windows.tracks import stay_tracks_get

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FINDINGS = (
    "FINDINGS: Moderate left pleural effusion with adjacent atelectasis. "
    + "Lines and tubes unchanged. " * 8
    + "IMPRESSION: Left effusion."
)


@pytest.fixture
def notes(stay, clinical):
    report = radiology_report(stay, 20 / 60, FINDINGS)  # window 0
    # A day after the stay (12 h long).
    discharge_summary(stay, 12 + 24, "Brief Hospital Course: zanzibar recovery.")
    return report


@pytest.fixture
def browser(campaign, notes, stay):
    stay_tracks_get(stay=stay)
    with chromium() as browser:
        yield browser


def test_finder_cites_a_report_and_never_offers_the_discharge_summary(
    live_server, browser, physicians, notes, gold_windows
):
    from playwright.sync_api import expect

    assignment = Assignment.objects.get(annotator=physicians[0], window=gold_windows[0])
    errors = []
    page = sign_in(browser, live_server, physicians[0], errors=errors)
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")

    summary = page.locator("[data-discharge-summaries]")
    assert "Written at discharge" in summary.inner_text()
    row = page.locator(f'#window-events tr[data-event-id="{notes.pk}"]')
    assert "pos-in" in row.get_attribute("class")

    page.keyboard.press("a")
    page.keyboard.type("Pleural effusion")
    page.keyboard.press("Enter")
    finder = page.locator("[data-event-finder]")
    finder.wait_for(state="visible")
    page.keyboard.type("zanzibar")
    assert "No event shown matches" in finder.inner_text()
    page.keyboard.press("Control+a")
    page.keyboard.type("atelectasis")
    first = page.locator("[data-finder-results] li").first
    assert first.get_attribute("data-event-id") == str(notes.pk)
    page.keyboard.press("Enter")
    finder.wait_for(state="hidden")
    page.keyboard.press("2")
    expect(page.locator("[data-label-form]")).to_have_attribute(
        "data-save-state", "saved", timeout=30_000
    )
    label = Label.objects.get(assignment=assignment)
    [problem] = label.payload["acute_problems"]
    assert problem["text"] == "Pleural effusion"
    assert problem["evidence"] == [notes.pk]
    assert not errors
