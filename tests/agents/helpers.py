"""Agent runs as the agents tests make them: on a release and a backbone,
started without a task (the test drives the work itself)."""

from agents.models import AgentRun
from agents.services import agent_run_inline, agent_run_start


def run_queued(*, user, release, backbone, agent="local-window") -> AgentRun:
    """A run of ``agent`` started but not enqueued: no worker takes it."""
    return agent_run_start(
        user=user, release=release, agent=agent, backbone=backbone, enqueue=False
    )


def run_inline(agent, release, backbone, user) -> AgentRun:
    """A run of ``agent`` worked through in this process."""
    run = run_queued(user=user, release=release, backbone=backbone, agent=agent)
    return agent_run_inline(run=run)
