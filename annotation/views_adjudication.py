"""The admin's adjudication pages (spec section 4): a campaign's queue of windows
with open disputes, the window page with each physician's label side by side
(evidence events named, action ratings per physician), a form for every
disputed field and a merge of items into one wording, and the IRR dashboard with the
per-physician figures and the campaign-wide recompute."""

from __future__ import annotations

from operator import itemgetter

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.access import admin_required
from accounts.ids import id_parse
from accounts.web import error_text, render_page_or_partial
from annotation import selectors, services
from annotation.models import AdjudicationAction
from annotation.selectors import disputes
from annotation.selectors.adjudication import TASK_NAMES, adjudication_workspace
from annotation.selectors.agreement import (
    irr_recompute_progress,
    recompute_progress_page,
)
from annotation.selectors.irr import irr_dashboard_page
from annotation.services import adjudication as adjudication_services
from annotation.services import recompute as recompute_services
from evaluation.matcher import MatcherUnavailable


def _campaign(request, campaign_id):
    return selectors.campaign_get_for_admin(admin=request.user, campaign_id=campaign_id)


# Queue ------------------------------------------------------------------------


@require_GET
@admin_required
def adjudication_queue(request, campaign_id: int):
    page = disputes.adjudication_queue_page(admin=request.user, campaign_id=campaign_id)
    rows = []
    for consensus in page["queue"]:
        kinds = {}
        for dispute in consensus.open_disputes:
            name = TASK_NAMES.get(dispute["task"], dispute["task"])
            kinds[name] = kinds.get(name, 0) + 1
        rows.append(
            {"consensus": consensus, "window": consensus.window, "kinds": kinds}
        )
    return render(
        request,
        "annotation/adjudication_queue.html",
        {
            "campaign": page["campaign"],
            "rows": rows,
            "count": len(rows),
            "withheld": page["withheld"],
        },
    )


# Window -----------------------------------------------------------------------


def _workspace(request, campaign, window_id, *, error: str = "", posted=None) -> dict:
    """The workspace's context (annotation.selectors.adjudication), with the
    message and the typed text of a refused decision."""
    context = adjudication_workspace(
        admin=request.user, campaign=campaign, window_id=window_id
    )
    return {**context, "error": error, "posted": posted or {}}


@require_GET
@admin_required
def adjudication_window(request, campaign_id: int, window_id: int):
    campaign = _campaign(request, campaign_id)
    context = _workspace(request, campaign, window_id)
    response = render_page_or_partial(
        request, "annotation/adjudication_window.html", context, partial="workspace"
    )
    response["Cache-Control"] = "no-store"
    return response


def _posted_decision(request) -> dict:
    post = request.POST
    action = post.get("action", "")
    return {
        "task": post.get("task", ""),
        "item_ref": post.get("item_ref", ""),
        "action": action,
        "reason": post.get("reason", ""),
        # The text box is only read for a rewrite: text left in it while another
        # choice is picked is not a rewrite.
        "new_text": post.get("new_text", "")
        if action == AdjudicationAction.REWRITE
        else "",
        "new_status": post.get("new_status", "")
        if action == AdjudicationAction.SETTLE_STATUS
        else "",
    }


@require_POST
@admin_required
def adjudication_decide(request, campaign_id: int, window_id: int):
    posted = _posted_decision(request)
    third_rater = posted["action"] == AdjudicationAction.REQUEST_THIRD_RATER and bool(
        request.POST.get("physician")
    )
    target = disputes.adjudication_target(
        admin=request.user,
        campaign_id=campaign_id,
        window_id=window_id,
        physician_id=id_parse(request.POST.get("physician")) if third_rater else None,
    )
    campaign, window, physician = itemgetter("campaign", "window", "physician")(target)
    if third_rater and physician is None:
        return _decision_failed(
            request, campaign, window, "Choose a physician of this campaign.", posted
        )
    try:
        decision = services.adjudication_decide(
            admin=request.user,
            campaign=campaign,
            window=window,
            physician=physician,
            **posted,
        )
    except (ValidationError, PermissionDenied) as error:
        return _decision_failed(request, campaign, window, error_text(error), posted)
    note = f"Recorded: {decision.get_action_display().lower()}."
    if request.htmx:
        context = _workspace(request, campaign, window.pk)
        context["notice"] = note
        return render(request, "annotation/adjudication_window.html#workspace", context)
    messages.success(request, note)
    return redirect("annotation:adjudication_window", campaign.pk, window.pk)


@require_POST
@admin_required
def adjudication_merge(request, campaign_id: int, window_id: int):
    """Merge the chosen items of one task into one wording, with a reason."""
    target = disputes.adjudication_target(
        admin=request.user, campaign_id=campaign_id, window_id=window_id
    )
    campaign, window = target["campaign"], target["window"]
    post = request.POST
    posted = {
        "task": post.get("task", ""),
        "item_refs": post.getlist("item_ref"),
        "new_text": post.get("new_text", ""),
        "reason": post.get("reason", ""),
    }
    try:
        adjudication_services.adjudication_merge(
            admin=request.user, campaign=campaign, window=window, **posted
        )
    except (ValidationError, PermissionDenied) as error:
        return _decision_failed(
            request, campaign, window, error_text(error), {**posted, "merge": True}
        )
    note = f"Recorded: merged into “{posted['new_text'].strip()}”."
    if request.htmx:
        context = _workspace(request, campaign, window.pk)
        context["notice"] = note
        return render(request, "annotation/adjudication_window.html#workspace", context)
    messages.success(request, note)
    return redirect("annotation:adjudication_window", campaign.pk, window.pk)


def _decision_failed(request, campaign, window, message: str, posted: dict):
    """The workspace again with the message beside the form, the typed text kept:
    status 200 for htmx, which swaps only successful responses by default, and
    the whole page with status 400 for a plain form post."""
    context = _workspace(request, campaign, window.pk, error=message, posted=posted)
    if request.htmx:
        return render(request, "annotation/adjudication_window.html#workspace", context)
    response = render(
        request, "annotation/adjudication_window.html", context, status=400
    )
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@admin_required
def adjudication_recompute_window(request, campaign_id: int, window_id: int):
    """Recompute the window's agreement and consensus now, in this request (one
    window takes well under a second once the model is loaded)."""
    from evaluation.matcher import matcher_for_settings

    target = disputes.adjudication_target(
        admin=request.user, campaign_id=campaign_id, window_id=window_id
    )
    campaign, window = target["campaign"], target["window"]
    try:
        services.window_consensus_refresh(
            campaign=campaign, window=window, matcher=matcher_for_settings()
        )
    except (ValidationError, MatcherUnavailable) as error:
        messages.error(request, f"Agreement not recomputed: {error_text(error)}")
    else:
        messages.success(request, "Agreement and consensus recomputed.")
    return redirect("annotation:adjudication_window", campaign.pk, window.pk)


# IRR dashboard ----------------------------------------------------------------


@require_GET
@admin_required
def irr_dashboard(request, campaign_id: int):
    context = irr_dashboard_page(admin=request.user, campaign_id=campaign_id)
    return render(request, "annotation/irr_dashboard.html", context)


@require_POST
@admin_required
def campaign_recompute(request, campaign_id: int):
    """Start the recompute of every complete window's agreement; the dashboard
    shows its progress."""
    campaign = _campaign(request, campaign_id)
    refusal = ""
    try:
        recompute_services.agreement_recompute_start(
            admin=request.user, campaign=campaign
        )
    except ValidationError as error:
        refusal = " ".join(error.messages)
    if request.htmx:
        return render(
            request,
            "annotation/partials/_recompute.html",
            {
                "campaign": campaign,
                "progress": irr_recompute_progress(
                    admin=request.user, campaign=campaign
                ),
                "refusal": refusal,
            },
        )
    if refusal:
        messages.info(request, refusal)
    else:
        messages.success(request, "Recompute queued: progress below.")
    return redirect(
        reverse("annotation:irr_dashboard", args=[campaign.pk]) + "#recompute"
    )


@require_GET
@admin_required
def campaign_recompute_progress(request, campaign_id: int):
    return render(
        request,
        "annotation/partials/_recompute.html",
        recompute_progress_page(admin=request.user, campaign_id=campaign_id),
    )


__all__ = [
    "adjudication_decide",
    "adjudication_merge",
    "adjudication_queue",
    "adjudication_recompute_window",
    "adjudication_window",
    "campaign_recompute",
    "campaign_recompute_progress",
    "irr_dashboard",
]
