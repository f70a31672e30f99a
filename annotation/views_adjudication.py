"""The admin's adjudication pages (spec section 4): a campaign's queue of windows
with open disputes, the window page with each physician's label side by side
and a form for every disputed field, and the IRR dashboard with the
per-physician figures and the campaign-wide recompute."""

from __future__ import annotations

import math

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors, services
from annotation.selectors.irr import campaign_irr, physician_stats
from annotation.models import (
    AdjudicationAction,
    Assignment,
    CampaignPhysician,
    ConsensusTask,
    PatientStatus,
)
from annotation.services import recompute as recompute_services
from annotation.services.consensus import SET_TASKS
from accounts.access import admin_required
from evaluation.labelschema import STATUS_KEYS
from accounts.web import error_text, render_page_or_partial
from evaluation.matcher import (
    MatcherUnavailable,
    SemanticMatcher,
    configured_model_name,
    tau_source_of,
)
from jobs.reaper import job_check

TASK_NAMES = dict(ConsensusTask.choices)


def _campaign(request, campaign_id):
    return selectors.campaign_get_for_admin(admin=request.user, campaign_id=campaign_id)


# Queue ------------------------------------------------------------------------


@require_GET
@admin_required
def adjudication_queue(request, campaign_id: int):
    campaign = _campaign(request, campaign_id)
    queue = selectors.adjudication_queue(admin=request.user, campaign=campaign)
    rows = []
    for consensus in queue:
        kinds = {}
        for dispute in consensus.open_disputes:
            name = TASK_NAMES.get(dispute["task"], dispute["task"])
            kinds[name] = kinds.get(name, 0) + 1
        rows.append({"consensus": consensus, "window": consensus.window, "kinds": kinds})
    return render(
        request,
        "annotation/adjudication_queue.html",
        {"campaign": campaign, "rows": rows, "count": len(rows)},
    )


# Window -----------------------------------------------------------------------


def _next_in_queue(queue: list, window) -> object | None:
    """The queue's window after this one (in stay order), else its first other
    one: where "next window" leads."""
    key = (window.stay_id, window.index)
    others = [c.window for c in queue if c.window_id != window.pk]
    later = [w for w in others if (w.stay_id, w.index) > key]
    return (later or others or [None])[0]


def _workspace(request, campaign, window_id, *, error: str = "", posted=None) -> dict:
    """What the window's adjudication workspace shows: status, the set tasks'
    items grouped by meaning per physician column, the open disputes with their
    forms, the decisions so far and the next window of the queue."""
    data = selectors.window_adjudication_get(
        admin=request.user, campaign=campaign, window_id=window_id
    )
    window = data["window"]
    agreement = data["agreement"]
    consensus = data["consensus"]
    labels = {label.pk: label for label in data["labels"]}
    columns = []
    if agreement is not None:
        for n, entry in enumerate(agreement.labels):
            label = labels.get(entry["label_id"])
            columns.append(
                {
                    "label_id": entry["label_id"],
                    "letter": chr(ord("A") + n),
                    "username": label.assignment.annotator.get_username()
                    if label
                    else f"user {entry['annotator_id']}",
                    "status": entry["status"],
                    "status_display": PatientStatus(entry["status"]).label
                    if entry["status"] in PatientStatus.values
                    else entry["status"],
                    "time_on_task": label.time_on_task_seconds if label else None,
                }
            )
    open_disputes = {
        (d["task"], d["item_ref"]): d for d in (consensus.open_disputes if consensus else [])
    }
    decisions = data["decisions"]
    decided = {(d.task, d.item_ref): d for d in decisions if d.item_ref}
    tasks = []
    if agreement is not None:
        column_of = {c["label_id"]: c for c in columns}
        for task in SET_TASKS:
            rows = []
            for number, cluster in enumerate(agreement.clusters.get(task, []), start=1):
                by_label = {item["label_id"]: item for item in cluster["items"]}
                key = (task, cluster["id"])
                rows.append(
                    {
                        "number": number,
                        # Eight colours tell neighbouring clusters apart.
                        "colour": (number - 1) % 8,
                        "id": cluster["id"],
                        "kept": cluster["kept"],
                        "open": key in open_disputes,
                        "decision": decided.get(key),
                        "texts": list(dict.fromkeys(i["text"] for i in cluster["items"])),
                        "cells": [
                            by_label.get(c["label_id"]) for c in columns
                        ],
                        "who": [
                            column_of[i["label_id"]]["letter"]
                            for i in cluster["items"]
                            if i["label_id"] in column_of
                        ],
                    }
                )
            tasks.append(
                {
                    "task": task,
                    "name": TASK_NAMES[task],
                    "rows": rows,
                    "open": sum(1 for r in rows if r["open"]),
                }
            )
    queue = selectors.adjudication_queue(admin=request.user, campaign=campaign)
    position = next(
        (n for n, c in enumerate(queue, start=1) if c.window_id == window.pk), None
    )
    taken = set(
        Assignment.objects.filter(campaign=campaign, window=window).values_list(
            "annotator_id", flat=True
        )
    )
    third_candidates = list(
        CampaignPhysician.objects.filter(campaign=campaign)
        .exclude(user_id__in=taken)
        .select_related("user")
        .order_by("user__username")
    )
    pending = [
        a
        for a in Assignment.objects.filter(campaign=campaign, window=window, active=True)
        .select_related("annotator")
        .order_by("pk")
        if a.state != "submitted"
    ]
    return {
        "campaign": campaign,
        "window": window,
        "campaign_window": data["campaign_window"],
        "agreement": agreement,
        "consensus": consensus,
        "columns": columns,
        "status_open": (ConsensusTask.STATUS, "") in open_disputes,
        "status_choices": [
            (value, name, STATUS_KEYS[value]) for value, name in PatientStatus.choices
        ],
        "tasks": tasks,
        "decisions": list(reversed(decisions)),
        "open_count": consensus.dispute_count if consensus else 0,
        "queue_count": len(queue),
        "position": position,
        "next_window": _next_in_queue(queue, window),
        "third_candidates": [m.user for m in third_candidates],
        "pending": pending,
        "error": error,
        "posted": posted or {},
        "action_names": dict(AdjudicationAction.choices),
    }


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
        "new_text": post.get("new_text", "") if action == AdjudicationAction.REWRITE else "",
        "new_status": post.get("new_status", "")
        if action == AdjudicationAction.SETTLE_STATUS
        else "",
    }


@require_POST
@admin_required
def adjudication_decide(request, campaign_id: int, window_id: int):
    campaign = _campaign(request, campaign_id)
    window = selectors.campaign_window_get(
        admin=request.user, campaign=campaign, window_id=window_id
    )
    posted = _posted_decision(request)
    physician = None
    if posted["action"] == AdjudicationAction.REQUEST_THIRD_RATER and request.POST.get(
        "physician"
    ):
        physician = (
            CampaignPhysician.objects.filter(
                campaign=campaign, user_id=_int_or_none(request.POST.get("physician"))
            )
            .select_related("user")
            .first()
        )
        if physician is None:
            return _decision_failed(
                request, campaign, window, "Choose a physician of this campaign.", posted
            )
        physician = physician.user
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


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _decision_failed(request, campaign, window, message: str, posted: dict):
    """The workspace again with the message beside the form, the typed text kept.
    Status 200 for htmx, which swaps only successful responses by default."""
    if request.htmx:
        context = _workspace(request, campaign, window.pk, error=message, posted=posted)
        return render(request, "annotation/adjudication_window.html#workspace", context)
    messages.error(request, message)
    return redirect("annotation:adjudication_window", campaign.pk, window.pk)


@require_POST
@admin_required
def adjudication_recompute_window(request, campaign_id: int, window_id: int):
    """Recompute the window's agreement and consensus now, in this request (one
    window takes well under a second once the model is loaded)."""
    from evaluation.matcher import matcher_for_settings

    campaign = _campaign(request, campaign_id)
    window = selectors.campaign_window_get(
        admin=request.user, campaign=campaign, window_id=window_id
    )
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


def _figure(value) -> float | None:
    """A figure for a chart's JSON: an undefined one (nan) is null."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _ci_item(label: str, ci: dict | None) -> dict:
    """A bar of a chart (static/js/charts.js): the estimate and its 95 % CI."""
    ci = ci or {}
    return {
        "label": label,
        **{key: _figure(ci.get(key)) for key in ("estimate", "low", "high")},
    }


def _ci_chart(items: list[dict]) -> dict:
    return {"kind": "bars", "bars": items}


def _progress(request, campaign) -> dict:
    """The recompute area of the dashboard: the campaign's latest recompute job
    (checked by the reaper first, so it never shows "running" without a live
    worker) and the complete windows still without current agreement."""
    job = selectors.agreement_recompute_latest(admin=request.user, campaign=campaign)
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
        "backlog": selectors.campaign_agreement_backlog(
            admin=request.user, campaign=campaign
        ),
    }


@require_GET
@admin_required
def irr_dashboard(request, campaign_id: int):
    campaign = _campaign(request, campaign_id)
    irr = campaign_irr(campaign=campaign)
    stats = physician_stats(admin=request.user, campaign=campaign)
    names = {row["user_id"]: row["username"] for row in stats}
    status = irr["status"]
    status_chart = None
    if status:
        kappa_label = "Cohen's kappa" if status["kappa_name"] == "cohen" else "Fleiss' kappa"
        status_chart = _ci_chart(
            [
                _ci_item("Percent agreement", status["percent_agreement"]),
                _ci_item(kappa_label, status["kappa"]),
                _ci_item("Krippendorff's alpha (ordinal)", status["alpha_ordinal"]),
            ]
        )
    set_rows = [
        {"task": task, "name": TASK_NAMES[task], "f1": irr["set_tasks"][task]["mean_pairwise_f1"]}
        for task in SET_TASKS
    ]
    f1_chart = (
        _ci_chart([_ci_item(r["name"], r["f1"]) for r in set_rows])
        if irr["windows"]
        else None
    )
    pairs = [
        {
            **pair,
            "names": [names.get(uid, f"user {uid}") for uid in pair["physicians"]],
            "f1": [pair["mean_pairwise_f1"][task] for task in SET_TASKS],
        }
        for pair in irr["pairs"]
    ]
    keep = [
        {"task": task, "name": TASK_NAMES[task], **irr["keep_rates"][task]}
        for task in (ConsensusTask.STATUS, *SET_TASKS)
    ]
    keep_chart = (
        _ci_chart([_ci_item(row["name"], {"estimate": row["keep_rate"]}) for row in keep])
        if irr["windows"]
        else None
    )
    for row in stats:
        row["f1"] = [row["mean_pairwise_f1"][task] for task in SET_TASKS]
        seconds = row["median_seconds"]
        row["median_display"] = (
            f"{int(seconds) // 60}:{int(seconds) % 60:02d}" if seconds is not None else "–"
        )
    compared = [r["status_agreement"] for r in stats if not math.isnan(r["status_agreement"])]
    if len(compared) >= 2:
        lowest = min(compared)
        for row in stats:
            row["lowest"] = row["status_agreement"] == lowest
    from annotation.models import WindowAgreement

    computed_with = [
        (model, tau, tau_source_of(model, tau))
        for model, tau in sorted(
            set(
                WindowAgreement.objects.filter(campaign=campaign)
                .values_list("matcher_model", "tau")
                .distinct()
            )
        )
    ]
    model_name = configured_model_name()
    in_force = SemanticMatcher(model_name)
    context = {
        "campaign": campaign,
        "irr": irr,
        "status": status,
        "status_chart": status_chart,
        "set_rows": set_rows,
        "f1_chart": f1_chart,
        "pairs": pairs,
        "keep": keep,
        "keep_chart": keep_chart,
        "stats": stats,
        "set_names": [TASK_NAMES[t] for t in SET_TASKS],
        "computed_with": computed_with,
        "model_name": model_name,
        "model_tau": in_force.tau,
        "tau_source": in_force.tau_source,
        "progress": _progress(request, campaign),
        "queue_count": len(
            selectors.adjudication_queue(admin=request.user, campaign=campaign)
        ),
    }
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
            {"campaign": campaign, "progress": _progress(request, campaign),
             "refusal": refusal},
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
    campaign = _campaign(request, campaign_id)
    response = render(
        request,
        "annotation/partials/_recompute.html",
        {"campaign": campaign, "progress": _progress(request, campaign)},
    )
    return response


__all__ = [
    "adjudication_decide",
    "adjudication_queue",
    "adjudication_recompute_window",
    "adjudication_window",
    "campaign_recompute",
    "campaign_recompute_progress",
    "irr_dashboard",
]
