"""The admin's adjudication pages (spec section 4): a campaign's queue of windows
with open disputes, the window page with each physician's label side by side
(evidence events named, action ratings per physician), a form for every
disputed field and a merge of items into one wording, and the IRR dashboard with the
per-physician figures and the campaign-wide recompute."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.access import admin_required
from accounts.ids import id_parse
from accounts.web import error_text, render_page_or_partial
from annotation import services
from annotation.models import AdjudicationAction
from annotation.selectors import disputes
from annotation.selectors.adjudication import (
    TASK_NAMES,
    adjudication_workspace_page,
)
from annotation.selectors.agreement import recompute_progress_page
from annotation.selectors.irr import irr_dashboard_page
from annotation.services import posted as posted_services
from evaluation.matcher import MatcherUnavailable

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


def _workspace(
    request, campaign_id, window_id, *, error: str = "", posted=None
) -> dict:
    """The workspace's context (annotation.selectors.adjudication), with the
    message and the typed text of a refused decision."""
    context = adjudication_workspace_page(
        admin=request.user, campaign_id=campaign_id, window_id=window_id
    )
    return {**context, "error": error, "posted": posted or {}}


@require_GET
@admin_required
def adjudication_window(request, campaign_id: int, window_id: int):
    context = _workspace(request, campaign_id, window_id)
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
    try:
        decision = posted_services.adjudication_decide_posted(
            admin=request.user,
            campaign_id=campaign_id,
            window_id=window_id,
            physician_id=id_parse(request.POST.get("physician"))
            if third_rater
            else None,
            third_rater=third_rater,
            **posted,
        )
    except (ValidationError, PermissionDenied) as error:
        return _decision_failed(
            request, campaign_id, window_id, error_text(error), posted
        )
    return _decision_done(
        request,
        campaign_id,
        window_id,
        f"Recorded: {decision.get_action_display().lower()}.",
    )


@require_POST
@admin_required
def adjudication_merge(request, campaign_id: int, window_id: int):
    """Merge the chosen items of one task into one wording, with a reason."""
    post = request.POST
    posted = {
        "task": post.get("task", ""),
        "item_refs": post.getlist("item_ref"),
        "new_text": post.get("new_text", ""),
        "reason": post.get("reason", ""),
    }
    try:
        posted_services.adjudication_merge_posted(
            admin=request.user, campaign_id=campaign_id, window_id=window_id, **posted
        )
    except (ValidationError, PermissionDenied) as error:
        return _decision_failed(
            request,
            campaign_id,
            window_id,
            error_text(error),
            {**posted, "merge": True},
        )
    return _decision_done(
        request,
        campaign_id,
        window_id,
        f"Recorded: merged into “{posted['new_text'].strip()}”.",
    )


def _decision_done(request, campaign_id, window_id, note: str):
    """The workspace with the note for htmx, else a redirect to it."""
    if request.htmx:
        context = _workspace(request, campaign_id, window_id)
        context["notice"] = note
        return render(request, "annotation/adjudication_window.html#workspace", context)
    messages.success(request, note)
    return redirect("annotation:adjudication_window", campaign_id, window_id)


def _decision_failed(request, campaign_id, window_id, message: str, posted: dict):
    """The workspace again with the message beside the form, the typed text kept:
    status 200 for htmx, which swaps only successful responses by default, and
    the whole page with status 400 for a plain form post."""
    context = _workspace(request, campaign_id, window_id, error=message, posted=posted)
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
    refusal = ""
    try:
        posted_services.agreement_recompute_posted(
            admin=request.user, campaign_id=campaign_id
        )
    except ValidationError as error:
        refusal = " ".join(error.messages)
    if request.htmx:
        context = recompute_progress_page(admin=request.user, campaign_id=campaign_id)
        return render(
            request,
            "annotation/partials/_recompute.html",
            {**context, "refusal": refusal},
        )
    if refusal:
        messages.info(request, refusal)
    else:
        messages.success(request, "Recompute queued: progress below.")
    return redirect(
        reverse("annotation:irr_dashboard", args=[campaign_id]) + "#recompute"
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
