"""The hindsight prompt: the default template, the token budget on a long stay,
whole records only, and evidence limited to the ids the prompt showed."""

import re
from datetime import timedelta

import pytest

from oracle.context import window_contexts_build
from oracle.models import PromptTemplate
from oracle.prompts import (
    DEFAULT_VERSION,
    DISCHARGE_CHARS,
    NOTE_CHARS,
    PromptBudgetError,
    event_line,
    prompt_build,
    prompt_default_get_or_create,
    tokens_estimate,
)
from oracle.schema import ReplyError, reply_parse
from tests.factories import (
    at,
    coded_procedure,
    discharge_summary,
    drip,
    lab,
    make_events,
    radiology_report,
    vital,
)
from tests.oracle.helpers import stable_stay, windows_of
from windows.models import Domain, EventKind

pytestmark = pytest.mark.django_db

LINE = re.compile(r"^\[(\d+)\] ")


def test_the_default_template_exists_once():
    template = prompt_default_get_or_create()
    again = prompt_default_get_or_create()

    assert (
        template.pk == again.pk
        and template.version == DEFAULT_VERSION == "hindsight-v2"
    )
    # The example reply shows the shape, with no "..." a model could copy.
    assert '"..."' not in template.instructions
    assert template.token_budget == 12000
    assert "JSON" in template.system and "Event ids" not in template.system
    assert "evidence" in template.instructions
    assert PromptTemplate.objects.filter(version=DEFAULT_VERSION).count() == 1


def test_tokens_are_estimated_as_characters_over_four():
    assert tokens_estimate("") == 0
    assert tokens_estimate("abcd" * 10) == 10
    assert tokens_estimate("abcde") == 2


@pytest.fixture
def long_stay_context():
    """Window 60 (120 h) of a 240-h stay with vitals every 5 minutes, labs every
    6 h, and a norepinephrine start inside the window."""
    stay = stable_stay(hours=240)
    make_events(
        admission=stay.admission,
        count=240 * 12,
        start=at(stay, 0),
        every=timedelta(minutes=5),
        category="respiratory_rate",
        name="Respiratory rate",
        value_num=18,
        unit="/min",
    )
    make_events(
        admission=stay.admission,
        count=40,
        start=at(stay, 0),
        every=timedelta(hours=6),
        domain=Domain.LABS,
        category="lactate",
        name="Lactate",
        value_num=1.1,
        unit="mmol/L",
        kind=EventKind.OBSERVATION,
    )
    action = drip(stay, "norepinephrine", 0.05, 120.2)
    window = [w for w in windows_of(stay) if w.index == 60]
    [context] = window_contexts_build(windows=window)
    return context, action


def shown_lines(prompt) -> dict[int, str]:
    user = prompt.messages[-1]["content"]
    return {
        int(LINE.match(line).group(1)): line
        for line in user.splitlines()
        if LINE.match(line)
    }


def test_a_long_stay_is_compressed_to_the_budget_by_whole_records(long_stay_context):
    context, action = long_stay_context
    template = PromptTemplate(
        version="t",
        system="Be brief.",
        instructions="Reply in JSON.",
        token_budget=2500,
    )
    uncompressed = prompt_build(
        context=context,
        template=PromptTemplate(
            version="u",
            system="Be brief.",
            instructions="Reply in JSON.",
            token_budget=10**6,
        ),
    )

    prompt = prompt_build(context=context, template=template)

    assert uncompressed.estimated_tokens > 2500 and not uncompressed.compressions
    assert prompt.estimated_tokens <= 2500
    assert prompt.compressions and "events outside the window" in prompt.compressions[0]
    events = {e["id"]: e for e in context.events}
    lines = shown_lines(prompt)
    # Every record shown is whole, and exactly the prompt's ids are shown.
    assert set(lines) == set(prompt.event_ids)
    for pk, line in lines.items():
        event = events.get(pk) or next(
            e for e in context.recorded_actions if e["id"] == pk
        )
        assert line == event_line(event)
    # The recorded action and every event inside the window are kept; what was
    # dropped outside the window is farther from it than what was kept.
    assert action.pk in prompt.event_ids
    assert f"Event ids to rate: {action.pk}" in prompt.messages[-1]["content"]
    start, end = context.hours_since_admit, context.hours_since_admit + 0.5

    def distance(e):
        h = e["hours"]
        return 0 if start <= h < end else min(abs(h - start), abs(h - end))

    inside = {pk for pk, e in events.items() if distance(e) == 0}
    assert inside <= prompt.event_ids
    kept = [distance(e) for pk, e in events.items() if pk in prompt.event_ids]
    dropped = [distance(e) for pk, e in events.items() if pk not in prompt.event_ids]
    assert dropped and max(kept) <= min(dropped)


def test_a_tighter_budget_coarsens_the_summary(long_stay_context):
    context, _ = long_stay_context
    prompt = prompt_build(
        context=context,
        template=PromptTemplate(
            version="t", system="x", instructions="y", token_budget=1200
        ),
    )

    assert prompt.estimated_tokens <= 1200
    assert any("summary coarsened" in c for c in prompt.compressions)
    assert "Trajectory summary (" in prompt.messages[-1]["content"]


def test_a_budget_too_small_for_the_essentials_is_refused(long_stay_context):
    context, _ = long_stay_context
    with pytest.raises(PromptBudgetError, match="budget is 100"):
        prompt_build(
            context=context,
            template=PromptTemplate(
                version="t", system="x", instructions="y" * 2000, token_budget=100
            ),
        )


def test_evidence_must_come_from_the_prompt_not_just_the_context(long_stay_context):
    context, action = long_stay_context
    prompt = prompt_build(
        context=context,
        template=PromptTemplate(
            version="t", system="x", instructions="y", token_budget=3000
        ),
    )
    hidden = sorted(context.allowed_event_ids - prompt.event_ids)[0]
    shown = sorted(prompt.event_ids - {action.pk})[0]
    reply = (
        '{"status": "stable", "status_evidence": [%d], "acute_problems": [{"text": "Shock", '
        '"evidence": [%d]}], "action_ratings": [{"event_id": %d, "rating": "acceptable", '
        '"evidence": []}], "added_actions": [], "red_flags": []}'
        % (shown, hidden, action.pk)
    )

    reply_parse(reply, context=context)  # the context alone would allow it
    with pytest.raises(ReplyError, match=str(hidden)):
        reply_parse(reply, context=context, allowed_event_ids=prompt.event_ids)


def test_the_prompt_holds_the_static_context_summary_and_outcome():
    stay = stable_stay(hours=24)
    lab(stay, "creatinine", 1.0, 3, "mg/dL")
    [context] = window_contexts_build(windows=[windows_of(stay)[3]])

    template = prompt_default_get_or_create()
    prompt = prompt_build(context=context, template=template)

    user = prompt.messages[-1]["content"]
    assert (
        "Admission diagnosis (coded after discharge): A41.9 Sepsis, unspecified organism"
        in user
    )
    assert "hospital outcome: survived" in user
    assert "h0-6:" in user and "h18-24:" in user
    assert "Window 3: +6.00h to +6.50h" in user
    assert "Event ids to rate: none" in user
    assert prompt.messages[0] == {"role": "system", "content": template.system}


def test_coded_records_are_marked_as_coded_after_discharge_in_their_own_section():

    stay = stable_stay(hours=24)
    coded_procedure(stay, 6.1)
    vital(stay, "temp_c", 36.7, 6.2, "°C", name="Temperature Fahrenheit")
    [context] = window_contexts_build(windows=[windows_of(stay)[3]])

    prompt = prompt_build(context=context, template=prompt_default_get_or_create())

    user = prompt.messages[-1]["content"]
    head, _, rest = user.partition("## Coded after discharge")
    assert rest, "no coded section"
    section = rest.split("\n## ")[0]
    assert (
        "- billed 2024-01-02: ICD-10-PCS 5A1955Z Respiratory Ventilation, Greater than "
        "96 Consecutive Hours" in section
    )
    assert "not citable" in user.split("## Coded after discharge")[1].splitlines()[0]
    # Nowhere else: not among the events, not among the actions to rate.
    assert user.count("5A1955Z") == 1
    assert "Admission diagnosis (coded after discharge)" in head
    # The event is named by its concept, never by a source label in another unit.
    assert "Temperature = 36.7 °C" in user
    assert "Fahrenheit" not in user


# Clinical notes (issue 21) ------------------------------------------------------


def _notes_stay(report_text: str, summary_text: str):

    stay = stable_stay(hours=24)
    report = radiology_report(stay, 6.1, report_text)
    discharge_summary(stay, 40, summary_text)
    [context] = window_contexts_build(windows=[windows_of(stay)[3]])
    return context, report


def test_a_report_is_an_event_line_with_its_findings_and_the_summary_is_apart():
    findings = "FINDINGS: New bilateral airspace opacities. IMPRESSION: ARDS."
    context, report = _notes_stay(findings, "Brief Hospital Course: recovered.")

    prompt = prompt_build(context=context, template=prompt_default_get_or_create())

    user = prompt.messages[-1]["content"]
    [line] = [x for x in user.splitlines() if x.startswith(f"[{report.pk}] ")]
    assert findings in line and "CHEST (PORTABLE AP)" in line
    assert report.pk in prompt.event_ids
    section = user.split("## Discharge summary")[1].split("\n## ")[0]
    assert "written at discharge" in section.splitlines()[0]
    assert "not citable" in section.splitlines()[0]
    assert "Brief Hospital Course: recovered." in section
    assert user.count("Brief Hospital Course") == 1


def test_long_notes_are_cut_with_a_marker_within_the_budget():
    findings = "FINDINGS: " + "opacity " * 1000
    summary = "Brief Hospital Course: " + "stable day. " * 2000
    context, report = _notes_stay(findings, summary)
    template = prompt_default_get_or_create()

    prompt = prompt_build(context=context, template=template)
    user = prompt.messages[-1]["content"]
    [line] = [x for x in user.splitlines() if x.startswith(f"[{report.pk}] ")]
    assert "FINDINGS: opacity" in line and "[…truncated]" in line
    assert len(line) < NOTE_CHARS + 200
    section = user.split("## Discharge summary")[1].split("\n## ")[0]
    assert "[…truncated]" in section
    assert DISCHARGE_CHARS - 100 < len(section) < DISCHARGE_CHARS + 400

    # A budget that cannot hold the long summary cuts it further, by rule.
    tight = prompt_build(
        context=context, template=template, budget=prompt.estimated_tokens - 500
    )
    assert "discharge summary cut to 600 characters" in tight.compressions
    section = tight.messages[-1]["content"].split("## Discharge summary")[1]
    assert len(section.split("\n## ")[0]) < 600 + 300
    assert tight.estimated_tokens <= prompt.estimated_tokens - 500
