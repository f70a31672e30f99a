"""Celery tasks of the annotation app: thin wrappers around services."""

import logging

from celery import shared_task
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import OperationalError

logger = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def window_agreement_task(campaign_id: int, window_id: int) -> None:
    """Compute the window's agreement and rebuild its consensus, then (on the
    filesystem broker: REALICU_AGREEMENT_CATCH_UP) catch up with the campaign's
    other windows whose agreement is due (their own tasks, still queued, then
    find nothing to do). Idempotent: a rerun recomputes the
    same derived rows; a window whose labels are no longer all submitted (a
    reopen, a third rater) is left alone."""
    from annotation.models import Campaign
    from annotation.services.agreement import (
        campaign_agreement_catch_up,
        window_consensus_refresh,
    )
    from evaluation.matcher import matcher_for_settings
    from windows.models import Window

    campaign = Campaign.objects.filter(pk=campaign_id).first()
    window = Window.objects.filter(pk=window_id).first()
    if campaign is None or window is None:
        return
    matcher = matcher_for_settings()
    try:
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    except ValidationError as error:
        logger.info(
            "agreement on window %s of campaign %s not computed: %s",
            window_id,
            campaign_id,
            "; ".join(error.messages),
        )
    limit = getattr(settings, "REALICU_AGREEMENT_CATCH_UP", 0)
    if limit <= 0:
        return
    caught_up = campaign_agreement_catch_up(
        campaign=campaign, matcher=matcher, limit=limit
    )
    if caught_up:
        logger.info(
            "agreement task of window %s also computed %s other windows of campaign %s",
            window_id,
            caught_up,
            campaign_id,
        )


@shared_task(acks_late=True)
def agreement_recompute_task(recompute_id: int) -> str:
    """Run the campaign-wide recompute ``recompute_id`` (an AgreementRecompute
    row) in this worker, or nothing when it is finished or held by a live
    worker. Idempotent: a redelivered or re-queued message resumes the job."""
    from annotation.services.recompute import agreement_recompute_run

    return agreement_recompute_run(recompute_id=recompute_id)


@shared_task(acks_late=True)
def calibration_draw_task(draw_id: int) -> str:
    """Draw the calibration set of ``draw_id`` (a CalibrationDraw row) in this
    worker, where the matcher model lives. Idempotent: a redelivered message
    finds the job finished or held, and a rerun after a crash takes the set
    already written."""
    from annotation.calibration import calibration_draw_run

    return calibration_draw_run(draw_id=draw_id)
