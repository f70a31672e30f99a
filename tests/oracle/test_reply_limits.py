"""Replies of backbones and endpoints read under a total deadline and a size
limit (issue 31 item 5), against a misbehaving server on 127.0.0.1
(tests/oracle/slow_server.py): a reply dripping a byte at a time ends at the
deadline, not a read timeout per byte; a reply longer than the limit is
refused after the limit, the connection closed, never read whole into
memory. Loopback is an admin's backbone's right; for the endpoint purpose the
test allows it as an operator would (REALICU_ENDPOINT_ALLOWED_NETWORKS)."""

from __future__ import annotations

import time
import tracemalloc

import httpx
import pytest

from agents.base import AgentError
from agents.llm import ChatClient
from oracle.backbones import http
from oracle.backbones.endpoints import Purpose
from oracle.context import window_contexts_build
from tests.oracle.helpers import labeller, stable_stay, windows_of
from tests.oracle.slow_server import SlowServer

pytestmark = pytest.mark.usefixtures("loopback_endpoints_allowed")

LIMIT = 1_000_000


@pytest.fixture
def server(request):
    options = request.param
    started = SlowServer(**options).start()
    yield started
    started.stop()


def _post(server: SlowServer, purpose: Purpose, deadline: float):
    client = http.guarded_client(purpose=purpose, timeout_seconds=deadline)
    try:
        return http.request(
            client,
            "POST",
            server.url,
            content=b"{}",
            deadline_seconds=deadline,
            max_bytes=LIMIT,
        )
    finally:
        client.close()


@pytest.mark.parametrize("purpose", list(Purpose))
@pytest.mark.parametrize("server", [{"mode": "drip", "interval": 0.25}], indirect=True)
def test_a_reply_dripping_a_byte_at_a_time_ends_at_the_deadline(server, purpose):
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        _post(server, purpose, deadline=1.5)
    took = time.monotonic() - started
    # Each byte came well within a read timeout of 1.5 s; the total is what
    # ends it (10,000 bytes would take 40 minutes).
    assert took < 1.5 + 1.0, took
    assert server.sent < 12


@pytest.mark.parametrize("server", [{"mode": "late", "interval": 3.0}], indirect=True)
def test_headers_later_than_the_deadline_end_it(server):
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        _post(server, Purpose.BACKBONE, deadline=1.0)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("purpose", list(Purpose))
@pytest.mark.parametrize(
    "server, said",
    [
        ({"mode": "huge"}, "announced 50,000,000 bytes"),
        ({"mode": "huge-chunked"}, "longer than 1,000,000 bytes"),
    ],
    indirect=["server"],
    ids=["content-length", "chunked"],
)
def test_a_50_mb_reply_is_refused_at_the_limit_unread(server, said, purpose):
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(http.ReplyRefused, match=said):
            _post(server, purpose, deadline=30)
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    server.hung_up.wait(10)
    # The server could not send its reply: the connection was closed at the
    # limit (what it sent went into the socket buffers, not the worker).
    assert server.hung_up.is_set()
    assert server.sent < 20_000_000, server.sent
    assert peak < 4 * LIMIT, peak
    assert took < 10, took


@pytest.mark.parametrize(
    "server", [{"mode": "gzip-bomb", "size": 20_000_000}], indirect=True
)
def test_a_compressed_reply_is_held_to_the_limit_once_decompressed(server):
    with pytest.raises(http.ReplyRefused, match="decompresses to more than"):
        _post(server, Purpose.BACKBONE, deadline=30)


@pytest.mark.parametrize("server", [{"mode": "late", "interval": 0.2}], indirect=True)
def test_a_reply_within_deadline_and_limit_is_read(server):
    reply = _post(server, Purpose.ENDPOINT, deadline=5)
    assert reply.status == 200 and reply.json()["status"] == "stable"


@pytest.fixture
def contexts(db):
    stay = stable_stay(hours=1)
    return window_contexts_build(windows=windows_of(stay))


@pytest.mark.django_db
@pytest.mark.parametrize("server", [{"mode": "drip", "interval": 0.25}], indirect=True)
def test_the_oracle_gives_up_on_a_dripping_reply_at_its_timeout(server, contexts):
    started = time.monotonic()
    results = labeller(server.url, 1.5).label_many(contexts)
    assert results and not any(r.ok for r in results)
    assert all("no complete reply within 1.5 s" in r.error for r in results)
    # The windows go in parallel, each within its deadline.
    assert time.monotonic() - started < 1.5 * len(results) + 2.0


@pytest.mark.django_db
@pytest.mark.parametrize("server", [{"mode": "huge-chunked"}], indirect=True)
def test_the_oracle_refuses_a_huge_reply_unread(server, contexts):
    results = labeller(server.url, 30).label_many(contexts)
    assert results and all("longer than 4,000,000 bytes" in r.error for r in results)
    assert server.sent < 40_000_000 * len(results)


@pytest.mark.parametrize("server", [{"mode": "drip", "interval": 0.25}], indirect=True)
def test_an_agents_backbone_gives_up_on_a_dripping_reply_at_its_timeout(server):
    chat = ChatClient(
        base_url=server.url, model="m", timeout_seconds=1.5, max_retries=0
    )
    started = time.monotonic()
    with pytest.raises(AgentError, match="no complete reply within 1.5 s"):
        chat.chat([{"role": "user", "content": "hello"}])
    assert time.monotonic() - started < 2.5
