"""The real-model benchmarks' shared parts (benchmarks._llm_bench): the proxy
that records the server's prompt tokens and slows it down, the reading of a
run's page (agents' and the Oracle's) as an admin sees it, and the sorting of
a window's error into over budget, overflow and schema failure."""

import json
import socket

import httpx
import pytest

from agents.llm import ChatClient
from agents.models import AgentPrediction, AgentRun
from benchmarks._llm_bench import (
    LLMProxy,
    failure_kind,
    page_lines,
    run_page_lines,
)
from loopback import LoopbackServer, QuietHandler
from oracle import services as oracle_services
from tests.agents.helpers import run_inline
from tests.oracle.helpers import fake_backbone, make_cohort_with_stay

SCHEMA_ERROR = (
    "The reply failed validation twice (after one repair request): the reply "
    "holds no JSON object"
)


class Upstream(LoopbackServer):
    """A chat server: a JSON reply with ``usage``, or with ``"stream": true``
    three SSE chunks, the last with ``usage``."""

    CHUNKS = [
        b'data: {"choices": [{"delta": {"content": "{}"}}]}\n\n',
        b'data: {"choices": [], "usage": {"prompt_tokens": 77}}\n\n',
        b"data: [DONE]\n\n",
    ]

    def __init__(self):
        self.calls = 0
        self.start()

    def handler(self):
        upstream = self

        class Handler(QuietHandler):
            def do_POST(self):
                upstream.calls += 1
                body = json.loads(self.request_body())
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for chunk in Upstream.CHUNKS:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    return
                self.send_json(
                    200,
                    {
                        "choices": [{"message": {"content": "{}"}}],
                        "usage": {"prompt_tokens": 42, "completion_tokens": 2},
                    },
                )

        return Handler


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.stop()


def proxied(upstream, factor, answers):
    """A proxy whose holds are recorded and answered from ``answers``."""
    holds = []

    def hold(seconds, conn):
        holds.append(seconds)
        return answers.pop(0) if answers else True

    return LLMProxy(upstream.root, factor=factor, hold=hold).start(), holds


def test_proxy_passes_the_reply_records_usage_and_holds_nine_times(upstream):
    proxy, holds = proxied(upstream, 10, [])
    try:
        reply = httpx.post(f"{proxy.base_url}/chat/completions", json={}, timeout=10)
    finally:
        proxy.stop()
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "{}"
    [record] = proxy.records
    assert record["prompt_tokens"] == 42 and record["status"] == 200
    assert not record["abandoned"]
    assert holds == [record["held"]]
    assert record["held"] == pytest.approx(9 * record["upstream"])


def test_proxy_holds_each_streamed_chunk_and_reads_its_usage(upstream):
    proxy, holds = proxied(upstream, 4, [])
    try:
        with httpx.stream(
            "POST",
            f"{proxy.base_url}/chat/completions",
            json={"stream": True},
            timeout=10,
        ) as reply:
            body = reply.read()
    finally:
        proxy.stop()
    assert body == b"".join(Upstream.CHUNKS)
    [record] = proxy.records
    assert record["prompt_tokens"] == 77
    assert len(holds) >= 1 and sum(holds) == pytest.approx(record["held"])
    assert record["held"] == pytest.approx(3 * record["upstream"])


def test_unslowed_proxy_holds_nothing(upstream):
    proxy, holds = proxied(upstream, 1, [])
    try:
        httpx.post(f"{proxy.base_url}/chat/completions", json={}, timeout=10)
    finally:
        proxy.stop()
    assert holds == [] and proxy.records[0]["held"] == 0


def test_an_abandoned_request_gets_no_reply_and_frees_the_slot(upstream):
    # The client hung up while held: nothing is sent, and the next request
    # (the one-slot server's queue) is answered.
    proxy, _ = proxied(upstream, 10, [False])
    try:
        with pytest.raises(httpx.HTTPError):
            httpx.post(f"{proxy.base_url}/chat/completions", json={}, timeout=10)
        second = httpx.post(f"{proxy.base_url}/chat/completions", json={}, timeout=10)
    finally:
        proxy.stop()
    assert second.status_code == 200
    first, then = proxy.records
    assert first["abandoned"] and first["prompt_tokens"] is None
    assert not then["abandoned"] and then["prompt_tokens"] == 42


def test_a_server_gone_is_a_502_and_recorded(upstream):
    proxy = LLMProxy(upstream.root).start()
    upstream.stop()
    try:
        reply = httpx.post(f"{proxy.base_url}/chat/completions", json={}, timeout=10)
    finally:
        proxy.stop()
    assert reply.status_code == 502
    [record] = proxy.records
    assert record["status"] == 0 and record["error"] == "ConnectError"


def test_hold_ends_when_the_client_hangs_up():
    near, far = socket.socketpair()
    try:
        assert LLMProxy._hold_unless_gone(0.01, near) is True
        far.close()
        assert LLMProxy._hold_unless_gone(600, near) is False
    finally:
        near.close()


def test_a_factor_below_one_is_refused(upstream):
    with pytest.raises(ValueError, match="at least 1"):
        LLMProxy(upstream.root, factor=0.5)


def test_failure_kinds_from_the_errors_the_code_writes():
    client = ChatClient(base_url="http://127.0.0.1:1/v1", model="m", prompt_budget=10)
    assert failure_kind(client.over_budget_text(99, "the server's count")) == (
        "over budget"
    )
    assert failure_kind(SCHEMA_ERROR) == "schema"
    assert (
        failure_kind(
            "The backbone refused the request (HTTP 400: Requested tokens (3000) "
            "exceed context window of 2048)."
        )
        == "overflow"
    )
    assert (
        failure_kind("Gave up after 2 attempts: no complete reply within 30 s") is None
    )


def test_page_lines_of_a_page_without_failures():
    assert page_lines("<p>nothing</p>") == ["state: (none shown)"]


@pytest.mark.django_db
def test_agent_run_page_lines_show_state_and_reasons(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    run = run_inline("local-window", tiny_release, fake_backbone, admin_user)
    failed = list(AgentPrediction.objects.filter(run=run).order_by("pk")[:2])
    AgentPrediction.objects.filter(pk__in=[p.pk for p in failed]).update(
        error=SCHEMA_ERROR
    )
    AgentRun.objects.filter(pk=run.pk).update(windows_failed=2)
    lines = run_page_lines(user=admin_user, url_name="agents:run_detail", run_id=run.pk)
    run.refresh_from_db()
    assert lines[0] == f"state: {run.get_state_display()}"
    assert f"reason: 2 × {SCHEMA_ERROR}" in lines


@pytest.mark.django_db
def test_oracle_run_page_lines_show_its_failure_reasons(fake_llm, admin_user):
    cohort, _, _ = make_cohort_with_stay()
    backbone = fake_backbone(admin_user, fake_llm)
    for _ in range(2):
        fake_llm.push(content="this is not json")
    run = oracle_services.oracle_run_create(
        admin=admin_user, name="run", backbone=backbone, cohort=cohort
    )
    oracle_services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=1)
    oracle_services.oracle_run_execute_inline(run_id=run.pk)
    lines = run_page_lines(user=admin_user, url_name="oracle:run_detail", run_id=run.pk)
    reasons = [line for line in lines if line.startswith("reason: 1 × ")]
    assert lines[0].startswith("state: ") and lines[0] != "state: (none shown)"
    assert len(reasons) == 1 and "validation" in reasons[0]
