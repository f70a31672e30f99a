"""The reference agents against the fake OpenAI-compatible server, checked on
the prompts the server received: local-window sees only its window,
full-context never an event at or after the window's end (nor an outcome
event), its compression rules, rag's top-5 by similarity; and a run's
predictions, tokens and cost, and its baseline submission."""

import re
from datetime import timedelta

import pytest

from agents.base import WindowContext
from agents.models import AgentPrediction, AgentRun, AgentStayState, RunState
from agents.prompts import PROMPT_VERSION, prediction_parse
from agents.reference import FullContextAgent, RagAgent, agents_available
from agents.services import agent_run_start
from exports.models import SubmissionState
from tests.agents.hand_contexts import (
    T0,
    StubLLM,
    event_hours,
    hand_context,
    words_embed,
)
from tests.agents.helpers import run_inline

pytestmark = pytest.mark.django_db

_RANGE = re.compile(r"Window (\d+): hours (-?[\d.]+) to (-?[\d.]+) since ICU")


def prompts(fake_llm) -> list[tuple[float, float, str]]:
    """(window start h, end h, user prompt) of every request the server got."""
    out = []
    for request in fake_llm.requests:
        user = request.body["messages"][-1]["content"]
        found = _RANGE.search(user)
        assert found, user
        out.append((float(found.group(2)), float(found.group(3)), user))
    return out


def _prompts_of_a_done_run(agent, fake_llm, backbone, release, user):
    """``agent`` run through on ``release``: it ends done, and its prompts,
    one a window (four), as prompts() reads them."""
    run = run_inline(agent, release, backbone, user)
    assert run.state == RunState.DONE, run.error
    seen = prompts(fake_llm)
    assert len(seen) == 4
    return seen


def test_local_window_sees_only_its_window(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    seen = _prompts_of_a_done_run(
        "local-window", fake_llm, fake_backbone, tiny_release, admin_user
    )
    shown = 0
    for start, end, prompt in seen:
        for hours in event_hours(prompt):
            assert start <= hours < end, (hours, start, end)
            shown += 1
        assert "Events before this window" not in prompt
    # Window A0 [0, 0.5) h holds only its norepinephrine at 0.17 h, a recorded
    # action of the window: the answer of Recommended Actions, left out of the
    # context (spec section 1), so no window shows any event.
    a0 = [p for s, _, p in seen if s == 0.0]
    assert a0 and all("0.17h" not in p for p in a0)
    assert shown == 0


def test_full_context_never_sees_the_end_or_after(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    seen = _prompts_of_a_done_run(
        "full-context", fake_llm, fake_backbone, tiny_release, admin_user
    )
    for _start, end, prompt in seen:
        assert all(h < end for h in event_hours(prompt)), (end, prompt)
        assert "Death" not in prompt and "Disposition" not in prompt
    # Window A1 [2, 2.5) h: everything before it (the event 3 h before ICU
    # admission included), not the event stamped at 2.5 h nor the one at 3 h.
    (a1,) = [p for s, _, p in seen if s == 2.0 and "-3.00h" in p]
    assert event_hours(a1) == pytest.approx([-3.0, 0.17, 1.0])


def test_context_refuses_an_event_at_its_end():
    ctx = hand_context(3, 2)
    with pytest.raises(ValueError):
        WindowContext(
            **{**ctx.__dict__, "event_times": (*ctx.event_times[:-1], ctx.end)}
        )


def test_full_context_compresses_older_events_first_then_truncates():
    ctx = hand_context(400, 5)
    # Everything raw would take ~10k tokens: over a 1,500-token budget.
    llm = StubLLM(1500)
    agent = FullContextAgent(llm)
    prediction, memory = agent.predict(ctx, {})
    assert prediction["status"] == "stable" and memory == {}
    prompt = llm.sent[-1][-1]["content"]
    assert llm.estimate_tokens(llm.sent[-1][0]["content"] + prompt) <= 1500
    assert "by concept per 6 h" in prompt
    assert "n=" in prompt and "min=" in prompt
    # The window's own five events stay raw.
    assert len([h for h in event_hours(prompt) if 10.0 <= h < 10.5]) == 5
    # A budget too small for the blocks: the oldest are left out, with a marker.
    ctx_many = hand_context(400, 5, concept=lambda i: f"Concept {i}")
    small = StubLLM(900)
    FullContextAgent(small).predict(ctx_many, {})
    tight = small.sent[-1][-1]["content"]
    assert "earlier block(s) of 6 h left out" in tight
    assert small.estimate_tokens(small.sent[-1][0]["content"] + tight) <= 900
    for agent_prompt in (prompt, tight):
        assert "[10.5" not in agent_prompt


def test_rag_picks_the_top_five_past_windows_by_similarity():
    # Past windows 1, 3, 4, 7 and 9 are about shock (norepinephrine, lactate),
    # the others about glucose; the current window is about shock.
    shock = {1, 3, 4, 7, 9}
    events, times = [], []
    for k in range(10):
        for j, name in enumerate(
            ["Norepinephrine", "Lactate"] if k in shock else ["Insulin", "Glucose"]
        ):
            when = T0 + timedelta(hours=k, minutes=5 + j)
            events.append(
                {
                    "event_id": 10 * k + j,
                    "time": when.isoformat(),
                    "hours_since_admit": round((when - T0).total_seconds() / 3600, 4),
                    "kind": "observation",
                    "concept": name,
                    "value_num": 1.0,
                    "unit": "",
                }
            )
            times.append(when)
    for j, name in enumerate(["Norepinephrine", "Lactate", "Heart"]):
        when = T0 + timedelta(hours=10, minutes=5 + j)
        events.append(
            {
                "event_id": 500 + j,
                "time": when.isoformat(),
                "hours_since_admit": round((when - T0).total_seconds() / 3600, 4),
                "kind": "observation",
                "concept": name,
                "value_num": 2.0,
            }
        )
        times.append(when)
    base = hand_context(0, 0)
    ctx = WindowContext(
        **{**base.__dict__, "events": tuple(events), "event_times": tuple(times)}
    )
    llm = StubLLM(3000)
    agent = RagAgent(llm, embed=words_embed)
    retrieved = agent.retrieve(ctx)
    assert {w - 100 for w, _ in retrieved} == shock
    assert all(sim > 0.5 for _, sim in retrieved)
    agent.predict(ctx, {})
    prompt = llm.sent[-1][-1]["content"]
    shown = sorted(int(i) for i in re.findall(r"Similar earlier window (\d+)", prompt))
    assert shown == sorted(shock)
    assert "Insulin" not in prompt
    assert prompt.index("Similar earlier window 9") < prompt.index(
        "Events of this window"
    )


def test_rag_with_the_project_embedding_model(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    run = run_inline("rag", tiny_release, fake_backbone, admin_user)
    assert run.state == RunState.DONE, run.error
    assert run.windows_failed == 0
    seen = prompts(fake_llm)
    # Window A1 has one earlier window (A0), retrieved with its own event only.
    (a1,) = [p for s, _, p in seen if s == 2.0 and "Similar earlier window" in p]
    assert "Similar earlier window 0" in a1
    assert all(h < 2.5 for h in event_hours(a1))
    assert "-3.00h" not in a1  # A0's own window holds only its events


def test_a_run_records_predictions_tokens_cost_and_scores_a_baseline(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    run = run_inline("local-window", tiny_release, fake_backbone, admin_user)
    assert run.state == RunState.DONE
    assert run.windows_done == run.windows_total == 4
    assert AgentPrediction.objects.filter(run=run, error="").count() == 4
    assert set(
        AgentStayState.objects.filter(run=run).values_list("state", flat=True)
    ) == {"done"}
    # The fake server reports 1,000 prompt tokens a request.
    assert run.tokens_in == 4000 and run.requests == 4
    assert run.cost == pytest.approx((4000 * 1.0 + run.tokens_out * 2.0) / 1e6)
    submission = run.submission
    assert submission.state == SubmissionState.SCORED, submission.error
    assert submission.public and submission.prediction_count == 4
    assert submission.baseline["agent"] == "local-window"
    assert submission.baseline["prompt_version"] == PROMPT_VERSION
    assert submission.baseline["backbone"] == "fake-llm"
    assert submission.baseline["plumbing_only"] is True
    assert "status_accuracy" in submission.scores["overall"]


def test_a_failed_reply_is_that_windows_error_and_the_run_goes_on(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    # The reply and its repair both fail (issue 32: the Oracle's repair turn
    # and wording).
    fake_llm.push(content="no json here")
    fake_llm.push(content='{"status": "bad status"}')
    run = run_inline("local-window", tiny_release, fake_backbone, admin_user)
    assert run.windows_failed == 1 and run.windows_done == 4
    (failed,) = AgentPrediction.objects.filter(run=run).exclude(error="")
    assert failed.error.startswith(
        "The reply failed validation twice (after one repair request): the "
        "reply's status 'bad status' is not one of"
    )
    repair = fake_llm.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "no json here"}
    assert "the reply holds no JSON object" in repair[-1]["content"]
    assert run.submission.prediction_count == 3


def test_a_junk_reply_is_repaired_under_the_schema_in_the_servers_dialect(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    fake_backbone.reply_format = "llamacpp_python"
    fake_backbone.server_report = {"detected_at": "set by the test"}
    fake_backbone.save(update_fields=["reply_format", "server_report"])
    fake_llm.push(content='{"status": "stable", "acute_problems": ["..."]}')
    run = run_inline("local-window", tiny_release, fake_backbone, admin_user)
    assert run.windows_failed == 0 and run.windows_done == 4
    assert len(fake_llm.requests) == 5  # four windows and one repair
    schema = fake_llm.requests[0].body["response_format"]["schema"]
    assert fake_llm.requests[0].body["response_format"]["type"] == "json_object"
    item = schema["properties"]["acute_problems"]["items"]
    assert item["pattern"].startswith("^[A-Za-z]")
    assert "has no word" in fake_llm.requests[1].body["messages"][-1]["content"]


def test_prediction_parse_reads_fenced_json_and_refuses_bad_status():
    text = 'Here:\n```json\n{"status": "stable", "acute_problems": ["AKI"]}\n```'
    assert prediction_parse(text)["acute_problems"] == ["AKI"]
    from agents.base import AgentError

    with pytest.raises(AgentError, match="status"):
        prediction_parse('{"status": "fine"}')


def test_icu_evo_is_listed_and_a_run_needs_an_llm_backbone(admin_user, tiny_release):
    names = {a["name"]: a for a in agents_available()}
    assert set(names) == {"full-context", "local-window", "rag", "icu-evo"}
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        agent_run_start(
            user=admin_user,
            release=tiny_release,
            agent="local-window",
            backbone=None,
            enqueue=False,
        )
    assert not AgentRun.objects.exists()


def test_the_prompt_asks_for_no_more_items_than_the_schema_allows():
    from agents.prompts import SYSTEM, prediction_schema

    properties = prediction_schema()["properties"]
    for name in ("acute_problems", "recommended_actions"):
        allowed = properties[name]["maxItems"]
        assert f"at most {allowed} items a list" in SYSTEM
    assert "..." not in SYSTEM
