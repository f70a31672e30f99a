"""Celery tasks of the agents app: thin wrappers around agents.services, ids
in, idempotent (a second delivery finds the stay taken or done)."""

import logging

from celery import shared_task
from django.db import OperationalError

logger = logging.getLogger(__name__)


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def agent_stay_task(stay_state_id: int) -> str:
    from agents.services import agent_stay_work

    try:
        return agent_stay_work(stay_state_id=stay_state_id)
    except OperationalError:
        raise
    except Exception as error:
        from agents.models import AgentStayState, StayState

        logger.exception("agent stay %s failed", stay_state_id)
        AgentStayState.objects.filter(pk=stay_state_id).update(
            state=StayState.FAILED, lease="", error=f"{type(error).__name__}: {error}"
        )
        from agents.services import agent_run_settle

        state = AgentStayState.objects.select_related("run").get(pk=stay_state_id)
        agent_run_settle(run=state.run)
        return "failed"
