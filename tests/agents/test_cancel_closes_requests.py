"""A run cancelled while a stay's request is in flight closes that request's
connection (issue 32 item 3): the stay's heartbeat sees its lease gone and
aborts the agent, so the endpoint (or a llama.cpp server) stops working on
it; the window's prediction is not saved."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import AgentPrediction, AgentStayState, RunState
from agents.services import (
    agent_run_cancel,
    agent_stay_work,
    endpoint_register,
    online_eval_start,
)
from tests.oracle.hangup_server import GeneratingServer

WAIT = 30


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_run_closes_its_request_in_flight(
    settings, researcher, tiny_release
):
    settings.REALICU_JOB_HEARTBEAT_SECONDS = 0.2
    server = GeneratingServer(hold=60).start()
    try:
        registered = endpoint_register(
            user=researcher,
            release=tiny_release,
            name="slow",
            url=server.url,
            timeout_seconds=600,
        )
        run = online_eval_start(user=researcher, endpoint=registered, enqueue=False)
        state = AgentStayState.objects.filter(run=run).first()
        outcome: list = []

        def work():
            try:
                outcome.append(agent_stay_work(stay_state_id=state.pk))
            finally:
                connection.close()

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        assert server.received.wait(WAIT)
        agent_run_cancel(user=researcher, run=run)
        assert server.hung_up.wait(WAIT)
        worker.join(WAIT)
    finally:
        server.stop()
    assert outcome == ["lost"]
    assert server.requests == 1
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED
    assert not AgentPrediction.objects.filter(run=run).exists()
