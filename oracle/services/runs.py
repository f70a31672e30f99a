"""Oracle runs (spec section 7): create, cancel, resume, retry; their chunked,
resumable execution on Celery workers is oracle.services.chunks.

How a run shares out across workers: it is labelled in chunks. A chunk task
claims up to ``chunk_size`` windows of the run that have no label and no live
claim (``OracleWindowClaim``, a lease the task renews while it works), labels
them, and saves each label as it arrives. The claim is taken with the run's row
locked, so claims never overlap; a worker that dies stops renewing, its lease
runs out and another chunk claims those windows. A label is inserted with ON
CONFLICT DO NOTHING on (run, window), so even a chunk that outlived its lease
never duplicates a label.

How the limits hold across workers: at most ``lanes`` chunk tasks of a run hold
claims at once (counted under the same row lock), and each labels with
``concurrency // lanes`` requests in flight and ``requests_per_minute // lanes``
per minute. The sum over workers is then within the run's limits with no shared
counter to call per request, and it works on every broker and database the
platform supports (Redis or the filesystem transport, PostgreSQL or SQLite). The
price is that a lane whose worker is busy elsewhere leaves its share unused;
``REALICU_ORACLE_LANES`` should match the worker processes.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import require_admin
from annotation.models import Campaign
from jobs.outbox import outbox_send
from oracle import selectors
from oracle.egress import egress_guard
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    OracleWindowClaim,
    PromptTemplate,
    RunScope,
    RunState,
)
from windows.models import Cohort

logger = logging.getLogger(__name__)

CHUNK_TASK = "oracle.tasks.oracle_run_chunk_task"
# How often a chunk looks for a cancel request and writes its progress.
POLL_SECONDS = 1.0
# A chunk task that found nothing to claim (the other lanes hold the rest, or a
# dead worker's lease has not run out yet) tries again after this long.
WAIT_SECONDS = 5
MAX_NAME = 200
FINISHED_STATES = (RunState.CANCELLED, RunState.COMPLETED, RunState.FAILED)


def run_lanes(run: OracleRun | None = None) -> int:
    """Chunk tasks of a run at work at once: the setting, bounded by the
    backbone's limits so every lane gets at least one request in flight and one
    per minute."""
    lanes = max(1, int(getattr(settings, "REALICU_ORACLE_LANES", 2)))
    if run is not None:
        snapshot = run.backbone_snapshot or {}
        lanes = min(
            lanes,
            max(1, int(snapshot.get("concurrency") or 1)),
            max(1, int(snapshot.get("requests_per_minute") or 1)),
        )
    return lanes


def chunk_size_default() -> int:
    return max(1, int(getattr(settings, "REALICU_ORACLE_CHUNK_SIZE", 50)))


def lease_seconds() -> int:
    return max(5, int(getattr(settings, "REALICU_ORACLE_CLAIM_LEASE_SECONDS", 120)))


# Runs ---------------------------------------------------------------------------


def backbone_endpoint_check(backbone: Backbone) -> None:
    """A backbone saved before the operator's rules (or under other ones) is
    checked again when a run starts, the Oracle's or an agent's: its key
    variable must be allowed and its URL not refused
    (oracle.backbones.endpoints)."""
    from oracle.backbones.endpoints import EndpointRefused, key_env_check, url_check

    if backbone.kind != BackboneKind.OPENAI:
        return
    try:
        key_env_check(backbone.api_key_env)
        url_check(backbone.base_url)
    except EndpointRefused as error:
        raise ValidationError(
            f"Backbone {backbone.name} cannot be used: {error} Edit the backbone first."
        ) from None


def _enqueue_chunks(run_id: int, count: int) -> None:
    """Queue ``count`` chunk tasks through the outbox (jobs.outbox): sent once
    the transaction commits, or by the reaper when the broker was away."""
    for _ in range(count):
        outbox_send(task=CHUNK_TASK, args=[run_id])


def oracle_run_requeue(run: OracleRun) -> None:
    """The reaper's hook (jobs.registry) for a run none of whose chunks has
    written a heartbeat for ``REALICU_JOB_STALE_SECONDS``: its workers died.
    Their claims are dropped (a late reply of a chunk presumed dead is still
    saved once: labels are written ON CONFLICT DO NOTHING) and the run's lanes
    queued again. After ``max_attempts`` losses without a chunk finishing in
    between, the reaper fails the run with the reason instead."""
    OracleWindowClaim.objects.filter(run_id=run.pk).delete()
    _in_flight_forget(run.pk)
    if run.state == RunState.RUNNING:
        OracleRun.objects.filter(pk=run.pk).update(attempts=F("attempts") + 1)
    _enqueue_chunks(run.pk, run_lanes(run))


def oracle_run_create(
    *,
    admin,
    name: str,
    backbone: Backbone,
    prompt: PromptTemplate | None = None,
    campaign: Campaign | None = None,
    cohort: Cohort | None = None,
    enqueue: bool = True,
) -> OracleRun:
    """A run of ``backbone`` over a campaign's windows or over every candidate
    window of a cohort's stays, queued for the workers once committed. The
    backbone's settings are copied onto the run; later edits change nothing.
    The endpoint's check (a name lookup) runs before the transaction: on
    SQLite a transaction holds the database's one write lock."""
    require_admin(admin, "start an Oracle run")
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Give the run a name."})
    if len(name) > MAX_NAME:
        raise ValidationError({"name": f"At most {MAX_NAME} characters."})
    if (campaign is None) == (cohort is None):
        raise ValidationError(
            "Choose either a campaign (its windows) or a cohort (all its candidate "
            "windows), not both and not neither."
        )
    if backbone is None or backbone.pk is None:
        raise ValidationError({"backbone": "Choose a backbone."})
    try:
        backbone.clean()
    except ValidationError as error:
        raise ValidationError(
            f"Backbone {backbone.name} is not fully configured: "
            + " ".join(error.messages)
        ) from error
    backbone_endpoint_check(backbone)
    egress_guard(
        actor=admin, purpose="oracle_run", data=campaign or cohort, backbone=backbone
    )
    with transaction.atomic():
        return _oracle_run_save(
            admin=admin,
            name=name,
            backbone=backbone,
            prompt=prompt,
            campaign=campaign,
            cohort=cohort,
            enqueue=enqueue,
        )


def _oracle_run_save(
    *, admin, name, backbone, prompt, campaign, cohort, enqueue
) -> OracleRun:
    if prompt is None:
        from oracle.prompts import prompt_default_get_or_create

        prompt = prompt_default_get_or_create()
    run = OracleRun(
        name=name,
        backbone=backbone,
        backbone_snapshot=backbone.snapshot(),
        prompt=prompt,
        scope=RunScope.CAMPAIGN if campaign is not None else RunScope.COHORT,
        campaign=campaign,
        cohort=cohort,
        created_by=admin,
    )
    total = selectors.run_windows(run=run).count()
    if total == 0:
        where = f"campaign {campaign}" if campaign else f"cohort {cohort}"
        raise ValidationError(
            f"The {where} has no windows to label; build them first "
            "(manage.py build_windows)."
        )
    run.total_windows = total
    run.progress_total = total
    run.progress_label = "queued"
    run.save()
    if enqueue:
        _enqueue_chunks(run.pk, run_lanes(run))
    return run


@transaction.atomic
def oracle_run_cancel(*, admin, run: OracleRun) -> OracleRun:
    """Stop the run: no new request is started (chunks poll for this); replies
    already in flight are still saved. Resumable."""
    require_admin(admin, "cancel an Oracle run")
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if run.state in (RunState.COMPLETED, RunState.CANCELLED):
        raise ValidationError(f"The run is already {run.get_state_display().lower()}.")
    now = timezone.now()
    run.cancel_requested_at = now
    run.state = RunState.CANCELLED
    run.finished_at = now
    run.save(update_fields=["cancel_requested_at", "state", "finished_at"])
    return run


def _in_flight_forget(run_id: int) -> None:
    """Requests of chunks that are gone (finished, or their workers died)
    are no longer in flight: sent is set to what finished."""
    OracleRun.objects.filter(pk=run_id).update(
        requests_sent=F("requests_answered")
        + F("requests_timed_out")
        + F("requests_errored")
    )


def oracle_run_resume(*, admin, run: OracleRun, enqueue: bool = True) -> OracleRun:
    """Queue the run again for the windows that have no label yet. A running
    run may be resumed too (its workers died): the lanes bound the chunks at
    work, so the limits still hold. The endpoint and the egress guard are
    checked (a name lookup) before the transaction."""
    require_admin(admin, "resume an Oracle run")
    _run_egress_check(admin=admin, run=run)
    with transaction.atomic():
        return _oracle_run_resume(run=run, enqueue=enqueue)


def _run_egress_check(*, admin, run: OracleRun) -> None:
    """The endpoint's address policy and the data-use egress guard, asked
    again whenever a run's windows are sent anew (resume, retry): an
    attestation revoked since the run started stops it here."""
    backbone = Backbone.objects.get(pk=run.backbone_id)
    backbone_endpoint_check(backbone)
    egress_guard(
        actor=admin,
        purpose="oracle_run",
        data=run.campaign or run.cohort or run,
        backbone=backbone,
    )


def _oracle_run_resume(*, run: OracleRun, enqueue: bool) -> OracleRun:
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if not selectors.run_windows_todo(run=run).exists():
        failed = run.labels.filter(state=OracleLabelState.FAILED).count()
        hint = (
            f" {failed} window{'s' if failed != 1 else ''} failed: retry them instead."
            if failed
            else ""
        )
        raise ValidationError(f"Every window of this run is labelled.{hint}")
    _requeue(run, enqueue=enqueue)
    return run


def oracle_run_retry_failed(*, admin, run: OracleRun, enqueue: bool = True) -> int:
    """Forget the run's failed windows (this run's only) and label them again.
    Returns how many were forgotten. The endpoint is checked (a name lookup)
    before the transaction."""
    require_admin(admin, "retry an Oracle run's failures")
    _run_egress_check(admin=admin, run=run)
    with transaction.atomic():
        return _oracle_run_retry_failed(run=run, enqueue=enqueue)


def _oracle_run_retry_failed(*, run: OracleRun, enqueue: bool) -> int:
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if run.state in (RunState.QUEUED, RunState.RUNNING):
        raise ValidationError(
            "The run is still going: wait for it to finish, or cancel it first."
        )
    failed, _ = OracleLabel.objects.filter(
        run=run, state=OracleLabelState.FAILED
    ).delete()
    if not failed:
        raise ValidationError("No window of this run failed: nothing to retry.")
    _requeue(run, enqueue=enqueue)
    return failed


def _requeue(run: OracleRun, *, enqueue: bool) -> None:
    """The run queued again: its chunks sent (``enqueue``, with the requests
    counted in flight forgotten), or only marked queued for an inline run to
    pick up."""
    if enqueue:
        _in_flight_forget(run.pk)
    run.state = RunState.QUEUED
    run.cancel_requested_at = None
    run.finished_at = None
    run.error = ""
    run.save(update_fields=["state", "cancel_requested_at", "finished_at", "error"])
    if enqueue:
        _enqueue_chunks(run.pk, run_lanes(run))


def oracle_run_fail(*, run_id: int, error: str) -> None:
    """Record an error that stopped a chunk (not a window's failure)."""
    OracleRun.objects.filter(pk=run_id).exclude(state__in=FINISHED_STATES).update(
        state=RunState.FAILED, error=error[:5000], finished_at=timezone.now()
    )


# Chunk execution ------------------------------------------------------------------
