"""Validation of an Oracle run against a campaign's Gold consensus (spec section
6): the report made here and now, or a job queued for a worker. The computation
itself is ``oracle.gold_comparison``."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import require_admin
from annotation.models import Campaign, ConsensusLabel
from jobs.leases import JobLeaseLost, job_claim, job_heartbeat, job_release
from jobs.outbox import outbox_send
from oracle import selectors
from oracle.models import (
    OracleRun,
    ValidationJob,
    ValidationJobState,
    ValidationReport,
)

logger = logging.getLogger(__name__)


def _validation_check(*, admin, run: OracleRun, campaign: Campaign | None) -> None:
    require_admin(admin, "validate an Oracle run")
    if campaign is None:
        raise ValidationError("Choose the Gold campaign to validate against.")
    if not ConsensusLabel.objects.filter(campaign=campaign).exists():
        raise ValidationError(
            f"Campaign {campaign} has no consensus yet: nothing to validate against."
        )


def validation_report_create(
    *, admin, run: OracleRun, campaign: Campaign, matcher=None, on_progress=None
) -> ValidationReport:
    """Measure the run against the campaign's Gold consensus (spec section 6,
    paper Table 1), here and now; see ``oracle.gold_comparison``. The pages queue
    ``validation_job_create`` instead; this is the command line's way.
    ``on_progress(done, total, label)`` follows the computation."""
    _validation_check(admin=admin, run=run, campaign=campaign)
    report, matcher = _validation_compute(
        run=run, campaign=campaign, matcher=matcher, on_progress=on_progress
    )
    with transaction.atomic():
        return _validation_report_save(
            admin=admin, run=run, campaign=campaign, matcher=matcher, report=report
        )


def _validation_compute(*, run, campaign, matcher, on_progress):
    from oracle.gold_comparison import oracle_validation_compute

    if matcher is None:
        from evaluation.matcher import matcher_for_settings

        matcher = matcher_for_settings()
    report = oracle_validation_compute(
        run=run, campaign=campaign, matcher=matcher, on_progress=on_progress
    )
    return report, matcher


def _validation_report_save(
    *, admin, run, campaign, matcher, report
) -> ValidationReport:
    return ValidationReport.objects.create(
        run=run,
        campaign=campaign,
        created_by=admin,
        matcher_model=getattr(matcher, "model_name", type(matcher).__name__)[:200],
        tau=float(getattr(matcher, "tau", 0.5)),
        report=report,
    )


VALIDATION_TASK = "oracle.tasks.oracle_validation_task"
VALIDATION_ACTIVE = selectors.VALIDATION_ACTIVE


@transaction.atomic
def validation_job_create(
    *, admin, run: OracleRun, campaign: Campaign | None, enqueue: bool = True
) -> ValidationJob:
    """Queue the validation of the run against the campaign on a worker (a cold
    matcher may take tens of seconds). A validation of the same run and
    campaign still under way is returned instead of a second one."""
    _validation_check(admin=admin, run=run, campaign=campaign)
    OracleRun.objects.select_for_update().filter(pk=run.pk).first()
    going = ValidationJob.objects.filter(
        run=run, campaign=campaign, state__in=VALIDATION_ACTIVE
    ).first()
    if going is not None:
        return going
    job = ValidationJob.objects.create(
        run=run, campaign=campaign, created_by=admin, progress_label="queued"
    )
    if enqueue:
        outbox_send(task=VALIDATION_TASK, args=[job.pk], key=f"validation:{job.pk}")
    return job


def validation_job_execute(*, job_id: int, matcher=None) -> ValidationJob | None:
    """Compute a queued validation and record its report (or why it failed).
    Idempotent: the job is taken under a lease (jobs.leases), so a job already
    done, failed or held by a live worker is left as it is, and one whose
    worker died is computed again; a report is written once, with the job's
    state, in one transaction."""
    lease = job_claim(
        model=ValidationJob,
        pk=job_id,
    )
    job = (
        ValidationJob.objects.select_related("run__prompt", "campaign", "created_by")
        .filter(pk=job_id)
        .first()
    )
    if lease is None or job is None:
        return job
    try:
        with job_heartbeat(model=ValidationJob, pk=job.pk, lease=lease) as beat:
            _validation_check(admin=job.created_by, run=job.run, campaign=job.campaign)
            report, matcher = _validation_compute(
                run=job.run, campaign=job.campaign, matcher=matcher, on_progress=beat
            )
    except JobLeaseLost:
        return job
    except (ValidationError, PermissionDenied) as error:
        _validation_job_finish(
            job, lease=lease, error=" ".join(getattr(error, "messages", [str(error)]))
        )
        job.refresh_from_db()
        return job
    except Exception as error:
        logger.exception("Validation job %s failed", job.pk)
        _validation_job_finish(
            job, lease=lease, error=f"{type(error).__name__}: {error}"
        )
        job.refresh_from_db()
        return job
    with transaction.atomic():
        # Only the holder of the lease writes the report: one report.
        held = (
            ValidationJob.objects.select_for_update()
            .filter(pk=job.pk, lease=lease, state=ValidationJobState.RUNNING)
            .exists()
        )
        if not held:
            return job
        saved = _validation_report_save(
            admin=job.created_by,
            run=job.run,
            campaign=job.campaign,
            matcher=matcher,
            report=report,
        )
        _validation_job_finish(job, lease=lease, report=saved)
    job.refresh_from_db()
    return job


def _validation_job_finish(
    job: ValidationJob, *, lease: str, report=None, error: str = ""
) -> None:
    job_release(
        model=ValidationJob,
        pk=job.pk,
        lease=lease,
        state=ValidationJobState.DONE
        if report is not None
        else ValidationJobState.FAILED,
        report=report,
        error=error[:5000],
        finished_at=timezone.now(),
        progress_label="done" if report is not None else "failed",
    )
