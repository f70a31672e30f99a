"""Validation of an Oracle run against a campaign's Gold consensus (spec section
6): the report made here and now, or a job queued for a worker. The computation
itself is ``oracle.gold_comparison``."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import Campaign, ConsensusLabel
from oracle import selectors
from oracle.models import (
    OracleRun,
    ValidationJob,
    ValidationJobState,
    ValidationReport,
)
from windows.accounts import require_admin
from windows.jobprogress import progress_set

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


def _validation_report_save(*, admin, run, campaign, matcher, report) -> ValidationReport:
    return ValidationReport.objects.create(
        run=run,
        campaign=campaign,
        created_by=admin,
        matcher_model=getattr(matcher, "model_name", type(matcher).__name__)[:200],
        tau=float(getattr(matcher, "tau", 0.5)),
        report=report,
    )


VALIDATION_PROGRESS_KIND = "oracle_validation"
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
    job = ValidationJob.objects.create(run=run, campaign=campaign, created_by=admin)
    progress_set(
        kind=VALIDATION_PROGRESS_KIND, pk=job.pk, done=0, total=0, label="queued"
    )
    if enqueue:

        def send() -> None:
            from oracle.tasks import oracle_validation_task

            try:
                oracle_validation_task.delay(job.pk)
            except Exception:
                logger.exception("Validation job %s could not be queued", job.pk)

        transaction.on_commit(send)
    return job


def validation_job_execute(*, job_id: int, matcher=None) -> ValidationJob | None:
    """Compute a queued validation and record its report (or why it failed).
    Idempotent: a job already done or failed is left as it is, and a job a dead
    worker left running is computed again (a report is written once, with the
    job's state, in one transaction)."""
    with transaction.atomic():
        job = (
            ValidationJob.objects.select_for_update(of=("self",))
            .select_related("run__prompt", "campaign", "created_by")
            .filter(pk=job_id)
            .first()
        )
        if job is None or job.state not in VALIDATION_ACTIVE:
            return job
        job.state = ValidationJobState.RUNNING
        job.started_at = timezone.now()
        job.save(update_fields=["state", "started_at"])

    def on_progress(done: int, total: int, label: str) -> None:
        progress_set(
            kind=VALIDATION_PROGRESS_KIND, pk=job.pk, done=done, total=total, label=label
        )

    try:
        _validation_check(admin=job.created_by, run=job.run, campaign=job.campaign)
        report, matcher = _validation_compute(
            run=job.run, campaign=job.campaign, matcher=matcher, on_progress=on_progress
        )
    except (ValidationError, PermissionDenied) as error:
        with transaction.atomic():
            _validation_job_finish(job, error=" ".join(
                getattr(error, "messages", [str(error)])))
        return job
    except Exception as error:
        logger.exception("Validation job %s failed", job.pk)
        with transaction.atomic():
            _validation_job_finish(job, error=f"{type(error).__name__}: {error}")
        return job
    with transaction.atomic():
        # A second delivery of the task may have finished first: one report.
        job = ValidationJob.objects.select_for_update().get(pk=job.pk)
        if job.state != ValidationJobState.RUNNING:
            return job
        saved = _validation_report_save(
            admin=job.created_by, run=job.run, campaign=job.campaign,
            matcher=matcher, report=report,
        )
        _validation_job_finish(job, report=saved)
    return job


def _validation_job_finish(job: ValidationJob, *, report=None, error: str = "") -> None:
    job.state = ValidationJobState.DONE if report is not None else ValidationJobState.FAILED
    job.report = report
    job.error = error[:5000]
    job.finished_at = timezone.now()
    job.save(update_fields=["state", "report", "error", "finished_at"])
    progress_set(
        kind=VALIDATION_PROGRESS_KIND, pk=job.pk, done=1, total=1,
        label="done" if report is not None else "failed",
    )
