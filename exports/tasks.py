"""Celery tasks of the exports app: thin wrappers around services, ids in,
idempotent. Each job is taken with a lease on its row (jobs.leases): a second
delivery of the same message finds the job taken or finished and does nothing,
and a job whose worker died is queued again by the reaper and rebuilt or
rescored from the start."""

import logging

from celery import shared_task
from django.db import OperationalError

logger = logging.getLogger(__name__)


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def release_build_task(release_id: int) -> None:
    from exports.building import release_build
    from exports.models import Release

    release = Release.objects.filter(pk=release_id).first()
    if release is None:
        return
    try:
        release_build(release=release)
    except OperationalError:
        raise
    except Exception:
        # release_build put the reason on the release row for the page.
        logger.exception("release %s failed to build", release_id)


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def submission_score_task(submission_id: int) -> None:
    from exports.models import Submission
    from exports.services import submission_score

    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return
    try:
        submission_score(submission=submission)
    except OperationalError:
        raise
    except Exception:
        logger.exception("submission %s failed to score", submission_id)
