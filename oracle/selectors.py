"""Reads of the Oracle (spec section 7): backbones, runs with their live progress,
failures and cost, and validation reports. Admin only: Oracle labels are never
shown to physicians, so every read here checks the role first."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from accounts.ids import id_parse
from accounts.roles import user_is_admin
from jobs.leases import is_live
from jobs.progress import percent_of
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    OracleWindowClaim,
    RunScope,
    RunState,
    ValidationJob,
    ValidationJobState,
    ValidationReport,
)
from windows.models import Window

RULES_BACKBONE_NAME = "Rules (no LLM)"
# Failures listed on the run page; the reasons are counted over all of them.
FAILURES_SHOWN = 50
# Rate over the last minute: what the run does now, not its average.
RATE_WINDOW_SECONDS = 60


def _require_admin(user) -> None:
    if not user_is_admin(user):
        raise PermissionDenied("Only an admin can see Oracle runs.")


def run_windows(*, run: OracleRun) -> QuerySet[Window]:
    """The windows a run labels: its campaign's windows, or every candidate
    window of its cohort's stays."""
    if run.scope == RunScope.CAMPAIGN:
        return Window.objects.filter(campaign_windows__campaign_id=run.campaign_id)
    return Window.objects.filter(stay__cohort_stays__cohort_id=run.cohort_id)


def run_windows_todo(*, run: OracleRun) -> QuerySet[Window]:
    """The run's windows without an Oracle label (ok or failed) of this run."""
    labelled = OracleLabel.objects.filter(run_id=run.pk, window_id=OuterRef("pk"))
    return run_windows(run=run).filter(~Exists(labelled))


def backbone_list(*, admin) -> QuerySet[Backbone]:
    _require_admin(admin)
    return Backbone.objects.annotate(run_count=Count("runs"))


def backbone_get(*, admin, backbone_id) -> Backbone:
    _require_admin(admin)
    backbone = Backbone.objects.filter(pk=backbone_id).first()
    if backbone is None:
        raise Http404("No such backbone.")
    return backbone


def backbone_rules_default() -> Backbone:
    """The rules backbone, made at first use, so a fresh install can run the
    Oracle with no LLM configured."""
    backbone = Backbone.objects.filter(kind=BackboneKind.RULES).order_by("pk").first()
    if backbone is None:
        backbone, _ = Backbone.objects.get_or_create(
            name=RULES_BACKBONE_NAME,
            defaults={
                "kind": BackboneKind.RULES,
                "concurrency": 4,
                "requests_per_minute": 100_000,
            },
        )
    return backbone


def run_list(*, admin) -> QuerySet[OracleRun]:
    _require_admin(admin)
    ok = Count("labels", filter=Q(labels__state=OracleLabelState.OK))
    failed = Count("labels", filter=Q(labels__state=OracleLabelState.FAILED))
    return OracleRun.objects.select_related(
        "backbone", "prompt", "campaign", "cohort", "created_by"
    ).annotate(
        ok_count=ok,
        failed_count=failed,
        report_count=Count("validation_reports", distinct=True),
    )


def run_get(*, admin, run_id) -> OracleRun:
    _require_admin(admin)
    run = (
        OracleRun.objects.select_related("backbone", "prompt", "campaign", "cohort")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise Http404("No such Oracle run.")
    return run


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:200] or "No reason recorded"


def oracle_run_progress(*, admin, run: OracleRun) -> dict:
    """Where the run stands, from its labels (committed one by one, so this is
    live): windows done of the total, the rate over the last minute and over
    the run, tokens and the estimated cost so far from the snapshot's prices,
    and the failures with their reasons."""
    _require_admin(admin)
    labels = OracleLabel.objects.filter(run=run)
    now = timezone.now()
    figures = labels.aggregate(
        done=Count("pk"),
        failed=Count("pk", filter=Q(state=OracleLabelState.FAILED)),
        tokens_in=Sum("tokens_in"),
        tokens_out=Sum("tokens_out"),
        recent=Count(
            "pk", filter=Q(created_at__gte=now - timedelta(seconds=RATE_WINDOW_SECONDS))
        ),
    )
    done = figures["done"]
    failed = figures["failed"]
    tokens_in = figures["tokens_in"] or 0
    tokens_out = figures["tokens_out"] or 0
    snapshot = run.backbone_snapshot or {}
    cost = (
        tokens_in * float(snapshot.get("price_per_million_input") or 0)
        + tokens_out * float(snapshot.get("price_per_million_output") or 0)
    ) / 1_000_000
    total = run.total_windows
    elapsed = None
    if run.started_at:
        elapsed = ((run.finished_at or now) - run.started_at).total_seconds()
    overall_rate = done / (elapsed / 60) if elapsed and elapsed > 0 else None
    failures = list(
        labels.filter(state=OracleLabelState.FAILED)
        .select_related("window")
        .order_by("window__stay_id", "window__index")
        .values(
            "window_id",
            "window__stay_id",
            "window__index",
            "error",
            "attempts",
            "created_at",
        )[:FAILURES_SHOWN]
    )
    reasons = Counter(
        _first_line(error)
        for error in labels.filter(state=OracleLabelState.FAILED).values_list(
            "error", flat=True
        )
    )
    active = run.state in (RunState.QUEUED, RunState.RUNNING)
    remaining = max(total - done, 0)
    # Liveness from the row's heartbeat (jobs.leases), never from what the
    # claims or the labels suggest: a run whose workers died says so.
    # (A queued run's heartbeat_at is when its chunks were last sent.)
    live = run.state == RunState.RUNNING and is_live(run, now)
    return {
        "state": run.state,
        "state_display": run.get_state_display(),
        "active": active,
        "total": total,
        "done": done,
        "ok": done - failed,
        "failed": failed,
        "remaining": remaining,
        "percent": percent_of(done, total),
        "rate_recent": figures["recent"] * 60 / RATE_WINDOW_SECONDS if live else None,
        "live": live,
        "stalled": run.state == RunState.RUNNING and not live,
        # Cancel while it goes; Resume only where no worker would carry on.
        "cancellable": active,
        "resumable": run_not_resumable_reason(run=run, now=now, todo=remaining) is None,
        "heartbeat_at": run.heartbeat_at,
        "worker": run.worker,
        "lost_workers": run.attempts,
        "rate_overall": overall_rate,
        "elapsed_seconds": elapsed,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": cost,
        "priced": bool(
            snapshot.get("price_per_million_input")
            or snapshot.get("price_per_million_output")
        ),
        "chunks_at_work": OracleWindowClaim.objects.filter(run=run, expires_at__gte=now)
        .values("token")
        .distinct()
        .count()
        if live
        else 0,
        "failures": failures,
        "failure_reasons": reasons.most_common(),
        "cancel_requested": run.cancel_requested_at is not None,
        "error": run.error,
        "requests": {
            "sent": run.requests_sent,
            "answered": run.requests_answered,
            "timed_out": run.requests_timed_out,
            "errored": run.requests_errored,
            "retried": run.requests_retried,
            "in_flight": run.requests_in_flight if active else 0,
            "problem": run.request_problem,
            "problem_at": run.request_problem_at,
        },
    }


def run_not_resumable_reason(
    *, run: OracleRun, now=None, todo: int | None = None
) -> str | None:
    """Why the run cannot be resumed now, or None when it can: a failed or
    cancelled run, or a running one whose workers stopped writing their
    heartbeat (stalled, jobs.leases), with windows still to label. A queued
    run waits for a worker (the reaper sends it again), a live one is at work.
    ``todo``: the windows left, when the caller has counted them."""
    if run.state == RunState.QUEUED:
        return "The run is queued: it starts when a worker takes it."
    if run.state == RunState.RUNNING and is_live(run, now or timezone.now()):
        return "The run is running: its workers are labelling the windows left."
    if run.state == RunState.COMPLETED:
        return "The run is complete."
    if todo is None:
        todo = run_windows_todo(run=run).count()
    if not todo:
        return "Every window of this run is labelled."
    return None


def validation_reports_of(*, admin, run: OracleRun) -> QuerySet[ValidationReport]:
    _require_admin(admin)
    return run.validation_reports.select_related("campaign", "created_by")


def _row_or_404(rows: QuerySet, row_id, missing: str):
    """The row of ``rows`` that ``row_id``, from the query string, names; else
    Http404 with ``missing``. Anything but an id in the database's range names
    none (a 5,000-digit number would overflow the database's integer)."""
    pk = id_parse(row_id)
    row = rows.filter(pk=pk).first() if pk is not None else None
    if row is None:
        raise Http404(missing)
    return row


def validation_report_get(*, admin, run: OracleRun, report_id) -> ValidationReport:
    _require_admin(admin)
    return _row_or_404(
        run.validation_reports.select_related("campaign"),
        report_id,
        "No such validation report.",
    )


def validation_report_latest(*, run: OracleRun) -> ValidationReport | None:
    """The run's newest validation report, or None. Not scoped to a user: for
    callers that have checked who may see the run (the exports app's release
    builder and API); the pages use ``validation_reports_of``."""
    return (
        ValidationReport.objects.select_related("campaign")
        .filter(run=run)
        .order_by("-created_at", "-id")
        .first()
    )


VALIDATION_ACTIVE = (ValidationJobState.QUEUED, ValidationJobState.RUNNING)


def validation_job_get(*, admin, run: OracleRun, job_id) -> ValidationJob:
    _require_admin(admin)
    return _row_or_404(
        ValidationJob.objects.select_related("campaign", "report").filter(run=run),
        job_id,
        "No such validation.",
    )


def validation_job_current(*, admin, run: OracleRun) -> ValidationJob | None:
    """The run's newest validation still under way, if any."""
    _require_admin(admin)
    return (
        ValidationJob.objects.select_related("campaign")
        .filter(run=run, state__in=VALIDATION_ACTIVE)
        .order_by("-created_at", "-id")
        .first()
    )


def validation_job_progress(*, admin, job: ValidationJob) -> dict:
    """Where a validation stands, from its row: state, the steps done as its
    worker last wrote them with its heartbeat (jobs.leases), and the error."""
    _require_admin(admin)
    finished = job.state in (ValidationJobState.DONE, ValidationJobState.FAILED)
    percent = 100 if job.state == ValidationJobState.DONE else job.percent
    return {
        "state": job.state,
        "state_display": job.get_state_display(),
        "active": not finished,
        "percent": percent,
        "done": job.progress_done,
        "total": job.progress_total,
        "step": job.progress_label or job.get_state_display().lower(),
        "error": job.error,
        "report_id": job.report_id,
        "heartbeat_at": job.heartbeat_at,
        "worker": job.worker,
    }
