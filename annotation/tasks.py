"""Celery tasks of the annotation app: thin wrappers around services."""

import logging

from celery import shared_task
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
    """Compute the window's agreement and rebuild its consensus. Idempotent: a
    rerun recomputes the same derived rows; a window whose labels are no longer
    all submitted (a reopen, a third rater) is left alone."""
    from annotation.consensus import window_consensus_refresh
    from annotation.models import Campaign
    from evaluation.matcher import matcher_for_settings
    from windows.models import Window

    campaign = Campaign.objects.filter(pk=campaign_id).first()
    window = Window.objects.filter(pk=window_id).first()
    if campaign is None or window is None:
        return
    try:
        window_consensus_refresh(
            campaign=campaign, window=window, matcher=matcher_for_settings()
        )
    except ValidationError as error:
        logger.info(
            "agreement on window %s of campaign %s not computed: %s",
            window_id,
            campaign_id,
            "; ".join(error.messages),
        )


# Progress of a campaign-wide recompute, in windows/jobprogress under this kind.
AGREEMENT_PROGRESS = "campaign-agreement"


@shared_task(acks_late=True)
def campaign_agreement_task(campaign_id: int) -> None:
    """Recompute the agreement and consensus of every complete window of the
    campaign, reporting progress for the dashboard's bar. Idempotent: a rerun
    recomputes the same rows."""
    from annotation.consensus import campaign_agreement_refresh
    from annotation.models import Campaign
    from evaluation.matcher import MatcherUnavailable, matcher_for_settings
    from windows.jobprogress import progress_set

    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return

    def report(done: int, total: int) -> None:
        progress_set(
            kind=AGREEMENT_PROGRESS,
            pk=campaign_id,
            done=done,
            total=total,
            label=f"{done} of {total} windows",
        )

    progress_set(
        kind=AGREEMENT_PROGRESS, pk=campaign_id, done=0, total=0, label="embedding"
    )
    try:
        result = campaign_agreement_refresh(
            campaign=campaign, matcher=matcher_for_settings(), on_progress=report
        )
    except MatcherUnavailable as error:
        progress_set(
            kind=AGREEMENT_PROGRESS,
            pk=campaign_id,
            done=0,
            total=0,
            label=f"failed: {error}",
        )
        logger.error("agreement of campaign %s not recomputed: %s", campaign_id, error)
        return
    progress_set(
        kind=AGREEMENT_PROGRESS,
        pk=campaign_id,
        done=result["computed"],
        total=result["computed"],
        label=(
            f"done: {result['computed']} windows recomputed, "
            f"{result['skipped']} still waiting for labels"
        ),
    )
