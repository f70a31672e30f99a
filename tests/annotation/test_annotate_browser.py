"""Labelling a window in the system Chromium, by keyboard, with evidence clicked
in the event table; the draft survives a reload, submit opens the next window,
and a second physician sees none of it."""

import pytest

from annotation.models import Assignment, AssignmentState, Label
from tests.browser import browser_after, sign_in
from windows.tracks import stay_tracks_get

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

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


browser = browser_after("labelling")


def wait_saved(page):
    # A locator's wait, not wait_for_function: the pages' CSP has no
    # 'unsafe-eval', and wait_for_function evaluates a string in the page.
    from playwright.sync_api import expect

    expect(page.locator(FORM)).to_have_attribute(
        "data-save-state", "saved", timeout=30_000
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
    errors = []
    page = sign_in(browser, live_server, physicians[0], errors=errors)

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
    cite(page, c["norepinephrine"])
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
        {"text": "Avoid fluid overload", "evidence": [c["norepinephrine"].pk]}
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
    live_server, browser, labelling, physicians, clinical
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
    # The campaign requires evidence: the page names the item without a word
    # to the server, and nothing is submitted.
    first.keyboard.press("Control+Enter")
    first.wait_for_selector('[data-errors-for="acute_problems"] .field-error')
    assert (
        'Acute problem "Shock" has no evidence event; cite at least one '
        "(campaign setting)."
    ) in first.inner_text('[data-errors-for="acute_problems"]')
    cite(first, clinical["lactate"])
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
    assert label.payload["acute_problems"] == [
        {"text": "Shock", "evidence": [clinical["lactate"].pk]}
    ]
    assert label.assignment.state == AssignmentState.DRAFT


def _plot_point(page, plot: str):
    """Focus the plot named ``plot`` (the key of its first series): the
    keyboard's point shows as uPlot's cursor point; its centre on screen."""
    canvas = page.locator(f'[data-plot="{plot}"] .plot-canvas')
    canvas.scroll_into_view_if_needed()
    canvas.focus()
    point = page.locator(f'[data-plot="{plot}"] .u-cursor-pt:not(.u-off)').first
    point.wait_for(state="attached")
    point.wait_for(state="visible")  # a box with a size (no eval under the CSP)
    box = point.bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_a_point_on_a_plot_is_cited_by_click_and_by_keyboard(
    live_server, browser, labelling, physicians, clinical
):
    c = clinical
    assignment = labelling["first"][0]  # window 0: a heart rate at 20 min
    errors = []
    page = sign_in(browser, live_server, physicians[0], errors=errors)
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")

    # Keyboard: the status in focus, Tab to the heart-rate plot, Enter cites the
    # heart rate behind its point at the window's end.
    page.keyboard.press("2")
    _plot_point(page, "hr")
    page.keyboard.press("Enter")
    status_chips = page.locator("[data-status-item] [data-evidence-id]")
    status_chips.first.wait_for()
    assert status_chips.get_attribute("data-evidence-id") == str(c["heart_rate"].pk)
    # Named as the event table names the heart rate, as a reload names it.
    name = page.locator(
        f'#window-events tr[data-event-id="{c["heart_rate"].pk}"] [data-event-name]'
    ).get_attribute("data-event-name")
    status_chip_name = status_chips.inner_text()
    assert status_chip_name.startswith(name + " · ")

    # Pointer: a new acute problem in focus, a click on the lactate plot's point
    # cites the lactate result the value is carried from.
    page.locator('[data-list="acute_problems"] [data-add-item]').click()
    page.keyboard.type("Hyperlactataemia")
    page.keyboard.press("Enter")
    x, y = _plot_point(page, "lactate")
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    problem_chips = page.locator(
        '[data-list="acute_problems"] [data-item] [data-evidence-id]'
    )
    problem_chips.first.wait_for()
    assert problem_chips.get_attribute("data-evidence-id") == str(c["lactate"].pk)
    # The same point again does not cite it twice.
    page.mouse.click(x, y)
    wait_saved(page)
    assert problem_chips.count() == 1

    # Saved in the draft, and shown again after a reload.
    label = Label.objects.get(assignment=assignment)
    assert label.status == "stable"
    assert label.payload["status_evidence"] == [c["heart_rate"].pk]
    assert label.payload["acute_problems"] == [
        {"text": "Hyperlactataemia", "evidence": [c["lactate"].pk]}
    ]
    problem_chip_name = problem_chips.inner_text()
    page.reload()
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert page.locator("[data-status-item] [data-evidence-id]").count() == 1
    # Each chip keeps its name after the reload (issue 35).
    assert status_chips.inner_text() == status_chip_name
    assert problem_chips.inner_text() == problem_chip_name
    assert errors == []


def test_time_on_task_of_a_reloaded_page_is_kept(
    live_server, browser, labelling, physicians
):
    assignment = labelling["first"][0]
    page = sign_in(browser, live_server, physicians[0])
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    page.keyboard.press("1")
    wait_saved(page)
    saved = Label.objects.get(assignment=assignment)

    # Reading on after the save, then a reload: no save of its own (the
    # reloaded page holds the label's current version) ...
    page.mouse.move(300, 300)
    page.wait_for_timeout(3000)
    page.reload()
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert Label.objects.get(assignment=assignment).version == saved.version

    # ... and those seconds go with the next save.
    page.keyboard.press("2")
    wait_saved(page)
    label = Label.objects.get(assignment=assignment)
    assert label.version == saved.version + 1
    assert label.time_on_task_seconds >= saved.time_on_task_seconds + 2
    last = label.revisions.order_by("-version").first()
    assert last.time_on_task_seconds == label.time_on_task_seconds

    # Only opening a window and leaving it writes nothing.
    other = labelling["first"][1]
    page.goto(f"{live_server.url}/annotate/{other.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    page.wait_for_timeout(1500)
    page.reload()
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    assert not Label.objects.filter(assignment=other).exists()


def test_finder_window_rows_removal_and_escape_by_keyboard(
    live_server, browser, labelling, physicians, clinical
):
    c = clinical
    assignment = labelling["first"][0]
    errors = []
    page = sign_in(browser, live_server, physicians[0], errors=errors)
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("[data-trajectory][data-ready=true]")
    problems = page.locator('[data-list="acute_problems"] [data-item]')
    finder = page.locator("[data-event-finder]")

    # Esc drops a half-typed new item: it never reaches the draft.
    page.keyboard.press("a")
    page.keyboard.type("post")
    page.keyboard.press("Escape")
    assert problems.count() == 0
    page.keyboard.press("2")
    wait_saved(page)
    label = Label.objects.get(assignment=assignment)
    assert label.payload["acute_problems"] == []
    assert not any(
        "post" in str(r.payload["acute_problems"]) for r in label.revisions.all()
    )

    # Enter on a new item that needs evidence opens the finder for it; words
    # narrow the events shown, Enter cites the first match.
    add_item(page, "a", "Shock")
    finder.wait_for(state="visible")
    assert 'acute problem "Shock"' in finder.inner_text()
    page.keyboard.type("heart 88")
    assert page.locator("[data-finder-results] li").count() == 1
    page.keyboard.press("Control+a")
    page.keyboard.type("lact")
    first_match = page.locator("[data-finder-results] li").first
    assert first_match.get_attribute("data-event-id") == str(c["lactate"].pk)
    page.keyboard.press("Enter")
    finder.wait_for(state="hidden")
    chips = problems.first.locator("[data-evidence-id]")
    assert chips.count() == 1
    # No match: said so, nothing cited; Esc closes the finder.
    page.keyboard.press("c")
    page.keyboard.type("zzz")
    assert "No event shown matches" in finder.inner_text()
    page.keyboard.press("Enter")
    assert chips.count() == 1
    page.keyboard.press("Escape")
    finder.wait_for(state="hidden")

    # g selects the window's own rows, group by group; j moves on from there;
    # e cites the selection.
    page.keyboard.press("g")
    selected = page.locator("#window-events tr.is-selected")
    assert "pos-in" in selected.get_attribute("class")
    first_group = selected.get_attribute("data-event-id")
    page.keyboard.press("g")
    second_group = selected.get_attribute("data-event-id")
    assert second_group != first_group
    assert "pos-in" in selected.get_attribute("class")
    rows = page.locator("#window-events tbody tr[data-event-id]")
    ids = [rows.nth(i).get_attribute("data-event-id") for i in range(rows.count())]
    page.keyboard.press("j")
    assert selected.get_attribute("data-event-id") == ids[ids.index(second_group) + 1]
    page.keyboard.press("k")
    page.keyboard.press("e")
    assert chips.count() == 2
    wait_saved(page)
    cited = [c["lactate"].pk, int(second_group)]
    assert Label.objects.get(assignment=assignment).payload["acute_problems"] == [
        {"text": "Shock", "evidence": cited}
    ]

    # x removes the item in focus; Ctrl+Z brings it back with its evidence.
    page.keyboard.press("x")
    assert problems.count() == 0
    assert "Ctrl+Z" in page.inner_text("[data-notice]")
    wait_saved(page)
    assert Label.objects.get(assignment=assignment).payload["acute_problems"] == []
    page.keyboard.press("Control+z")
    assert problems.count() == 1
    wait_saved(page)
    assert Label.objects.get(assignment=assignment).payload["acute_problems"] == [
        {"text": "Shock", "evidence": cited}
    ]

    # Esc in an item being edited gives its text back.
    field = problems.first.locator("[data-text]")
    field.click()
    page.keyboard.press("End")
    page.keyboard.type(" extub")
    page.keyboard.press("Escape")
    assert field.input_value() == "Shock"
    wait_saved(page)
    assert Label.objects.get(assignment=assignment).payload["acute_problems"] == [
        {"text": "Shock", "evidence": cited}
    ]

    # The finder closed without a citation: the page says what a submit will
    # ask, and a submit names the item without asking the server.
    add_item(page, "a", "Delirium")
    finder.wait_for(state="visible")
    page.keyboard.press("Escape")
    finder.wait_for(state="hidden")
    assert 'Acute problem "Delirium" has no evidence event yet' in page.inner_text(
        "[data-notice]"
    )
    page.keyboard.press("Control+Enter")
    message = page.locator('[data-errors-for="acute_problems"] .field-error')
    message.wait_for()
    assert message.inner_text() == (
        'Acute problem "Delirium" has no evidence event; cite at least one '
        "(campaign setting)."
    )
    assert Assignment.objects.get(pk=assignment.pk).state == AssignmentState.DRAFT
    assert errors == []
