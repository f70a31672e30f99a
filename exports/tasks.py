"""Celery tasks of the exports app: thin wrappers around services, ids in,
idempotent. Each job is taken with a lease on its row (jobs.leases): a second
delivery of the same message finds the job taken or finished and does nothing,
and a job whose worker died is queued again by the reaper and rebuilt or
rescored from the start."""

import logging

from celery import shared_task
from django.db import OperationalError

logger = logging.getLogger(__name__)


def _job_run(model, pk: int, job, failed: str) -> None:
    """``job(row)`` on the row ``pk`` names, if it is still there. A database
    error goes back to Celery to retry; any other the job has put on its row
    for the page, and it is only logged here (``failed``, with the id)."""
    row = model.objects.filter(pk=pk).first()
    if row is None:
        return
    try:
        job(row)
    except OperationalError:
        raise
    except Exception:
        logger.exception(failed, pk)


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def release_build_task(release_id: int) -> None:
    from exports.building import release_build
    from exports.models import Release

    _job_run(
        Release,
        release_id,
        lambda release: release_build(release=release),
        "release %s failed to build",
    )


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def submission_score_task(submission_id: int) -> None:
    from exports.models import Submission
    from exports.services import submission_score

    _job_run(
        Submission,
        submission_id,
        lambda submission: submission_score(submission=submission),
        "submission %s failed to score",
    )
