"""ICU-Evo (agents.icu_evo) against the fake OpenAI-compatible server: PAA on
hand-built series, the append-only critical-event log, the assessment and
insight steps every 12 windows and not in between, a broken insight reply,
and prompts that never hold an event at or after the window's end."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from agents.icu_evo import IcuEvoAgent
from agents.icu_evo import memory as mem
from agents.llm import ChatClient
from tests.agents.helpers import run_inline
from tests.agents.icu_evo_helpers import (
    ADMIT,
    EvoFakeLLM,
    contexts,
    ev,
    prompt_of,
    step_of,
)
from tests.oracle.helpers import started


@pytest.fixture
def evo_llm():
    with started(EvoFakeLLM(latency=0.0)) as fake:
        yield fake


@pytest.fixture
def agent(evo_llm):
    client = ChatClient(
        base_url=evo_llm.base_url,
        model="fake",
        max_retries=0,
        requests_per_minute=100_000,
    )
    yield IcuEvoAgent(client)
    client.close()


def run(agent, fake, ctxs, memory=None):
    """Predict every context in turn, carrying the memory as the runner does;
    per window: (ctx, prediction, memory, steps requested, request bodies)."""
    memory = memory or {}
    out = []
    for ctx in ctxs:
        before = len(fake.requests)
        prediction, memory = agent.predict(ctx, memory)
        json.dumps(memory)  # what the runner stores: JSON
        bodies = [r.body for r in fake.requests[before:]]
        out.append((ctx, prediction, memory, [step_of(b) for b in bodies], bodies))
    return out


def map_series(hours: int = 40) -> list[dict]:
    """MAP and heart rate every hour (ids 1..), nothing critical."""
    events, n = [], 0
    for h in range(hours):
        n += 1
        events.append(ev(n, h + 0.25, "map", 80 + h % 3, unit="mmHg"))
        n += 1
        events.append(ev(n, h + 0.5, "heart_rate", 90, unit="bpm"))
    return events


# --- PAA ------------------------------------------------------------------------


def test_paa_by_time_by_hand():
    start = ADMIT
    end = ADMIT + timedelta(hours=24)
    at = lambda h: ADMIT + timedelta(hours=h)  # noqa: E731
    points = [
        (at(0), 10.0),  # segment 0 (0-3 h), on its start
        (at(2.9), 20.0),  # segment 0
        (at(3), 40.0),  # segment 1, on its start
        (at(10), 5.0),  # segment 3 (9-12 h)
        (at(23.99), 8.0),  # segment 7
        (at(24), 999.0),  # at the end: outside [start, end)
        (at(-1), 999.0),  # before the start
    ]
    assert mem.paa_by_time(points, start=start, end=end, segments=8) == [
        15.0,
        40.0,
        None,
        5.0,
        None,
        None,
        None,
        8.0,
    ]


def test_trend_memory_is_paa_of_the_last_24_hours(agent, evo_llm):
    # Heart rate k at 0.5 h + k h for k = 0..29; window 59 ends at 30 h, so the
    # trend covers 6-30 h: k = 6..29, three a 3-h segment, means 7, 10, ..., 28.
    events = [ev(k + 1, k + 0.5, "heart_rate", float(k), unit="bpm") for k in range(30)]
    ((ctx, _, memory, _, bodies),) = run(agent, evo_llm, contexts(events, [59]))
    trend = memory["trends"]["series"]["heart_rate"]
    assert trend["segments"] == [7.0, 10.0, 13.0, 16.0, 19.0, 22.0, 25.0, 28.0]
    assert trend["last"] == 29.0
    assert memory["trends"]["from_h"] == 6.0
    assert memory["trends"]["to_h"] == 30.0
    assert "heart_rate bpm: 7 10 13 16 19 22 25 28" in prompt_of(bodies[-1])


# --- working memory and critical log --------------------------------------------


def test_working_memory_is_recent_and_bounded(agent, evo_llm):
    events = [ev(n, n * 0.05, "spo2", 97.0) for n in range(1, 200)]  # to 9.95 h
    ((ctx, _, memory, _, _),) = run(agent, evo_llm, contexts(events, [19]))
    ids = [e["id"] for e in memory["working"]]
    # Window 19 ends at 10 h: the last 4 h hold ids 120..199, the last 30 kept.
    assert ids == list(range(170, 200))


def test_critical_log_rules_and_append_only(agent, evo_llm):
    events = map_series(30)
    events += [
        ev(501, 1.0, "map", 60.0, unit="mmHg"),  # hypotension
        ev(502, 2.0, "map", 62.0, unit="mmHg"),  # within 6 h: not again
        ev(503, 2.5, "platelet_count", 120.0, domain="labs"),  # not critical
        ev(504, 3.0, "lactate", 4.5, domain="labs"),  # >= 4
        ev(505, 3.2, "creatinine", 3.4, domain="labs"),  # < 3.5: not critical
        ev(
            506,
            4.0,
            "norepinephrine",
            0.08,
            domain="medication_admin_continuous",
            kind="action",
        ),
        ev(507, 5.0, "ph_arterial", 7.20, domain="labs"),  # <= 7.20
        ev(508, 8.0, "map", 61.0, unit="mmHg"),  # 7 h after 501: again
        ev(509, 9.0, "IMV", None, domain="respiratory_support", kind="action"),
        ev(510, 20.0, "gcs_total", 8.0, domain="patient_assessments"),
    ]
    results = run(agent, evo_llm, contexts(events, [3, 9, 17, 41]))
    logs = [r[2]["critical_log"] for r in results]
    # Each window's log starts with the previous one, entry for entry.
    for earlier, later in zip(logs, logs[1:], strict=False):
        assert later[: len(earlier)] == earlier
    # Events between the sparse windows are logged too.
    assert [(e["event_id"], e["rule"]) for e in logs[-1] if e["source"] == "rule"] == [
        (501, "hypotension"),
        (504, "hyperlactataemia"),
        (506, "vasoactive"),
        (507, "severe_acidaemia"),
        (508, "hypotension"),
        (509, "invasive_ventilation"),
        (510, "coma"),
    ]
    assert [e["event_id"] for e in logs[0]] == [501]
    assert logs[0][0]["window_index"] == 3


def test_critical_log_cap_counts_the_rest():
    events = [ev(n, n * 7.0, "lactate", 5.0) for n in range(1, 301)]
    log, not_logged = mem.critical_append([], events, window_index=0)
    assert len(log) == mem.CRITICAL_LOG_CAP
    assert not_logged == 300 - mem.CRITICAL_LOG_CAP
    assert log[-1]["event_id"] == mem.CRITICAL_LOG_CAP


# --- assessment and insight every 12 windows ------------------------------------


def test_summary_and_hypotheses_every_12_windows(agent, evo_llm):
    results = run(agent, evo_llm, contexts(map_series(20), range(30)))
    steps = {r[0].window_index: r[3] for r in results}
    for index, requested in steps.items():
        if index in (12, 24):
            assert requested == ["assessment", "insight", "predict"], index
        else:
            assert requested == ["predict"], index
    summaries = [[s["text"] for s in r[2]["summaries"]] for r in results]
    hypotheses = [[h["statement"] for h in r[2]["hypotheses"]] for r in results]
    assert summaries[11] == [] and hypotheses[11] == []
    for index in range(12, 24):
        assert summaries[index] == ["Summary 1: course so far."]
        assert hypotheses[index] == ["Hypothesis 1: vasoplegic shock."]
    assert summaries[24][-1] == "Summary 2: course so far."
    assert hypotheses[29] == ["Hypothesis 2: vasoplegic shock."]
    # The predictor reads the memory: summary and hypotheses in its prompt.
    predict_prompt = prompt_of(results[13][4][-1])
    assert "Summary 1: course so far." in predict_prompt
    assert "[accepted] Hypothesis 1: vasoplegic shock." in predict_prompt
    # Supporting evidence cites an event the agent was given.
    cited = results[12][2]["hypotheses"][0]["supporting"][0]["event_id"]
    assert cited in {e["event_id"] for e in results[12][0].events}
    assert results[-1][2]["errors"] == []


def test_sparse_windows_update_at_each_new_6_hour_block(agent, evo_llm):
    results = run(agent, evo_llm, contexts(map_series(24), [3, 20, 22, 40]))
    updated = [r[0].window_index for r in results if "assessment" in r[3]]
    assert updated == [20, 40]
    assert [s["window_index"] for s in results[-1][2]["summaries"]] == [20, 40]


def test_broken_insight_reply_keeps_previous_hypotheses(agent, evo_llm):
    first = run(agent, evo_llm, contexts(map_series(20), range(13)))
    memory = first[-1][2]
    kept = memory["hypotheses"]
    assert kept and memory["errors"] == []

    evo_llm.insight = lambda prompt, n: "The patient is probably septic."  # no JSON
    (_, prediction, after, steps, _) = run(
        agent, evo_llm, contexts(map_series(20), [24]), memory
    )[0]
    assert steps == ["assessment", "insight", "predict"]
    assert after["hypotheses"] == kept
    assert after["summaries"][-1]["text"] == "Summary 2: course so far."
    assert after["errors"] == [
        {
            "window_index": 24,
            "step": "insight",
            "message": "the reply holds no JSON object",
        }
    ]
    assert prediction["status"] == "stable"


def test_insight_citing_an_event_not_given_is_refused(agent, evo_llm):
    memory = run(agent, evo_llm, contexts(map_series(20), range(13)))[-1][2]
    kept = memory["hypotheses"]
    evo_llm.insight = lambda prompt, n: json.dumps(
        {
            "hypotheses": [
                {
                    "statement": "cites the future",
                    "supporting": [{"text": "later MAP", "event_id": 39}],
                    "counter": [],
                }
            ]
        }
    )
    # Window 24 ends at 12.5 h; event 39 is MAP at 19.25 h (not in its context).
    ctx = next(contexts(map_series(20), [24]))
    _, after = agent.predict(ctx, memory)
    assert after["hypotheses"] == kept
    assert after["errors"][-1]["step"] == "insight"
    assert "#39" in after["errors"][-1]["message"]


def test_assessment_names_critical_events_append_only(agent, evo_llm):
    evo_llm.assessment = lambda prompt, n: json.dumps(
        {
            "summary": "Stable haemodynamics.",
            "critical_events": [{"event_id": 3, "note": "first MAP trend"}],
        }
    )
    results = run(agent, evo_llm, contexts(map_series(20), range(11, 14)))
    log = results[-1][2]["critical_log"]
    assert [(e["event_id"], e["source"], e["note"]) for e in log] == [
        (3, "assessment", "first MAP trend")
    ]
    assert results[0][2]["critical_log"] == []


# --- leak-proof prompts ---------------------------------------------------------

_HOURS = re.compile(r"\[(-?\d+\.\d+)h\]")
_IDS = re.compile(r"#(\d+)")


def test_prompts_never_hold_an_event_at_or_after_the_window_end(agent, evo_llm):
    # A note every 20 min (text naming its id), MAP every hour; events sit on
    # window ends too (every 0.5 h is a window boundary).
    events = map_series(16)
    for n in range(1, 48):
        events.append(
            ev(
                1000 + n,
                n / 3,
                "nursing_note",
                domain="other",
                text=f"note-{1000 + n}",
            )
        )
    by_id = {e["event_id"]: e for e in events}
    results = run(agent, evo_llm, contexts(events, range(26)))
    assert sum("assessment" in r[3] for r in results) == 2
    for ctx, _, _, _, bodies in results:
        end_h = ctx.window_index * 0.5 + 0.5
        for body in bodies:
            prompt = prompt_of(body)
            for hours in _HOURS.findall(prompt):
                assert float(hours) < end_h, (ctx.window_index, hours)
            for cited in _IDS.findall(prompt):
                assert by_id[int(cited)]["hours_since_admit"] < end_h
            for note in re.findall(r"note-(\d+)", prompt):
                assert by_id[int(note)]["hours_since_admit"] < end_h
    # Not vacuous: the last window's prompts show events up to its end.
    last_prompt = prompt_of(results[-1][4][-1])
    assert "note-1038" in last_prompt  # 12.67 h, window 25 is 12.5-13 h


def test_memory_stays_bounded_over_a_long_stay(agent, evo_llm):
    events, n = [], 0
    for h in range(0, 96):
        for category, value in (("map", 60.0), ("lactate", 5.0), ("heart_rate", 130)):
            n += 1
            events.append(ev(n, h + 0.1 * (n % 3), category, value))
    results = run(agent, evo_llm, contexts(events, range(0, 192, 6)))
    memory = results[-1][2]
    assert len(memory["working"]) <= mem.WORKING_EVENTS
    assert len(memory["summaries"]) <= 8
    assert len(json.dumps(memory)) < 40_000
    assert IcuEvoAgent.prompt_version == "predictor-v2+assessment-v1+insight-v1"


# --- the memory partial ---------------------------------------------------------


def test_memory_partial_renders_every_component(agent, evo_llm):
    from django.template.loader import render_to_string

    evo_llm.insight = lambda prompt, n: json.dumps(
        {
            "hypotheses": [
                {
                    "statement": "<script>alert(1)</script> fluid-refractory",
                    "supporting": [{"text": "MAP 60 after bolus", "event_id": 501}],
                    "counter": [{"text": "lactate clearing"}],
                }
            ]
        }
    )
    events = map_series(10) + [ev(501, 1.0, "map", 60.0, unit="mmHg")]
    memory = run(agent, evo_llm, contexts(events, range(12, 14)))[-1][2]
    memory["errors"] = [{"window_index": 13, "step": "insight", "message": "oops"}]
    html = render_to_string("agents/_icu_evo_memory.html", {"memory": memory})
    assert "Summary 1: course so far." in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; fluid-refractory" in html
    assert "<script>alert" not in html
    assert 'data-status="rejected"' in html  # one for, one against
    assert "for: MAP 60 after bolus" in html and "#501" in html
    assert "against: lactate clearing" in html
    assert html.count("data-critical") == 1 and "MAP &lt; 70 mmHg" in html
    assert 'data-trend="map"' in html and 'data-trend="heart_rate"' in html
    assert "window 13, insight: oops" in html

    empty = render_to_string("agents/_icu_evo_memory.html", {"memory": {}})
    assert "No memory yet" in empty


# --- through the runner -----------------------------------------------------------


@pytest.mark.django_db
def test_a_run_stores_each_stays_memory_and_scores_a_baseline(
    fake_llm, fake_backbone, tiny_release, tiny_stays, admin_user
):
    from agents.models import AgentPrediction, AgentStayState, RunState

    run = run_inline("icu-evo", tiny_release, fake_backbone, admin_user)
    assert run.state == RunState.DONE, run.error
    assert AgentPrediction.objects.filter(run=run, error="").count() == 4
    stay_a = tiny_stays["stays"][0]
    memory = AgentStayState.objects.get(run=run, stay=stay_a).memory
    second_window = tiny_stays["windows"]["A"][1]
    norepinephrine = tiny_stays["events"]["norepinephrine"].pk
    # The norepinephrine is an action of the first window: that window's context
    # leaves it out (the answer of Recommended Actions, spec section 1), so the
    # critical log takes it at the second window, where it is in the past.
    assert [
        (e["event_id"], e["rule"], e["window_index"]) for e in memory["critical_log"]
    ] == [(norepinephrine, "vasoactive", second_window.index)]
    assert memory["window_index"] == tiny_stays["windows"]["A"][1].index
    # Stay A's events at its second window's end (2.5 h) and after are not in
    # any prompt (every request here is a predictor's: no 6-h mark reached).
    at_end = tiny_stays["events"]["at_end"].pk
    after = tiny_stays["events"]["after"].pk
    for request in fake_llm.requests:
        prompt = prompt_of(request.body)
        assert f"#{at_end} " not in prompt and f"#{after} " not in prompt
        assert "Death" not in prompt
    submission = run.submission
    assert submission.baseline["agent"] == "icu-evo"
    assert submission.baseline["prompt_version"] == IcuEvoAgent.prompt_version


def test_assessment_reads_what_came_since_the_previous_one(agent, evo_llm):
    events = map_series(14) + [
        ev(501, 1.0, "map", 60.0, unit="mmHg"),
        ev(502, 8.0, "map", 61.0, unit="mmHg"),
    ]
    results = run(agent, evo_llm, contexts(events, [12, 24]))
    (first,) = [b for b in results[0][4] if step_of(b) == "assessment"]
    (second,) = [b for b in results[1][4] if step_of(b) == "assessment"]
    critical = lambda body: prompt_of(body).split("## Critical events since then")[1]  # noqa: E731
    assert "#501" in critical(first) and "#502" not in critical(first)
    assert "#502" in critical(second) and "#501" not in critical(second)
    recent = prompt_of(second).split("## Events since the previous assessment")[1]
    recent = recent.split("## Trends")[0]
    hours = [float(h) for h in _HOURS.findall(recent)]
    assert hours and min(hours) >= 6.5 and max(hours) < 12.5
    assert "Summary 1: course so far." in prompt_of(second)


BUDGET = 550


def test_prompts_fit_the_backbones_budget(evo_llm):
    # The server counts the prompts at 3 characters a token, as the client's
    # estimate does: the client learns its ratio from these counts (issue 32).
    evo_llm.prompt_chars_per_token = 3.0
    client = ChatClient(
        base_url=evo_llm.base_url,
        model="fake",
        max_retries=0,
        requests_per_minute=100_000,
        prompt_budget=BUDGET,
    )
    agent = IcuEvoAgent(client)
    events = map_series(14) + [
        ev(600 + n, n * 0.25, "lactate", 5.0, domain="labs") for n in range(1, 50)
    ]
    try:
        results = run(agent, evo_llm, contexts(events, range(20, 26)))
    finally:
        client.close()
    sizes = {}
    for _, _, _, steps, bodies in results:
        for step, body in zip(steps, bodies, strict=True):
            text = "".join(m["content"] for m in body["messages"])
            sizes.setdefault(step, []).append(client.estimate_tokens(text))
    assert set(sizes) == {"assessment", "insight", "predict"}
    assert all(size <= BUDGET for values in sizes.values() for size in values), sizes
    # The assessment showed fewer than its 60 events, the predictor fewer than
    # without a budget: something was left out to fit.
    assessments = [
        prompt_of(b) for r in results for b in r[4] if step_of(b) == "assessment"
    ]
    assert assessments and "(latest 60 at most)" not in assessments[0]
    unbounded = IcuEvoAgent(None)
    ctx = next(contexts(events, [25]))
    memory = results[-1][2]
    text = "".join(m["content"] for m in unbounded.messages(ctx, memory))
    assert client.estimate_tokens(text) > BUDGET
