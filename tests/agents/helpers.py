"""Agent runs as the agents tests make them: on a release and a backbone (a
fake server's backbone row), or on a researcher's endpoint, started without a
task (the test drives the work itself); and an endpoint's registration
refused."""

import pytest
from django.core.exceptions import ValidationError

from agents.models import AgentRun, OnlineEndpoint
from agents.services import (
    agent_run_inline,
    agent_run_start,
    endpoint_register,
    online_eval_start,
)
from oracle.models import Backbone, BackboneKind


def fake_backbone_row(url: str, name: str, **fields) -> Backbone:
    """An OpenAI-compatible backbone at ``url`` (model "fake", one retry),
    ``fields`` added, written as a row: no admin, no server check."""
    return Backbone.objects.create(
        name=name,
        kind=BackboneKind.OPENAI,
        base_url=url,
        model="fake",
        max_retries=1,
        **fields,
    )


def run_queued(*, user, release, backbone, agent="local-window") -> AgentRun:
    """A run of ``agent`` started but not enqueued: no worker takes it."""
    return agent_run_start(
        user=user, release=release, agent=agent, backbone=backbone, enqueue=False
    )


def run_inline(agent, release, backbone, user) -> AgentRun:
    """A run of ``agent`` worked through in this process."""
    run = run_queued(user=user, release=release, backbone=backbone, agent=agent)
    return agent_run_inline(run=run)


def online_eval_inline(*, user, release, **endpoint) -> AgentRun:
    """``user`` registers an endpoint on ``release`` (``endpoint``: its name,
    url and other fields), and its online evaluation is worked through in this
    process."""
    registered = endpoint_register(user=user, release=release, **endpoint)
    run = online_eval_start(user=user, endpoint=registered, enqueue=False)
    return agent_run_inline(run=run)


def endpoint_refused(match: str, *, user, release, **endpoint) -> None:
    """Registering the endpoint is refused with a message matching ``match``,
    and no endpoint is saved."""
    with pytest.raises(ValidationError, match=match):
        endpoint_register(user=user, release=release, **endpoint)
    assert not OnlineEndpoint.objects.exists()
