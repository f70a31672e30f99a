"""The admin's Oracle pages: backbones, runs with a live progress bar, and the
validation of a run against a Gold campaign. Admin only (404 for anyone else):
Oracle labels are never shown to physicians."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.access import admin_required
from accounts.web import (
    error_text,
    refusal_on_form,
    refusal_shown,
    render_page_or_partial,
)
from evaluation.matcher import tau_source_of
from oracle import selectors, selectors_pages, services
from oracle.forms import BackboneForm, GoldDrawForm, RunForm, ValidateForm
from windows.presentation import window_page_context

CHART_STATUS = ("improving", "stable", "deteriorating")


# Backbones ------------------------------------------------------------------------


@require_GET
@admin_required
def backbone_list(request):
    selectors.backbone_rules_default()
    backbones = selectors.backbone_list(admin=request.user)
    return render(request, "oracle/backbone_list.html", {"backbones": backbones})


@require_http_methods(["GET", "POST"])
@admin_required
def backbone_new(request):
    form = BackboneForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form):
            backbone = services.backbone_create(
                admin=request.user, app_host=request.get_host(), **form.cleaned_data
            )
            messages.success(request, f"Backbone {backbone.name} saved.")
            return redirect("oracle:backbone_list")
    return render(
        request, "oracle/backbone_form.html", {"form": form, "backbone": None}
    )


@require_http_methods(["GET", "POST"])
@admin_required
def backbone_edit(request, backbone_id: int):
    backbone = selectors.backbone_get(admin=request.user, backbone_id=backbone_id)
    form = BackboneForm.for_backbone(backbone, request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form):
            services.backbone_update(
                admin=request.user,
                backbone=backbone,
                app_host=request.get_host(),
                **form.cleaned_data,
            )
            messages.success(request, f"Backbone {form.cleaned_data['name']} saved.")
            return redirect("oracle:backbone_list")
    return render(
        request, "oracle/backbone_form.html", {"form": form, "backbone": backbone}
    )


# Runs -------------------------------------------------------------------------------


@require_GET
@admin_required
def run_list(request):
    runs = selectors.run_list(admin=request.user)
    return render(request, "oracle/run_list.html", {"runs": runs})


@require_http_methods(["GET", "POST"])
@admin_required
def run_new(request):
    rules = selectors.backbone_rules_default()
    initial = {"backbone": rules.pk}
    if request.GET.get("campaign"):
        initial["campaign"] = request.GET["campaign"]
    form = RunForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        target = data["campaign"] or data["cohort"]
        with refusal_on_form(form):
            run = services.oracle_run_create(
                admin=request.user,
                name=data["name"] or f"{data['backbone'].name} on {target}",
                backbone=data["backbone"],
                prompt=data["prompt"],
                campaign=data["campaign"],
                cohort=data["cohort"],
            )
            messages.success(
                request, f"Oracle run {run.pk} queued: {run.total_windows} windows."
            )
            return redirect("oracle:run_detail", run.pk)
    return render(request, "oracle/run_new.html", {"form": form})


@require_http_methods(["GET", "POST"])
@admin_required
def gold_draw(request):
    """An active Gold draw: a Gold campaign whose windows are drawn where the
    chosen Oracle runs disagree, each window's probability stored for the
    score intervals (issue 33)."""
    form = GoldDrawForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        others = list(data["other_runs"])
        with refusal_on_form(form):
            campaign = services.gold_campaign_draw_active(
                admin=request.user,
                name=data["name"],
                run=data["run"],
                second_run=others[0],
                more_runs=others[1:],
                budget=data["budget"],
                physicians=data["physicians"],
                annotators_per_window=data["annotators_per_window"],
                floor=data["floor"],
                seed=data["seed"],
            )
            windows = campaign.campaign_windows.count()
            messages.success(
                request,
                f'Campaign "{campaign.name}" drawn: {windows:,} '
                f"window{'s' if windows != 1 else ''} to label; every pool "
                "window's probability of being in the Gold set is stored.",
            )
            return redirect("annotation:campaign_detail", campaign.pk)
    return render(request, "oracle/gold_draw.html", {"form": form})


def _prompt_tokens_chart(distribution: dict | None) -> dict | None:
    """The prompt-token histogram as a bars chart (static/js/charts.js): each
    bin's share of the windows, its range and count as the label."""
    if distribution is None:
        return None
    bins = distribution["bins"]
    return _bar_chart(
        [(f"{b['from']}–{b['to']} ({b['count']})", b["share"]) for b in bins]
    )


def _run_page(page: dict) -> dict:
    """A run's page (or its progress) with the prompt-token chart."""
    return {**page, "prompt_tokens_chart": _prompt_tokens_chart(page["prompt_tokens"])}


@require_GET
@admin_required
def run_detail(request, run_id: int):
    context = _run_page(selectors_pages.run_page(admin=request.user, run_id=run_id))
    run = context["run"]
    context["validate_form"] = ValidateForm(initial={"campaign": run.campaign_id})
    return render(request, "oracle/run_detail.html", context)


@require_GET
@admin_required
def run_progress(request, run_id: int):
    page = selectors_pages.run_progress_get(admin=request.user, run_id=run_id)
    return render(request, "oracle/run_detail.html#run_progress", _run_page(page))


# An admin's Cancel or Retry of a run's failed windows (oracle/urls.py names
# each a URL): its service, and what the page says when it is done, from what
# the service returned.
RUN_ACTIONS = {
    "run_cancel": (
        services.oracle_run_cancel,
        lambda run: (
            "Run cancelled: no new request is sent; replies in flight are kept."
        ),
    ),
    "run_retry_failed": (
        services.oracle_run_retry_failed,
        lambda n: f"{n} failed window{'s' if n != 1 else ''} queued again.",
    ),
}


@require_POST
@admin_required
def run_action(request, run_id: int, action: str):
    """One of RUN_ACTIONS on the run; a refusal is shown on the page."""
    service, done_message = RUN_ACTIONS[action]
    run = selectors.run_get(admin=request.user, run_id=run_id)
    with refusal_shown(request):
        result = service(admin=request.user, run=run)
        messages.success(request, done_message(result))
    return redirect("oracle:run_detail", run_id)


@require_POST
@admin_required
def run_resume(request, run_id: int):
    # The page offers Resume only where it applies; a forged or stale post on
    # a run that is still going changes nothing and says why.
    run, reason = selectors_pages.run_resume_check(admin=request.user, run_id=run_id)
    if reason:
        messages.error(request, reason)
        return redirect("oracle:run_detail", run_id)
    with refusal_shown(request):
        services.oracle_run_resume(admin=request.user, run=run)
        messages.success(
            request, "Run resumed: the windows without a label are queued."
        )
    return redirect("oracle:run_detail", run_id)


# The run's labels beside the trajectory ---------------------------------------------


@require_GET
@admin_required
def run_labels(request, run_id: int):
    """The run's windows and their Oracle labels, a page at a time."""
    context = selectors_pages.run_labels_get(
        admin=request.user,
        run_id=run_id,
        state=request.GET.get("state", ""),
        page_number=request.GET.get("page"),
    )
    return render_page_or_partial(
        request, "oracle/run_labels.html", context, partial="label_table"
    )


@require_GET
@admin_required
def run_label(request, run_id: int, label_id: int):
    """One window's Oracle label beside the window's trajectory (the window
    page's partials)."""
    page = selectors_pages.run_label_page(
        admin=request.user,
        run_id=run_id,
        label_id=label_id,
        state=request.GET.get("state", ""),
    )
    context = window_page_context(request, page["label"].window, full=True)
    context.update(page)
    return render(request, "oracle/run_label.html", context)


# Validation ----------------------------------------------------------------------


def _promote_url(run, report=None) -> str:
    """The exports app's release builder for this run and the report shown
    next to the button."""
    url = reverse("exports:release_new") + f"?run={run.pk}"
    return url + (f"&report={report.pk}" if report is not None else "")


def _bars(report: dict) -> dict:
    """Table 1's F1 per task as a chart (static/js/charts.js)."""
    rows = [("Status macro-F1", report.get("status_macro_f1"))]
    for key, label in (
        ("acute_problems", "Acute problems F1"),
        ("recommended_actions", "Recommended actions F1"),
        ("red_flags", "Red flags F1"),
    ):
        rows.append((label, (report.get(key) or {}).get("f1")))
    return _bar_chart(rows)


def _group_bars(report: dict) -> dict:
    """Status macro-F1 per disease group as a chart."""
    groups = report.get("by_disease_group") or []
    return _bar_chart([(g["label"], g.get("status_macro_f1")) for g in groups])


def _bar_chart(rows: list[tuple[str, float | None]]) -> dict:
    return {
        "kind": "bars",
        "bars": [
            {"label": label, "estimate": value, "low": None, "high": None}
            for label, value in rows
        ],
    }


def _confusion_rows(report: dict) -> list[dict]:
    confusion = report.get("confusion") or {}
    labels = confusion.get("labels") or list(CHART_STATUS)
    matrix = confusion.get("matrix") or [[0] * len(labels) for _ in labels]
    peak = max([max(row) for row in matrix] + [1])
    return [
        {
            "gold": gold,
            "cells": [
                {"count": n, "shade": round(100 * n / peak), "diagonal": i == j}
                for j, n in enumerate(row)
            ],
        }
        for i, (gold, row) in enumerate(zip(labels, matrix))
    ]


@require_GET
@admin_required
def run_validation(request, run_id: int):
    page = selectors_pages.validation_page(
        admin=request.user,
        run_id=run_id,
        report_id=request.GET.get("report"),
        job_id=request.GET.get("job"),
    )
    run, report = page["run"], page["report"]
    context = {
        **page,
        "figures": report.report if report else None,
        "tau_source": tau_source_of(report.matcher_model, report.tau) if report else "",
        "bars": _bars(report.report) if report else None,
        "group_bars": _group_bars(report.report) if report else None,
        "confusion": _confusion_rows(report.report) if report else [],
        "status_labels": (report.report.get("confusion") or {}).get(
            "labels", CHART_STATUS
        )
        if report
        else CHART_STATUS,
        "validate_form": ValidateForm(initial={"campaign": run.campaign_id}),
        "promote_url": _promote_url(run, report),
    }
    return render(request, "oracle/validation.html", context)


@require_GET
@admin_required
def validation_progress(request, run_id: int, job_id: int):
    """The polled progress of a validation; once it is done, the page is sent
    to the report it made."""
    context = selectors_pages.validation_job_page(
        admin=request.user, run_id=run_id, job_id=job_id
    )
    run, job = context["run"], context["job"]
    if request.htmx and job.report_id:
        response = HttpResponse("")
        response["HX-Redirect"] = (
            reverse("oracle:run_validation", args=[run.pk]) + f"?report={job.report_id}"
        )
        return response
    return render(request, "oracle/validation.html#validation_job", context)


@require_POST
@admin_required
def run_validate(request, run_id: int):
    run = selectors.run_get(admin=request.user, run_id=run_id)
    form = ValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a Gold campaign to validate against.")
        return redirect("oracle:run_validation", run_id)
    try:
        job = services.validation_job_create(
            admin=request.user, run=run, campaign=form.cleaned_data["campaign"]
        )
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, error_text(error))
        return redirect("oracle:run_validation", run_id)
    messages.success(
        request,
        f"Validation against {job.campaign} queued: the report opens here "
        "when it is done.",
    )
    return redirect(reverse("oracle:run_validation", args=[run_id]) + f"?job={job.pk}")
