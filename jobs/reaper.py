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
page shows that job (``job_check``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.leases import is_live, stale_before
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
            kind.cleanup(fresh)
        if fresh.attempts >= kind.max_attempts:
            fields = {
                kind.state_field: kind.failed,
                "lease": "",
                kind.error_field: (
                    f"{reason}; {fresh.attempts} workers took this job and none "
                    "finished it, so it was not queued again."
                ),
                "progress_label": "failed: its workers stopped",
            }
            if kind.finished_field:
                fields[kind.finished_field] = now
            model.objects.filter(pk=fresh.pk).update(**fields)
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


def jobs_reap() -> dict:
    """One round over every registered kind, then the outbox. Returns counts."""
    now = timezone.now()
    counts: dict[str, int] = {}
    for kind in kinds():
        for row in _rows_stalled(kind, now).only("pk")[:500]:
            outcome = _requeue(kind, row, now)
            counts[outcome] = counts.get(outcome, 0) + 1
        for row in _rows_waiting(kind, now).only("pk")[:500]:
            outcome = _redispatch(kind, row, now)
            counts[outcome] = counts.get(outcome, 0) + 1
    sent = outbox_dispatch_due()
    counts["outbox_sent"] = sent["sent"]
    counts["outbox_failed"] = sent["failed"]
    return counts


def job_check(row) -> str:
    """The reaper's check for one job, run when a page shows it: a job whose
    worker is gone is re-queued (or failed) now rather than on the next round.
    Returns what happened ("alive", "requeued", "failed", "waiting", ...)."""
    kind = kind_for(row)
    if kind is None:
        return "unknown"
    now = timezone.now()
    state = getattr(row, kind.state_field)
    if state == kind.running and not is_live(row, now):
        outcome = _requeue(kind, row, now)
    elif state == kind.queued:
        outcome = _redispatch(kind, row, now)
    else:
        return "finished"
    if outcome in ("requeued", "failed"):
        row.refresh_from_db()
    return outcome
