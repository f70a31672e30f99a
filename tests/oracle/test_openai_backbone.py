"""The OpenAI-compatible backbone against a real HTTP server on loopback that
replies from a script (tests/oracle/fake_llm.py)."""

import json

import pytest

from oracle.backbones import backbone_for
from oracle.backbones.openai_compat import BackboneConfigError
from oracle.context import window_contexts_build
from oracle.models import Backbone, BackboneKind
from oracle.prompts import prompt_build
from tests.oracle.fake_llm import valid_reply_for
from tests.oracle.helpers import backbone, stable_stay, windows_of

pytestmark = pytest.mark.django_db

KEY_ENV = "REALICU_LLM_TEST_ORACLE_KEY"
SECRET = "sk-test-0123456789abcdef"


def valid_content(context, template) -> str:
    return valid_reply_for(prompt_build(context=context, template=template).messages)


def test_valid_replies_become_labels_with_usage_and_provenance(
    fake_llm, template, contexts
):
    labeller = backbone(
        fake_llm,
        template,
        parameters={"temperature": 0, "model": "ignored"},
        json_mode=True,
    )
    seen = []
    results = labeller.label_many(contexts, on_result=seen.append)

    assert len(results) == len(contexts) == len(seen)
    assert {r.window_id for r in results} == {c.window_id for c in contexts}
    by_window = {c.window_id: c for c in contexts}
    for result in results:
        context = by_window[result.window_id]
        assert result.ok and result.status == "stable" and result.attempts == 1
        assert result.tokens_in == 1000 and result.tokens_out > 0
        assert set(result.payload["status_evidence"]) <= context.allowed_event_ids
        rated = [r["event_id"] for r in result.payload["action_ratings"]]
        assert rated == [e["id"] for e in context.recorded_actions]
        assert json.loads(result.raw_response)["status"] == "stable"
    assert any(r.payload["action_ratings"] for r in results)
    body = fake_llm.requests[0].body
    assert fake_llm.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "fake-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_malformed_json_is_repaired_on_the_retry(fake_llm, template, contexts):
    context = contexts[1]
    broken = '{"status": "stable", "status_evidence": ['
    fake_llm.push(content=broken)
    fake_llm.push(content="```json\n" + valid_content(context, template) + "\n```")

    [result] = backbone(fake_llm, template).label_many([context])

    assert result.ok and result.attempts == 2
    repair = fake_llm.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": broken}
    assert "not valid JSON" in repair[-1]["content"]


def test_malformed_twice_fails_with_the_raw_text_and_no_label(
    fake_llm, template, contexts
):
    fake_llm.push(content="I think the patient is stable.")
    fake_llm.push(content='{"status": "better"}')

    [result] = backbone(fake_llm, template).label_many([contexts[0]])

    assert not result.ok and result.payload == {} and result.status == ""
    assert "failed validation twice" in result.error
    assert "I think the patient is stable." in result.raw_response
    assert '{"status": "better"}' in result.raw_response
    assert result.attempts == 2


def test_evidence_citing_events_not_in_the_prompt_is_rejected_by_id(
    fake_llm, template, contexts
):
    context = contexts[1]
    reply = json.loads(valid_content(context, template))
    reply["acute_problems"] = [{"text": "shock", "evidence": [987654321]}]
    fake_llm.push(content=json.dumps(reply))
    fake_llm.push(content=json.dumps(reply))

    [result] = backbone(fake_llm, template).label_many([context])

    assert not result.ok
    assert "987654321" in result.error
    assert "987654321" in fake_llm.requests[1].body["messages"][-1]["content"]


def test_429_waits_for_retry_after_then_succeeds(fake_llm, template, contexts):
    fake_llm.push(status=429, headers={"Retry-After": "1"})

    [result] = backbone(fake_llm, template).label_many([contexts[0]])

    assert result.ok and result.attempts == 2
    first, second = fake_llm.requests
    assert second.arrived - first.arrived >= 1.0 - 0.05


def test_500_then_success(fake_llm, template, contexts):
    fake_llm.push(status=500, body={"error": {"message": "overloaded"}})
    fake_llm.push(status=503, body="upstream down")

    [result] = backbone(fake_llm, template).label_many([contexts[0]])

    assert result.ok and result.attempts == 3


def test_retries_are_bounded(fake_llm, template, contexts):
    for _ in range(5):
        fake_llm.push(status=502, body="bad gateway")

    [result] = backbone(fake_llm, template, max_retries=2).label_many([contexts[0]])

    assert not result.ok and result.attempts == 3 and len(fake_llm.requests) == 3
    assert "HTTP 502" in result.error


def test_a_client_error_is_not_retried(fake_llm, template, contexts):
    fake_llm.push(status=400, body={"error": {"message": "model not found"}})

    [result] = backbone(fake_llm, template).label_many([contexts[0]])

    assert not result.ok and result.attempts == 1
    # Status and content type only: the body of an error is never echoed.
    assert "HTTP 400 (application/json)" in result.error
    assert "model not found" not in result.error


def test_a_timeout_is_retried(fake_llm, template, contexts):
    context = contexts[0]
    fake_llm.push(content=valid_content(context, template), delay=1.5)

    [result] = backbone(fake_llm, template, timeout_seconds=0.3).label_many([context])

    assert result.ok and result.attempts == 2


def test_timeouts_until_retries_are_spent_fail_with_the_reason(
    fake_llm, template, contexts
):
    fake_llm.push(content="{}", delay=1.0)
    fake_llm.push(content="{}", delay=1.0)

    [result] = backbone(
        fake_llm, template, timeout_seconds=0.2, max_retries=1
    ).label_many([contexts[0]])

    assert not result.ok and "timed out" in result.error and result.attempts == 2


def test_the_api_key_is_sent_as_bearer_and_never_kept(
    fake_llm, template, contexts, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_llm.push(status=401, body=f"invalid key {SECRET}")
    fake_llm.push(status=500, body=f"key {SECRET} over quota")
    labeller = backbone(fake_llm, template, api_key_env=KEY_ENV, max_retries=0)

    results = labeller.label_many(contexts[:3])

    assert all(
        r.headers["Authorization"] == f"Bearer {SECRET}" for r in fake_llm.requests
    )
    failed = [r for r in results if not r.ok]
    assert len(failed) == 2 and any("HTTP 401" in r.error for r in failed)
    for result in results:
        assert SECRET not in result.error and SECRET not in result.raw_response
        assert SECRET not in json.dumps(result.payload)


def test_a_missing_key_variable_stops_before_any_request(
    fake_llm, template, contexts, monkeypatch
):
    monkeypatch.delenv(KEY_ENV, raising=False)
    labeller = backbone(fake_llm, template, api_key_env=KEY_ENV)

    with pytest.raises(BackboneConfigError, match=KEY_ENV):
        labeller.label_many(contexts)
    assert fake_llm.requests == []


def test_concurrency_limit_is_respected_and_used(fake_llm, template):
    stay = stable_stay(hours=24)
    contexts = window_contexts_build(windows=windows_of(stay))
    fake_llm.latency = 0.2

    results = backbone(
        fake_llm, template, concurrency=3, requests_per_minute=60000
    ).label_many(contexts)

    assert len(results) == 12 and all(r.ok for r in results)
    assert fake_llm.max_in_flight == 3


def test_latency_is_the_requests_own_not_the_wait_for_a_slot(
    fake_llm, template, contexts
):
    """One request in flight at a time: the fourth window waits three replies
    for its slot, and that wait is not its latency. A 429's Retry-After wait is
    not either, while both requests' own times are summed."""
    fake_llm.latency = 0.4
    results = backbone(
        fake_llm, template, concurrency=1, requests_per_minute=60000
    ).label_many(contexts[:4])

    assert len(results) == 4 and all(r.ok for r in results)
    # Waiting counted would give 400, 800, 1200 and 1600 ms.
    assert all(400 <= r.latency_ms < 1200 for r in results), [
        r.latency_ms for r in results
    ]

    fake_llm.latency = 0.0
    fake_llm.push(status=429, headers={"Retry-After": "2"}, delay=0.3)
    fake_llm.push(content=valid_content(contexts[0], template), delay=0.3)
    [result] = backbone(fake_llm, template).label_many([contexts[0]])
    assert result.ok and result.attempts == 2
    assert 600 <= result.latency_ms < 2000, result.latency_ms


def test_requests_per_minute_spaces_request_starts(fake_llm, template, contexts):
    backbone(fake_llm, template, requests_per_minute=120).label_many(contexts[:4])

    arrivals = sorted(r.arrived for r in fake_llm.requests)
    assert len(arrivals) == 4
    # 120 a minute: starts 0.5 s apart (all four would arrive at once without it).
    assert all(b - a >= 0.5 - 0.1 for a, b in zip(arrivals, arrivals[1:]))


def test_should_stop_starts_no_new_request(fake_llm, template, contexts):
    fake_llm.latency = 0.05
    seen = []

    results = backbone(fake_llm, template, concurrency=1).label_many(
        contexts, on_result=seen.append, should_stop=lambda: len(seen) >= 2
    )

    assert 2 <= len(results) < len(contexts)
    assert len(fake_llm.requests) < len(contexts)


def test_backbone_for_builds_each_kind(fake_llm, template):
    rules = backbone_for(
        Backbone(name="offline", kind=BackboneKind.RULES), template=template
    )
    assert (rules.kind, rules.model) == ("rules", "rules-v1")
    row = Backbone(
        name="local vLLM",
        kind=BackboneKind.OPENAI,
        base_url=fake_llm.base_url,
        model="qwen",
        parameters={"temperature": 0.2, "json_mode": True},
        concurrency=4,
        requests_per_minute=100,
    )
    labeller = backbone_for(row, template=template)
    assert (labeller.kind, labeller.model) == ("openai", "qwen")
    assert labeller.parameters == {"temperature": 0.2} and labeller.json_mode
    assert labeller.concurrency == 4 and labeller.requests_per_minute == 100


# --- issue 19: reply dialects, max_tokens, a prompt too long for the server ---------

OVERFLOW = (
    "This model's maximum context length is 2048 tokens. However, you requested "
    "3100 tokens (2900 in the messages, 200 in the completion). Please reduce the "
    "length of the messages or completion."
)


@pytest.mark.parametrize(
    "reply_format, where",
    [
        ("json_schema", "response_format.json_schema.schema"),
        ("llamacpp_python", "response_format.schema"),
        ("ollama", "format"),
        ("json_object", None),
        ("none", None),
    ],
)
def test_the_schema_goes_out_in_the_servers_dialect_with_max_tokens(
    fake_llm, template, contexts, reply_format, where
):
    context = contexts[1]
    labeller = backbone(
        fake_llm, template, reply_format=reply_format, max_completion_tokens=300
    )
    [result] = labeller.label_many([context])
    assert result.ok, result.error
    body = fake_llm.requests[0].body
    assert body["max_tokens"] == 300
    if where is None:
        expected = {"type": "json_object"} if reply_format == "json_object" else None
        assert body.get("response_format") == expected and "format" not in body
        return
    schema = body
    for key in where.split("."):
        schema = schema[key]
    if reply_format == "llamacpp_python":
        assert body["response_format"]["type"] == "json_object"
    shown = prompt_build(context=context, template=template).event_ids
    evidence = schema["properties"]["status_evidence"]
    assert set(evidence["items"]["enum"]) == set(shown)
    assert evidence["minItems"] == 1 and evidence["maxItems"] <= 3
    ratings = schema["properties"]["action_ratings"]["prefixItems"]
    assert [r["properties"]["event_id"]["enum"] for r in ratings] == [
        [e["id"]] for e in context.recorded_actions
    ]


def test_a_prompt_the_server_finds_too_long_is_compressed_and_sent_once_more(
    fake_llm, template, contexts
):
    fake_llm.push(
        status=400,
        body={"error": {"message": OVERFLOW, "type": "invalid_request_error"}},
    )
    [result] = backbone(fake_llm, template, max_completion_tokens=200).label_many(
        [contexts[1]]
    )
    assert result.ok, result.error
    assert result.attempts == 2 and result.context_tokens_reported == 2048
    assert any("refused" in c for c in result.compressions)
    first, second = (r.body for r in fake_llm.requests)
    size = lambda body: sum(len(m["content"]) for m in body["messages"])  # noqa: E731
    assert size(second) < size(first) * 2048 / 2900


def test_a_prompt_still_too_long_after_compressing_fails_with_the_reason(
    fake_llm, template, contexts
):
    for _ in range(2):
        fake_llm.push(status=400, body={"error": {"message": OVERFLOW}})
    [result] = backbone(fake_llm, template).label_many([contexts[1]])
    assert not result.ok and result.attempts == 2
    assert (
        "does not fit the model's context window even compressed further"
        in result.error
    )
    assert "However, you requested" not in result.error


def test_the_prompt_budget_is_the_window_less_the_reply_and_margin(template, settings):
    settings.REALICU_LLM_PROMPT_MARGIN_TOKENS = 64
    row = Backbone(
        kind=BackboneKind.OPENAI,
        base_url="http://127.0.0.1:9/v1",
        model="m",
        context_tokens=8192,
        max_completion_tokens=1024,
    )
    labeller = backbone_for(row, template=template)
    assert labeller.prompt_budget == 8192 - 1024 - 64
    assert labeller.max_completion_tokens == 1024
    # The default template's 12,000 never raises it past the window; a smaller
    # template budget lowers it.
    template.token_budget = 3000
    assert backbone_for(row, template=template).prompt_budget == 3000
