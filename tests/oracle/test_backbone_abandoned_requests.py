"""An abandoned request is cancelled on the server (issue 32 item 3): when a
request times out, or its run stops while it is in flight, its connection is
closed, which is how llama.cpp's server learns to stop generating. The server
here (tests/oracle/hangup_server.py) generates for a minute while watching
its connection, as llama.cpp does, and reports the hang-up. The Oracle's
backbone (asyncio), the agents' language model and an online endpoint
(synchronous, aborted from another thread) are each checked."""

from __future__ import annotations

import threading

import pytest

from agents.base import AgentError
from agents.llm import ChatClient
from agents.remote import RemoteAgent
from oracle.context import window_contexts_build
from tests.oracle.hangup_server import GeneratingServer
from tests.oracle.helpers import labeller, stable_stay, windows_of

pytestmark = pytest.mark.usefixtures("loopback_endpoints_allowed")

# Generous bounds for a loaded machine: they only keep a broken build from
# hanging the suite; the server would hold each request for a minute.
WAIT = 30


@pytest.fixture
def server():
    started = GeneratingServer(hold=60).start()
    yield started
    started.stop()


@pytest.fixture
def contexts(db):
    return window_contexts_build(windows=windows_of(stable_stay(hours=1))[:1])


def _in_thread(work) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run():
        try:
            outcome.append(work())
        except Exception as error:  # the outcome is what the test reads
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _abandoned(server: GeneratingServer, work, abandon) -> list:
    """``work`` in a thread, ``abandon`` called once the server has its
    request; the server must see the connection closed. ``work``'s outcome."""
    thread, outcome = _in_thread(work)
    assert server.received.wait(WAIT)
    abandon()
    assert server.hung_up.wait(WAIT)
    thread.join(WAIT)
    return outcome


@pytest.mark.django_db
def test_the_oracles_timed_out_request_is_closed_on_the_server(server, contexts):
    results = labeller(server.url, 1).label_many(contexts)
    assert [r.ok for r in results] == [False]
    assert "timed out" in results[0].error
    assert server.hung_up.wait(WAIT)
    assert server.requests == 1


@pytest.mark.django_db
def test_a_stopped_oracle_run_closes_its_request_in_flight(server, contexts):
    stop = threading.Event()
    backbone = labeller(server.url, 600)
    outcome = _abandoned(
        server, lambda: backbone.label_many(contexts, should_stop=stop.is_set), stop.set
    )
    # The window gets no result: the run labels it again when it resumes.
    assert outcome == [[]]


def test_an_agents_timed_out_request_is_closed_on_the_server(server):
    chat = ChatClient(base_url=server.url, model="m", timeout_seconds=1, max_retries=0)
    with pytest.raises(AgentError, match="no complete reply within 1 s"):
        chat.chat([{"role": "user", "content": "hi"}])
    assert server.hung_up.wait(WAIT)
    chat.close()


def test_an_aborted_agent_closes_its_request_in_flight(server):
    chat = ChatClient(base_url=server.url, model="m", timeout_seconds=600)
    outcome = _abandoned(
        server, lambda: chat.chat([{"role": "user", "content": "hi"}]), chat.abort
    )
    # No retry after the abort: one request, and the window's error.
    assert isinstance(outcome[0], AgentError) and server.requests == 1
    chat.close()


@pytest.mark.django_db
def test_an_aborted_endpoint_closes_its_request_in_flight(server):
    from agents.context import stay_contexts

    stay = stable_stay(hours=1)
    (ctx,) = stay_contexts(stay, [w.pk for w in windows_of(stay)[:1]])
    agent = RemoteAgent(url=server.url, timeout_seconds=600)
    outcome = _abandoned(server, lambda: agent.predict(ctx, {}), agent.abort)
    assert isinstance(outcome[0], AgentError) and server.requests == 1
    agent.close()
