"""Notes in the bedside contexts (issue 21): a radiology report is in every
context from its stored time on, never before; a discharge summary is in no
bedside context, no agent's context and no agent's prompt, whatever the window;
an agent's prompt line holds a report's findings, a long one cut with a marker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agents.context import stay_contexts
from agents.prompts import NOTE_CHARS, TRUNCATION_MARK, event_line, events_text
from tests.factories import make_event, make_stay
from windows.models import Domain, EventKind, Window
from windows.selectors_context import bedside_events
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db

SUMMARY = "DISCHARGE-SUMMARY Brief Hospital Course: died of septic shock."


def _note(stay, hours: float, text: str, **fields):
    defaults = {
        "domain": Domain.NOTES,
        "category": "radiology_report",
        "name": "CHEST (PORTABLE AP)",
        "value_num": None,
        "unit": "",
        "value_text": text,
        "source_table": "radiology",
    }
    defaults.update(fields)
    return make_event(
        admission=stay.admission,
        time=stay.intime + timedelta(hours=hours),
        **defaults,
    )


@pytest.fixture
def stay():
    stay = make_stay(hours=24)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    _note(stay, 5, "FINDINGS: New bilateral opacities. IMPRESSION: ARDS.")
    _note(stay, 13, "FINDINGS: " + "worsening effusion " * 200)
    for hours in (-2, 10, 23.9):  # before the stay, inside, at its very end
        _note(
            stay,
            hours,
            SUMMARY,
            kind=EventKind.OUTCOME,
            category="discharge_summary",
            name="Discharge summary",
            source_table="discharge",
        )
    return stay


def test_reports_from_their_time_on_and_summaries_never(stay):
    for window in Window.objects.filter(stay=stay):
        events = list(bedside_events(window=window))
        reports = [e for e in events if e.category == "radiology_report"]
        expected = sum(
            1 for h in (5, 13) if stay.intime + timedelta(hours=h) < window.end
        )
        assert len(reports) == expected, window.index
        assert all(e.time < window.end for e in reports)
        assert not [e for e in events if e.category == "discharge_summary"]


def test_agent_contexts_and_prompts_hold_reports_never_summaries(stay):
    windows = list(Window.objects.filter(stay=stay).order_by("index"))
    contexts = list(stay_contexts(stay, [w.pk for w in windows]))
    assert len(contexts) == len(windows)
    seen_reports = 0
    for ctx in contexts:
        text = events_text(list(ctx.events))
        assert "DISCHARGE-SUMMARY" not in text
        assert "DISCHARGE-SUMMARY" not in str(ctx.payload())
        notes = [e for e in ctx.events if e["domain"] == "notes"]
        assert all(e["category"] == "radiology_report" for e in notes)
        seen_reports += len(notes)
    assert seen_reports > 0
    last = contexts[-1]
    lines = [event_line(e) for e in last.events if e["domain"] == "notes"]
    assert lines[0].endswith("FINDINGS: New bilateral opacities. IMPRESSION: ARDS.")
    assert "(CHEST (PORTABLE AP))" in lines[0]
    long = lines[1]
    assert long.endswith(TRUNCATION_MARK)
    assert "FINDINGS: worsening effusion" in long
    assert len(long.split(": ", 1)[1]) <= NOTE_CHARS


def test_a_note_of_another_category_is_never_bedside(stay):
    other = _note(stay, 3, "Progress note: doing well.", category="progress_note")
    for window in Window.objects.filter(stay=stay):
        ids = set(bedside_events(window=window).values_list("id", flat=True))
        assert other.pk not in ids
    last = Window.objects.filter(stay=stay).order_by("-index").first()
    assert bedside_events(window=last).filter(category="radiology_report").count() == 2


def test_full_context_agent_keeps_a_reports_findings_when_aggregating(stay):
    from agents.prompts import NOTE_AGGREGATE_CHARS
    from agents.reference import _BlockFold

    [ctx] = list(
        stay_contexts(stay, [Window.objects.filter(stay=stay).latest("index").pk])
    )
    fold = _BlockFold()
    fold.add(list(ctx.events))
    lines = [line for _, block_lines in fold.lines() for line in block_lines]
    [short] = [x for x in lines if "New bilateral opacities" in x]
    assert short.endswith("last=FINDINGS: New bilateral opacities. IMPRESSION: ARDS.")
    [long] = [x for x in lines if "worsening effusion" in x]
    last = long.split("last=", 1)[1]
    assert last.startswith("FINDINGS: worsening effusion")
    assert last.endswith(TRUNCATION_MARK) and len(last) <= NOTE_AGGREGATE_CHARS
    assert not [x for x in lines if "DISCHARGE-SUMMARY" in x]
