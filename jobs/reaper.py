"""The reaper: no job sits in running, or queued, without a live worker for
longer than a documented bound (README "Jobs").

- A running job whose heartbeat is older than ``REALICU_JOB_STALE_SECONDS``
  lost its worker: it is queued again (its task resumes where the job stopped;
  every job task is idempotent), or, after ``max_attempts`` workers died on it,
  failed with the reason.
- A queued job whose message may have been lost (a broker outage, a broker
  restart without persistence) is sent again every
  ``REALICU_JOB_REDISPATCH_SECONDS``; a duplicate finds the job taken and exits.
- Outbox messages whose sending failed are sent.

It runs on beat every ``REALICU_JOB_REAP_SECONDS`` and, for one job, whenever a
page shows that job (``job_check``). Each job's recovery is on its own: when it
raises (a build's folder that cannot be removed), that job is failed with the
reason and the round goes on with the others; a page asking never gets the
error (a database error leaves the job for the next round).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.leases import error_text, is_live, stale_before
from jobs.outbox import outbox_dispatch_due, outbox_send
from jobs.registry import JobKind, kind_for, kinds

logger = logging.getLogger(__name__)


def redispatch_seconds() -> float:
    return float(getattr(settings, "REALICU_JOB_REDISPATCH_SECONDS", 300))


def _reason(kind: JobKind, row) -> str:
    seen = (
        timezone.localtime(row.heartbeat_at).strftime("%Y-%m-%d %H:%M:%S %Z")
        if row.heartbeat_at
        else "never"
    )
    return (
        f"Its worker stopped (last heartbeat {seen}, from {row.worker or 'no worker'})"
    )


class RecoveryFailed(Exception):
    """A job's recovery raised; the message says what failed, with the reason."""


def _requeue(kind: JobKind, row, now) -> str:
    model = kind.model_class
    with transaction.atomic():
        fresh = model.objects.select_for_update().filter(pk=row.pk).first()
        if (
            fresh is None
            or getattr(fresh, kind.state_field) != kind.running
            or is_live(fresh, now)
        ):
            return "alive"
        reason = _reason(kind, fresh)
        if kind.cleanup is not None:
            try:
                kind.cleanup(fresh)
            except DatabaseError:
                raise
            except Exception as error:
                raise RecoveryFailed(
                    f"{reason}; removing what it left failed: {error_text(error)}."
                ) from error
        if fresh.attempts >= kind.max_attempts:
            model.objects.filter(pk=fresh.pk).update(
                lease="",
                **kind.failure(
                    f"{reason}; {fresh.attempts} workers took this job and none "
                    "finished it, so it was not queued again.",
                    "failed: its workers stopped",
                    now,
                ),
            )
            logger.error("reaper: %s %s failed: %s", kind.name, fresh.pk, reason)
            return "failed"
        model.objects.filter(pk=fresh.pk).update(
            **{
                kind.state_field: kind.queued,
                "lease": "",
                "heartbeat_at": now,
                "progress_label": f"re-queued: {reason.lower()}"[:255],
            }
        )
        if kind.requeue is not None:
            kind.requeue(fresh)
        else:
            outbox_send(
                task=kind.task, args=[fresh.pk], key=f"job:{kind.name}:{fresh.pk}"
            )
        logger.warning("reaper: %s %s re-queued: %s", kind.name, fresh.pk, reason)
        return "requeued"


def _redispatch(kind: JobKind, row, now) -> str:
    model = kind.model_class
    updated = (
        model.objects.filter(pk=row.pk, **{kind.state_field: kind.queued})
        .filter(_waited_too_long(kind, now))
        .update(heartbeat_at=now)
    )
    if not updated:
        return "waiting"
    if kind.requeue is not None:
        kind.requeue(row)
    else:
        outbox_send(task=kind.task, args=[row.pk], key=f"job:{kind.name}:{row.pk}")
    return "redispatched"


def _rows_stalled(kind: JobKind, now):
    model = kind.model_class
    return model.objects.filter(**{kind.state_field: kind.running}).filter(
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before(now))
    )


def _waited_too_long(kind: JobKind, now) -> Q:
    """A queued job's ``heartbeat_at`` is when it was last sent to the broker
    (empty: when it was created)."""
    cutoff = now - timedelta(seconds=redispatch_seconds())
    return Q(heartbeat_at__lt=cutoff) | Q(
        heartbeat_at__isnull=True, **{f"{kind.created_field}__lt": cutoff}
    )


def _rows_waiting(kind: JobKind, now):
    model = kind.model_class
    return model.objects.filter(**{kind.state_field: kind.queued}).filter(
        _waited_too_long(kind, now)
    )


_DOING = {
    "_requeue": "Re-queueing it after its worker stopped",
    "_redispatch": "Sending it to the workers again",
}


def _fail_unrecovered(kind: JobKind, row, now, error: Exception, doing: str) -> str:
    """Fail a job whose recovery raised, with what failed and why, unless it
    has moved on meanwhile (finished, cancelled, taken by a live worker)."""
    if isinstance(error, RecoveryFailed):
        message = str(error)
    else:
        message = f"{doing} failed: {error_text(error)}."
    message += " The job was stopped, not queued again."
    fields = {"lease": "", **kind.failure(message, "failed: its recovery failed", now)}
    state = getattr(row, kind.state_field)
    still = kind.model_class.objects.filter(pk=row.pk, **{kind.state_field: state})
    if state == kind.running:  # unless a live worker took it meanwhile
        still = still.filter(
            Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before(now))
        )
    updated = still.update(**fields)
    logger.error("reaper: %s %s failed: %s", kind.name, row.pk, message)
    return "failed" if updated else "alive"


def _recover(kind: JobKind, row, now, step) -> str:
    """One job's recovery (``step``: re-queue or re-dispatch), on its own: what
    it raises fails that job with the reason instead of reaching the caller. A
    database error leaves the job as it is, for the next round."""
    try:
        return step(kind, row, now)
    except DatabaseError as error:
        logger.warning(
            "reaper: %s %s left for the next round: %s", kind.name, row.pk, error
        )
        return "error"
    except Exception as error:
        try:
            doing = _DOING.get(step.__name__, "Recovering it")
            return _fail_unrecovered(kind, row, now, error, doing)
        except Exception:
            logger.exception(
                "reaper: %s %s could not be failed after: %s", kind.name, row.pk, error
            )
            return "error"


def jobs_reap() -> dict:
    """One round over every registered kind, then the outbox. Returns counts.
    One job's recovery that raises fails that job and never stops the round."""
    now = timezone.now()
    counts: dict[str, int] = {}
    for kind in kinds():
        try:
            stalled = list(_rows_stalled(kind, now).only("pk", kind.state_field)[:500])
            waiting = list(_rows_waiting(kind, now).only("pk", kind.state_field)[:500])
        except DatabaseError as error:
            logger.warning("reaper: %s jobs not read: %s", kind.name, error)
            counts["error"] = counts.get("error", 0) + 1
            continue
        for row in stalled:
            outcome = _recover(kind, row, now, _requeue)
            counts[outcome] = counts.get(outcome, 0) + 1
        for row in waiting:
            outcome = _recover(kind, row, now, _redispatch)
            counts[outcome] = counts.get(outcome, 0) + 1
    sent = outbox_dispatch_due()
    counts["outbox_sent"] = sent["sent"]
    counts["outbox_failed"] = sent["failed"]
    return counts


def job_check(row) -> str:
    """The reaper's check for one job, run when a page shows it: a job whose
    worker is gone is re-queued (or failed) now rather than on the next round.
    Returns what happened ("alive", "requeued", "failed", "waiting", ...);
    never raises for the job's sake (a page showing it answers)."""
    kind = kind_for(row)
    if kind is None:
        return "unknown"
    now = timezone.now()
    state = getattr(row, kind.state_field)
    if state == kind.running and not is_live(row, now):
        outcome = _recover(kind, row, now, _requeue)
    elif state == kind.queued:
        outcome = _recover(kind, row, now, _redispatch)
    else:
        return "finished"
    if outcome in ("requeued", "failed"):
        try:
            row.refresh_from_db()
        except DatabaseError as error:
            logger.warning("reaper: %s %s not re-read: %s", kind.name, row.pk, error)
    return outcome
