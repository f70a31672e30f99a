from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Reference agents (RealICU spec section 9) and online evaluation of
    researchers' agents against a release: above ``exports``, which it scores
    through."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

    def ready(self) -> None:
        _jobs_register()


def _jobs_register() -> None:
    """A run's stays under the reaper (jobs.reaper): a stay whose worker
    stopped is queued again and resumes at its first window without a
    prediction; after three workers died on it, it fails with the reason (the
    run can be resumed from its page)."""
    from agents.models import StayState
    from jobs.registry import JobKind, register

    register(
        JobKind(
            name="agent-stay",
            model="agents.AgentStayState",
            task="agents.tasks.agent_stay_task",
            states=StayState,
        )
    )
