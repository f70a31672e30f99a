"""The campaign-wide recompute of agreement as a job row (AgreementRecompute):
started by an admin, run by a worker that heart-beats the row, re-queued by the
reaper (jobs.reaper) when that worker dies, and resumed where it stopped."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import require_admin
from annotation.models import (
    AgreementRecompute,
    Campaign,
    CampaignWindow,
    RecomputeState,
    WindowAgreement,
)
from jobs.leases import is_live, job_claim, job_fail, job_heartbeat, job_release
from jobs.outbox import outbox_send

logger = logging.getLogger(__name__)

RECOMPUTE_TASK = "annotation.tasks.agreement_recompute_task"
ACTIVE_STATES = (RecomputeState.QUEUED, RecomputeState.RUNNING)


def agreement_recompute_start(*, admin, campaign: Campaign) -> AgreementRecompute:
    """Queue a recompute of every complete window's agreement and consensus.

    Refused while another recompute of the campaign is queued or running with a
    live heartbeat (a queued job's heartbeat is when it was last sent). One
    whose worker went silent is superseded: failed with the reason, its lease
    cleared so that a worker still holding it stops at its next report."""
    require_admin(admin, "recompute agreement")
    now = timezone.now()
    with transaction.atomic():
        # One start at a time per campaign: the campaign row is the lock.
        Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        active = list(
            AgreementRecompute.objects.select_for_update().filter(
                campaign=campaign, state__in=ACTIVE_STATES
            )
        )
        live = [job for job in active if is_live(job, now)]
        if live:
            job = live[0]
            raise ValidationError(
                "A recompute of this campaign is already "
                f"{job.get_state_display().lower()} "
                f"(started by {job.created_by} at "
                f"{timezone.localtime(job.created_at):%H:%M:%S}, last heartbeat "
                f"{(now - job.heartbeat_at).total_seconds():.0f} s ago); it is shown "
                "below."
            )
        job = AgreementRecompute.objects.create(
            campaign=campaign,
            created_by=admin,
            heartbeat_at=now,
            progress_label="queued",
        )
        for stale in active:
            seen = (
                f"{(now - stale.heartbeat_at).total_seconds():.0f} s before"
                if stale.heartbeat_at
                else "never"
            )
            AgreementRecompute.objects.filter(pk=stale.pk).update(
                state=RecomputeState.FAILED,
                lease="",
                finished_at=now,
                error=(
                    f"Superseded by recompute {job.pk}: this one was "
                    f"{stale.state} without a live worker (last heartbeat {seen})."
                ),
                progress_label="failed: superseded",
            )
        outbox_send(
            task=RECOMPUTE_TASK, args=[job.pk], key=f"job:agreement-recompute:{job.pk}"
        )
    return job


def _windows_left(job: AgreementRecompute) -> tuple[list[int] | None, int]:
    """On a resumed job, the campaign's windows whose agreement this job has
    not written yet (agreement chunks commit one by one) and how many it has;
    (None, 0) on a first try: every window."""
    if job.attempts <= 1 or job.started_at is None:
        return None, 0
    written = set(
        WindowAgreement.objects.filter(
            campaign_id=job.campaign_id, computed_at__gte=job.started_at
        ).values_list("window_id", flat=True)
    )
    left = [
        window_id
        for window_id in CampaignWindow.objects.filter(
            campaign_id=job.campaign_id
        ).values_list("window_id", flat=True)
        if window_id not in written
    ]
    return left, len(written)


def agreement_recompute_run(*, recompute_id: int, matcher_factory=None) -> str:
    """Run the recompute ``recompute_id`` in this worker: take it (or return
    when it is finished or held by a live worker), recompute chunk by chunk
    with progress on the row, and finish it done or failed. Idempotent and
    resumable: a rerun after a crash computes the windows this job has not
    written yet. Returns what happened, for the log."""
    from annotation.services.agreement import campaign_agreement_refresh
    from evaluation.matcher import MatcherUnavailable, matcher_for_settings
    from jobs.leases import JobLeaseLost

    lease = job_claim(model=AgreementRecompute, pk=recompute_id)
    if lease is None:
        return "not taken"
    job = AgreementRecompute.objects.select_related("campaign").get(pk=recompute_id)
    window_ids, written = _windows_left(job)
    try:
        with job_heartbeat(model=AgreementRecompute, pk=job.pk, lease=lease) as beat:
            beat(0, 0, "embedding the items")
            result = campaign_agreement_refresh(
                campaign=job.campaign,
                matcher=(matcher_factory or matcher_for_settings)(),
                window_ids=window_ids,
                on_progress=lambda done, total: beat(
                    written + done,
                    written + total,
                    f"{written + done} of {written + total} windows",
                ),
            )
    except JobLeaseLost:
        logger.warning("recompute %s: lease lost, stopping", recompute_id)
        return "lease lost"
    except MatcherUnavailable as error:
        job_fail(
            model=AgreementRecompute,
            pk=job.pk,
            lease=lease,
            error=str(error),
            label="failed: the matcher is unavailable",
        )
        logger.error(
            "recompute %s of campaign %s failed: %s",
            recompute_id,
            job.campaign_id,
            error,
        )
        return "failed"
    except Exception as error:
        logger.exception(
            "recompute %s of campaign %s failed", recompute_id, job.campaign_id
        )
        job_fail(model=AgreementRecompute, pk=job.pk, lease=lease, error=error)
        return "failed"
    computed, skipped = written + result["computed"], result["skipped"]
    job_release(
        model=AgreementRecompute,
        pk=job.pk,
        lease=lease,
        state=RecomputeState.DONE,
        finished_at=timezone.now(),
        computed=computed,
        skipped=skipped,
        progress_done=computed,
        progress_total=computed,
        progress_label=(
            f"done: {computed} windows recomputed, {skipped} still waiting for labels"
        ),
    )
    return "done"
