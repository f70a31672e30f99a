"""Reads of a campaign's agreement state: which complete windows have no
current agreement (what the catch-up and the recompute compute), and what the
IRR dashboard's recompute area shows."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.utils import timezone

from accounts.roles import user_is_admin
from annotation.models import (
    AgreementRecompute,
    Assignment,
    AssignmentState,
    Campaign,
    WindowAgreement,
)
from annotation.selectors import campaign_get_for_admin
from jobs.models import OutboxMessage
from jobs.reaper import job_check


def windows_due_agreement(*, campaign: Campaign) -> list[int]:
    """Ids of the campaign's complete windows (every active assignment
    submitted, two at least) whose agreement is missing or was computed from
    other label versions than the current ones (WindowAgreement.labels names
    each label's id and version), in two light queries (label ids and
    versions, no payload)."""
    return _complete_and_due(campaign=campaign)[1]


def _complete_and_due(*, campaign: Campaign) -> tuple[int, list[int]]:
    """How many of the campaign's windows are complete, and the ids of those
    whose agreement is due (``windows_due_agreement``)."""
    current: dict[int, set] = {}
    incomplete: set[int] = set()
    for window_id, state, label_id, version in Assignment.objects.filter(
        campaign=campaign, active=True
    ).values_list("window_id", "state", "label__id", "label__version"):
        if state != AssignmentState.SUBMITTED or label_id is None:
            incomplete.add(window_id)
        current.setdefault(window_id, set()).add((label_id, version))
    complete = {
        window_id: labels
        for window_id, labels in current.items()
        if window_id not in incomplete and len(labels) >= 2
    }
    computed = {
        window_id: {(entry.get("label_id"), entry.get("version")) for entry in labels}
        for window_id, labels in WindowAgreement.objects.filter(
            campaign=campaign, window_id__in=list(complete)
        ).values_list("window_id", "labels")
    }
    return len(complete), sorted(
        window_id
        for window_id, labels in complete.items()
        if computed.get(window_id) != labels
    )


def campaign_agreement_backlog(*, admin, campaign: Campaign) -> dict:
    """The campaign's complete windows, those whose agreement is due
    (``windows_due_agreement``), and how many of them have their agreement task
    waiting in the outbox (the reaper sends it once the broker is reachable):
    ``{"complete", "missing", "waiting", "window_ids"}``."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's agreement.")
    complete, missing = _complete_and_due(campaign=campaign)
    keys = {f"agreement:{campaign.pk}:{window_id}" for window_id in missing}
    waiting = (
        OutboxMessage.objects.filter(key__in=keys).values("key").distinct().count()
        if keys
        else 0
    )
    return {
        "complete": complete,
        "missing": len(missing),
        "waiting": waiting,
        "window_ids": missing,
    }


def agreement_recompute_latest(*, admin, campaign: Campaign):
    """The campaign's most recent agreement recompute (a job row), or None."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's recomputes.")
    return (
        AgreementRecompute.objects.filter(campaign=campaign)
        .select_related("created_by")
        .order_by("-created_at", "-pk")
        .first()
    )


def irr_recompute_progress(*, admin, campaign: Campaign) -> dict:
    """The recompute area of the IRR dashboard: the campaign's latest recompute
    job (checked by the reaper first, so it never shows "running" without a
    live worker) and the complete windows still without current agreement
    (``campaign_agreement_backlog``)."""
    job = agreement_recompute_latest(admin=admin, campaign=campaign)
    if job is not None and job.active:
        job_check(job)
    return {
        "job": job,
        "running": bool(job and job.active),
        "heartbeat_age": (
            round((timezone.now() - job.heartbeat_at).total_seconds())
            if job is not None and job.heartbeat_at
            else None
        ),
        "backlog": campaign_agreement_backlog(admin=admin, campaign=campaign),
    }


def recompute_progress_page(*, admin, campaign_id) -> dict:
    """The campaign and its recompute area (``irr_recompute_progress``), which
    the dashboard polls. Http404 for another id or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    return {
        "campaign": campaign,
        "progress": irr_recompute_progress(admin=admin, campaign=campaign),
    }
