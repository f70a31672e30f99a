"""Celery tasks of the windows app: thin wrappers around services."""

import logging

from celery import shared_task

from windows.models import ImportRun

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def import_run_execute_task(import_run_id: int) -> None:
    from windows.services import import_run_execute

    run = ImportRun.objects.filter(pk=import_run_id).first()
    if run is None:
        return
    try:
        import_run_execute(import_run=run)
    except Exception:
        # import_run_execute put the failure and its message on the run row, for
        # the page to show; a data error is not worth a retry.
        logger.exception("import run %s failed", import_run_id)


@shared_task(acks_late=True)
def build_batch_execute_task(batch_id: int) -> None:
    """One batch of a fanned-out tracks or windows build (windows.builds)."""
    from windows.builds import build_batch_execute

    build_batch_execute(batch_id=batch_id)


@shared_task(acks_late=True)
def import_batch_execute_task(batch_id: int) -> None:
    """One batch of a fanned-out MIMIC-IV import (windows.import_batches)."""
    from windows.import_batches import import_batch_execute

    import_batch_execute(batch_id=batch_id)
