"""The agents on the Oracle's machinery (issue 32, item 1): prompts within
the backbone's budget by the server's own token count, never sent over it,
and the same failure reasons."""

import math

import pytest

from agents.base import AgentError
from agents.icu_evo import IcuEvoAgent
from agents.llm import ChatClient
from agents.reference import FullContextAgent, LocalWindowAgent, RagAgent
from tests.agents.test_reference_agents import hand_context, words_embed

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
