"""The agents on the Oracle's machinery (issue 32, item 1): prompts within
the backbone's budget by the server's own token count, never sent over it,
and the same failure reasons."""

import math

import pytest

from agents.base import AgentError
from agents.icu_evo import IcuEvoAgent
from agents.llm import ChatClient
from agents.reference import FullContextAgent, LocalWindowAgent, RagAgent
from tests.agents.hand_contexts import hand_context, words_embed
from tests.agents.helpers import run_queued

BUDGET = 700
# The server's tokenizer gives a token per 2 characters; the client's
# uncalibrated estimate assumes 3 (what made rag, full-context and icu-evo go
# over in the issue).
SERVER_CHARS_PER_TOKEN = 2.0


def server_count(messages) -> int:
    text = "\n".join(m.get("content") or "" for m in messages)
    return int(len(text) / SERVER_CHARS_PER_TOKEN) + 4 * len(messages)


def client_for(fake, **options) -> ChatClient:
    settings = {
        "base_url": fake.base_url,
        "model": "fake",
        "max_retries": 0,
        "requests_per_minute": 100_000,
        "prompt_budget": BUDGET,
        "tokenizer": "llamacpp_python",
        "budget_formula": f"{BUDGET} (context window 2048 - reply 1284 - margin 64)",
    }
    settings.update(options)
    return ChatClient(**settings)


@pytest.mark.parametrize(
    "make",
    [
        LocalWindowAgent,
        FullContextAgent,
        lambda llm: RagAgent(llm, embed=words_embed),
        IcuEvoAgent,
    ],
    ids=["local-window", "full-context", "rag", "icu-evo"],
)
def test_every_reference_agent_fits_the_servers_count_of_its_prompt(fake_llm, make):
    fake_llm.prompt_chars_per_token = SERVER_CHARS_PER_TOKEN
    # 400 events before the window and 80 in it: none of the agents' raw
    # contexts fits 700 tokens.
    ctx = hand_context(400, 80)
    client = client_for(fake_llm)
    try:
        prediction, _ = make(client).predict(ctx, {})
    finally:
        client.close()
    assert prediction["status"] == "stable"
    assert fake_llm.requests and fake_llm.counted
    for request in fake_llm.requests:
        messages = request.body["messages"]
        assert server_count(messages) <= BUDGET
        # By the old uncalibrated estimate the prompt would have looked
        # smaller than it is: only the server's count keeps it in.
        text = "".join(m["content"] for m in messages)
        assert math.ceil(len(text) / 3.0) < server_count(messages)
    prompt = fake_llm.requests[-1].body["messages"][-1]["content"]
    assert "left out" in prompt or "Similar earlier window" not in prompt


def test_a_prompt_over_the_budget_is_never_sent(fake_llm):
    fake_llm.prompt_chars_per_token = SERVER_CHARS_PER_TOKEN
    client = client_for(fake_llm, prompt_budget=50, budget_formula="50 (formula)")
    try:
        with pytest.raises(AgentError) as error:
            client.chat([{"role": "user", "content": "Heart rate 80 bpm. " * 20}])
    finally:
        client.close()
    assert "by the server's count; it does not fit its budget of 50 (formula)" in str(
        error.value
    )
    assert not fake_llm.requests


def test_the_estimate_follows_the_servers_counts(fake_llm):
    """Without a tokenizer, the client's estimate learns the server's ratio
    from ``usage.prompt_tokens``, as the Oracle's does."""
    fake_llm.prompt_chars_per_token = SERVER_CHARS_PER_TOKEN
    client = client_for(fake_llm, tokenizer="", prompt_budget=None)
    try:
        text = "Lactate 4.1 mmol/L, MAP 58 mmHg. " * 30
        before = client.estimate_tokens(text)
        client.chat([{"role": "user", "content": text}])
        after = client.estimate_tokens(text)
    finally:
        client.close()
    assert before == math.ceil(len(text) / 3.0)
    assert after >= len(text) / SERVER_CHARS_PER_TOKEN
    assert client.prompt_log == [("", int(len(text) / 2.0), None)]


LLAMA_OVERFLOW = {
    "error": {
        "message": "Requested tokens (2600) exceed context window of 2048",
        "type": "invalid_request_error",
    }
}


def test_a_shorter_window_the_server_reports_becomes_the_budget(fake_llm):
    """llama-cpp-python's server does not say its n_ctx (2048 by default), so
    the budget assumes 4096; its refusal names the real window, and the
    budget becomes the README's formula on it."""
    from agents.llm import ContextLearned

    fake_llm.push(status=400, body=LLAMA_OVERFLOW)
    fake_llm.push(status=400, body=LLAMA_OVERFLOW)
    client = client_for(
        fake_llm,
        prompt_budget=3264,
        window_tokens=4096,
        reply_tokens=768,
        margin_tokens=64,
        tokenizer="",
    )
    try:
        with pytest.raises(ContextLearned) as learned:
            client.chat([{"role": "user", "content": "Heart rate 80 bpm."}])
        assert learned.value.context_tokens == 2048
        assert client.prompt_budget == 2048 - 768 - 64
        assert client.context_reported == 2048
        assert "context window is 2048 tokens, not the 4096" in str(learned.value)
        # A second refusal naming the same window is the window's failure,
        # not another lesson.
        with pytest.raises(AgentError) as failed:
            client.chat([{"role": "user", "content": "Heart rate 80 bpm."}])
    finally:
        client.close()
    assert not isinstance(failed.value, ContextLearned)
    assert "longer than its context window" in str(failed.value)
    assert "1216 (context window 2048, as the server's error reported it" in str(
        failed.value
    )
    assert len(fake_llm.requests) == 2


@pytest.mark.django_db
def test_the_runner_compresses_again_and_the_backbone_learns_the_window(
    fake_llm, fake_backbone, tiny_release, tiny_stays, admin_user
):
    from agents.models import AgentPrediction, AgentStayState
    from agents.services import agent_stay_work

    fake_llm.prompt_chars_per_token = SERVER_CHARS_PER_TOKEN
    fake_llm.push(status=400, body=LLAMA_OVERFLOW)
    run = run_queued(user=admin_user, release=tiny_release, backbone=fake_backbone)
    state = AgentStayState.objects.get(run=run, stay=tiny_stays["stays"][0])
    made = []

    def factory(r):
        client = ChatClient.for_backbone(r.backbone)
        made.append(client)
        return LocalWindowAgent(client)

    assert agent_stay_work(stay_state_id=state.pk, agent_factory=factory) == "done"
    errors = list(
        AgentPrediction.objects.filter(run=run)
        .order_by("window_id")
        .values_list("error", flat=True)
    )
    assert errors == ["", ""]
    # The refused prompt, the same window again within the new budget, then
    # the next window.
    assert len(fake_llm.requests) == 3
    [client] = made
    assert client.prompt_budget == 2048 - client.reply_tokens - client.margin_tokens
    fake_backbone.refresh_from_db()
    assert fake_backbone.context_tokens == 2048
    assert "context-length error" in fake_backbone.server_report["context_tokens_from"]


@pytest.mark.django_db
def test_a_refusal_without_a_window_fails_its_window_once(
    fake_llm, fake_backbone, tiny_release, tiny_stays, admin_user
):
    from agents.models import AgentPrediction, AgentStayState
    from agents.services import agent_stay_work

    fake_llm.push(
        status=400, body={"error": {"message": "This prompt is too long for me."}}
    )
    run = run_queued(user=admin_user, release=tiny_release, backbone=fake_backbone)
    state = AgentStayState.objects.get(run=run, stay=tiny_stays["stays"][0])
    agent_stay_work(
        stay_state_id=state.pk,
        agent_factory=lambda r: LocalWindowAgent(ChatClient.for_backbone(r.backbone)),
    )
    first, second = (
        AgentPrediction.objects.filter(run=run)
        .order_by("window_id")
        .values_list("error", flat=True)
    )
    assert "longer than its context window" in first and second == ""
    assert len(fake_llm.requests) == 2
    fake_backbone.refresh_from_db()
    assert not fake_backbone.context_tokens
