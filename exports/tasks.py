"""Celery tasks of the exports app: thin wrappers around services, ids in,
idempotent (a rerun after a crash rebuilds or rescores the same thing)."""

import logging

from celery import shared_task
from django.db import OperationalError

logger = logging.getLogger(__name__)


def _cache_progress(kind: str, pk: int):
    from windows.importers.base import Progress
    from windows.jobprogress import progress_set

    def to_cache(done: int, total: int, label: str) -> None:
        progress_set(kind=kind, pk=pk, done=done, total=total, label=label)

    return Progress(sinks=[to_cache])


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def release_build_task(release_id: int) -> None:
    from exports.building import release_build
    from exports.models import Release
    from windows.jobprogress import progress_clear

    release = Release.objects.filter(pk=release_id).first()
    if release is None:
        return
    try:
        release_build(release=release, progress=_cache_progress("release", release_id))
    except OperationalError:
        raise
    except Exception:
        # release_build put the reason on the release row for the page.
        logger.exception("release %s failed to build", release_id)
    finally:
        progress_clear(kind="release", pk=release_id)


@shared_task(
    acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3
)
def submission_score_task(submission_id: int) -> None:
    from exports.models import Submission
    from exports.services import submission_score
    from windows.jobprogress import progress_clear

    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return
    try:
        submission_score(
            submission=submission, progress=_cache_progress("submission", submission_id)
        )
    except OperationalError:
        raise
    except Exception:
        logger.exception("submission %s failed to score", submission_id)
    finally:
        progress_clear(kind="submission", pk=submission_id)
