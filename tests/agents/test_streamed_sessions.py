"""Online evaluation's stay sessions (agents.sessions, protocol
realicu-online-v2) against an endpoint on loopback that follows them with the
client's ``Sessions``: streamed, a stay's first window carries its history and
each later one only what is new, and the endpoint rebuilds every window's
context exactly; a lost session (HTTP 409), a window without a usable reply
and a resumed stay each start a new session with the whole history; full mode
sends the whole context every time; a bad mode is refused."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from realicu_client import Sessions

from agents.base import AgentError
from agents.context import stay_contexts
from agents.models import AgentStayState, OnlineEndpoint
from agents.remote import UNREACHABLE, RemoteAgent
from agents.services import endpoint_register, online_eval_start
from tests.agents.helpers import endpoint_refused
from tests.factories import make_admission, make_event, make_stay
from windows.models import Domain, EventKind
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_stay():
    """A 12-hour stay (six windows) with events in and between its windows,
    and in each window an action with its carrier row (same order and time),
    which its own context leaves out and the next window's holds."""
    stay = make_stay(admission=make_admission(), hours=12)
    windows = windows_build(stay=stay)
    assert len(windows) == 6
    a = stay.admission
    make_event(admission=a, time=stay.intime - timedelta(hours=2))
    for n, window in enumerate(windows):
        make_event(admission=a, time=window.start + timedelta(minutes=5))
        make_event(admission=a, time=window.end + timedelta(minutes=30))
        at = window.start + timedelta(minutes=12)
        for kind, category in ((EventKind.ACTION, "insulin"), (None, "nacl")):
            make_event(
                admission=a,
                time=at,
                kind=kind or EventKind.OBSERVATION,
                domain=Domain.MED_CONTINUOUS,
                category=category,
                name=category,
                order_id=f"O-{n}",
            )
    return stay, windows


def _whole(ctx) -> dict:
    """The window's whole context as the endpoint reads JSON."""
    return json.loads(json.dumps(ctx.payload()))


def test_streamed_payloads_rebuild_every_window_exactly(endpoint, long_stay):
    stay, windows = long_stay
    agent = RemoteAgent(url=endpoint.url, max_retries=0)
    contexts = list(stay_contexts(stay, [w.pk for w in windows]))
    for ctx in contexts:
        assert agent.predict(ctx, {})[0]["status"] == "stable"
    agent.close()
    bodies = [r["body"] for r in endpoint.received]
    assert len(bodies) == 6
    assert len({b["session_id"] for b in bodies}) == 1
    assert [b["sequence"] for b in bodies] == list(range(6))
    assert {b["context_mode"] for b in bodies} == {"streamed"}
    # Each event goes once: the payloads' events are disjoint, and their union
    # is the last window's whole context.
    sent = [e["event_id"] for b in bodies for e in b["events"]]
    assert len(sent) == len(set(sent))
    assert sorted(sent) == sorted(e["event_id"] for e in contexts[-1].events)
    for ctx, request in zip(contexts, endpoint.received, strict=True):
        whole = _whole(ctx)
        assert request["context"]["events"] == whole["events"]
        assert request["context"]["past_windows"] == whole["past_windows"]
        assert request["body"]["events_total"] == len(whole["events"])
    # A window's own action and carrier reach the endpoint with the next one.
    later = {e["event_id"] for e in bodies[1]["events"]}
    own = {e["event_id"] for e in bodies[0]["events"]}
    first_decision = {
        e["event_id"]
        for e in contexts[1].events
        if e["domain"] == Domain.MED_CONTINUOUS
    }
    assert len(first_decision) == 2
    assert first_decision <= later and not first_decision & own


def test_a_lost_session_and_a_failed_window_start_new_sessions(endpoint, long_stay):
    stay, windows = long_stay
    agent = RemoteAgent(url=endpoint.url, max_retries=0)
    contexts = list(stay_contexts(stay, [w.pk for w in windows]))
    agent.predict(contexts[0], {})
    agent.predict(contexts[1], {})
    # The endpoint restarts and forgets its sessions: it answers 409, and the
    # window goes again in a new session with the whole history.
    endpoint.sessions = Sessions()
    agent.predict(contexts[2], {})
    gap, again = endpoint.received[2:4]
    assert gap["context"] is None and gap["body"]["sequence"] == 2
    assert again["body"]["sequence"] == 0
    assert again["body"]["session_id"] != gap["body"]["session_id"]
    assert again["body"]["events"] == _whole(contexts[2])["events"]
    # A window without a usable reply: the endpoint may or may not hold its
    # events, so the next window opens a new session.
    endpoint.replies.append((503, {"busy": True}, {}))
    with pytest.raises(AgentError) as failed:
        agent.predict(contexts[3], {})
    assert str(failed.value) == UNREACHABLE
    agent.predict(contexts[4], {})
    last = endpoint.received[-1]
    assert last["body"]["sequence"] == 0
    assert last["body"]["session_id"] != again["body"]["session_id"]
    assert last["context"]["events"] == _whole(contexts[4])["events"]
    # A 409 to a session's first payload is a failure, not a loop.
    endpoint.replies.append((409, {"error": "no"}, {}))
    fresh = RemoteAgent(url=endpoint.url, max_retries=0)
    with pytest.raises(AgentError) as refused:
        fresh.predict(contexts[5], {})
    assert "409 to the first payload" in refused.value.detail
    assert len(endpoint.received) == 7
    agent.close()
    fresh.close()


def test_full_mode_sends_the_whole_context_every_window(endpoint, long_stay):
    stay, windows = long_stay
    agent = RemoteAgent(url=endpoint.url, context_mode="full")
    contexts = list(stay_contexts(stay, [w.pk for w in windows]))
    for ctx in contexts:
        agent.predict(ctx, {})
    agent.close()
    for ctx, request in zip(contexts, endpoint.received, strict=True):
        assert request["body"]["context_mode"] == "full"
        assert request["body"]["events"] == _whole(ctx)["events"]
        assert request["body"]["past_windows"] == _whole(ctx)["past_windows"]
    streamed = sum(
        len(json.dumps(e)) for r in endpoint.received for e in r["body"]["events"]
    )
    assert streamed > 2 * sum(len(json.dumps(e)) for e in contexts[-1].events)


@pytest.mark.usefixtures("tiny_stays")
def test_a_resumed_stay_sends_its_history_again(endpoint, researcher, tiny_release):
    from agents.services import agent_stay_work

    registered = endpoint_register(
        user=researcher, release=tiny_release, name="sessions", url=endpoint.url
    )
    assert registered.context_mode == "streamed"
    run = online_eval_start(user=researcher, endpoint=registered, enqueue=False)
    state = max(AgentStayState.objects.filter(run=run), key=lambda s: s.windows_total)
    assert state.windows_total == 2

    def taken_over(run):
        # Another worker takes the stay over after its first window.
        AgentStayState.objects.filter(pk=state.pk).update(lease="other")

    assert agent_stay_work(stay_state_id=state.pk, on_window=taken_over) == "lost"
    first, lost = endpoint.received
    assert (first["body"]["sequence"], lost["body"]["sequence"]) == (0, 1)
    AgentStayState.objects.filter(pk=state.pk).update(state="queued", lease="")
    assert agent_stay_work(stay_state_id=state.pk) == "done"
    resumed = endpoint.received[2]["body"]
    assert resumed["window_id"] == lost["body"]["window_id"]
    assert resumed["sequence"] == 0
    assert resumed["session_id"] != first["body"]["session_id"]
    (ctx,) = stay_contexts(state.stay, [resumed["window_id"]])
    assert resumed["events"] == _whole(ctx)["events"]


def test_an_unknown_context_mode_is_refused(researcher, tiny_release):
    endpoint_refused(
        "how contexts are sent",
        user=researcher,
        release=tiny_release,
        name="x",
        url="http://127.0.0.1:9/predict",
        context_mode="zipped",
    )


def test_the_page_registers_the_chosen_context_mode(researcher, tiny_release):
    from django.test import Client

    client = Client()
    client.force_login(researcher)
    page = client.get("/agents/").content.decode()
    assert 'name="context_mode"' in page and 'value="full"' in page
    fields = {"name": "e", "url": "http://127.0.0.1:9/p", "release": tiny_release.pk}
    refused = client.post("/agents/endpoints/start/", {**fields, "context_mode": "x"})
    assert refused.status_code == 400 and "how contexts are sent" in (
        refused.content.decode()
    )
    assert not OnlineEndpoint.objects.exists()
    client.post("/agents/endpoints/start/", {**fields, "context_mode": "full"})
    assert OnlineEndpoint.objects.get().context_mode == "full"
