"""The reaper on beat (jobs.reaper)."""

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def jobs_reap_task() -> dict:
    from jobs.reaper import jobs_reap

    counts = jobs_reap()
    if any(v for k, v in counts.items() if k not in ("alive", "waiting")):
        logger.info("reaper: %s", counts)
    return counts
