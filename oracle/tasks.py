"""Celery tasks of the Oracle: thin wrappers around oracle.services. A run's
chunk task labels one chunk and queues the next, so the run travels between
workers chunk by chunk (see oracle.services for the claims and the limits)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

logger = logging.getLogger(__name__)

# Both tasks outlive a worker lost mid-task (the message goes back to the
# queue) and a database gone for a while (retried with backoff up to a minute).
DATABASE_RETRIES = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
}


@shared_task(bind=True, max_retries=8, **DATABASE_RETRIES)
def oracle_run_chunk_task(self, run_id: int) -> str:
    """One chunk of the run, then the next one queued (or a later try when
    nothing could be claimed). Idempotent: a redelivered message claims
    whatever is left, and labels are never written twice."""
    from oracle.services import ChunkOutcome, oracle_run_execute_chunk, oracle_run_fail

    try:
        result = oracle_run_execute_chunk(run_id=run_id)
    except (OperationalError, InterfaceError):
        raise
    except Exception as error:
        logger.exception("Oracle run %s: a chunk failed", run_id)
        oracle_run_fail(run_id=run_id, error=f"{type(error).__name__}: {error}")
        return "failed"
    if result.outcome == ChunkOutcome.LABELLED:
        oracle_run_chunk_task.delay(run_id)
    elif result.outcome == ChunkOutcome.WAITING:
        oracle_run_chunk_task.apply_async((run_id,), countdown=result.retry_after)
    return result.outcome


@shared_task(max_retries=5, **DATABASE_RETRIES)
def oracle_validation_task(job_id: int) -> str:
    """Validate a run against a Gold campaign (oracle.services). Idempotent: a
    job already done is left alone; one left running by a dead worker is
    computed again and still gets a single report."""
    from oracle.services import validation_job_execute

    job = validation_job_execute(job_id=job_id)
    return job.state if job is not None else "gone"
