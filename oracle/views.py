"""The admin's Oracle pages: backbones, runs with a live progress bar, and the
validation of a run against a Gold campaign. Admin only (404 for anyone else):
Oracle labels are never shown to physicians."""

from __future__ import annotations

from types import SimpleNamespace

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.access import admin_required
from accounts.web import error_text, render_page_or_partial
from evaluation.matcher import tau_source_of
from jobs.reaper import job_check
from oracle import selectors, selectors_labels, services
from oracle.forms import BackboneForm, RunForm, ValidateForm
from oracle.models import BackboneKind
from oracle.services.tokens import (
    budget_text,
    context_tokens,
    estimate_error,
    prompt_budget_parts,
    prompt_tokens_distribution,
)
from windows.presentation import window_page_context

CHART_STATUS = ("improving", "stable", "deteriorating")


def _form_errors_from(form, error) -> None:
    if hasattr(error, "error_dict"):
        for key, messages_ in error.message_dict.items():
            form.add_error(key if key in form.fields else None, messages_)
    else:
        form.add_error(None, error_text(error))


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
        try:
            backbone = services.backbone_create(
                admin=request.user, app_host=request.get_host(), **form.cleaned_data
            )
        except (ValidationError, PermissionDenied) as error:
            _form_errors_from(form, error)
        else:
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
        try:
            services.backbone_update(
                admin=request.user,
                backbone=backbone,
                app_host=request.get_host(),
                **form.cleaned_data,
            )
        except (ValidationError, PermissionDenied) as error:
            _form_errors_from(form, error)
        else:
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
        try:
            run = services.oracle_run_create(
                admin=request.user,
                name=data["name"] or f"{data['backbone'].name} on {target}",
                backbone=data["backbone"],
                prompt=data["prompt"],
                campaign=data["campaign"],
                cohort=data["cohort"],
            )
        except (ValidationError, PermissionDenied) as error:
            _form_errors_from(form, error)
        else:
            messages.success(
                request, f"Oracle run {run.pk} queued: {run.total_windows} windows."
            )
            return redirect("oracle:run_detail", run.pk)
    return render(request, "oracle/run_new.html", {"form": form})


def _prompt_tokens_chart(distribution: dict | None) -> dict | None:
    """The prompt-token histogram as a bars chart (static/js/charts.js): each
    bin's share of the windows, its range and count as the label."""
    if distribution is None:
        return None
    bins = distribution["bins"]
    return _bar_chart(
        [(f"{b['from']}–{b['to']} ({b['count']})", b["share"]) for b in bins]
    )


def _run_context(request, run) -> dict:
    # The reaper's check for this run (jobs.reaper): a run whose workers died
    # is queued again now, so the page shows what is true.
    job_check(run)
    snapshot = run.backbone_snapshot or {}
    window = snapshot.get("context_tokens")
    if snapshot.get("kind") == BackboneKind.OPENAI and not window:
        window = context_tokens(run.backbone)
    prompt_tokens = prompt_tokens_distribution(run.labels.all(), window=window)
    budget = None
    if snapshot.get("kind") == BackboneKind.OPENAI:
        # The figures the run labels with (recorded on its snapshot by its
        # first chunk), else the backbone's now: the README's formula.
        live = run.backbone
        in_use = SimpleNamespace(
            context_tokens=snapshot.get("context_tokens") or live.context_tokens,
            max_completion_tokens=snapshot.get("max_completion_tokens")
            or live.max_completion_tokens,
        )
        budget = budget_text(prompt_budget_parts(in_use, template=run.prompt))
    return {
        "run": run,
        "prompt_tokens": prompt_tokens,
        "prompt_budget": budget,
        "estimate_error": estimate_error(run.labels.all()),
        "prompt_tokens_chart": _prompt_tokens_chart(prompt_tokens),
        "progress": selectors.oracle_run_progress(admin=request.user, run=run),
        "snapshot": run.backbone_snapshot or {},
        "is_rules": (run.backbone_snapshot or {}).get("kind") == BackboneKind.RULES,
    }


@require_GET
@admin_required
def run_detail(request, run_id: int):
    run = selectors.run_get(admin=request.user, run_id=run_id)
    context = _run_context(request, run)
    context["reports"] = selectors.validation_reports_of(admin=request.user, run=run)
    context["validate_form"] = ValidateForm(initial={"campaign": run.campaign_id})
    return render(request, "oracle/run_detail.html", context)


@require_GET
@admin_required
def run_progress(request, run_id: int):
    run = selectors.run_get(admin=request.user, run_id=run_id)
    return render(
        request, "oracle/run_detail.html#run_progress", _run_context(request, run)
    )


def _run_action(request, run_id: int, action, done_message):
    run = selectors.run_get(admin=request.user, run_id=run_id)
    try:
        result = action(admin=request.user, run=run)
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, error_text(error))
    else:
        messages.success(request, done_message(result))
    return redirect("oracle:run_detail", run_id)


@require_POST
@admin_required
def run_cancel(request, run_id: int):
    return _run_action(
        request,
        run_id,
        services.oracle_run_cancel,
        lambda run: (
            "Run cancelled: no new request is sent; replies in flight are kept."
        ),
    )


@require_POST
@admin_required
def run_resume(request, run_id: int):
    # The page offers Resume only where it applies; a forged or stale post on
    # a run that is still going changes nothing and says why.
    run = selectors.run_get(admin=request.user, run_id=run_id)
    job_check(run)
    reason = selectors.run_not_resumable_reason(run=run)
    if reason:
        messages.error(request, reason)
        return redirect("oracle:run_detail", run_id)
    return _run_action(
        request,
        run_id,
        services.oracle_run_resume,
        lambda run: "Run resumed: the windows without a label are queued.",
    )


@require_POST
@admin_required
def run_retry_failed(request, run_id: int):
    return _run_action(
        request,
        run_id,
        services.oracle_run_retry_failed,
        lambda n: f"{n} failed window{'s' if n != 1 else ''} queued again.",
    )


# The run's labels beside the trajectory ---------------------------------------------


@require_GET
@admin_required
def run_labels(request, run_id: int):
    """The run's windows and their Oracle labels, a page at a time."""
    run = selectors.run_get(admin=request.user, run_id=run_id)
    state = request.GET.get("state", "")
    page = selectors_labels.run_labels_page(
        admin=request.user, run=run, state=state, page=request.GET.get("page")
    )
    rows = [(label, selectors_labels.label_counts(label)) for label in page]
    context = {
        "run": run,
        "page": page,
        "rows": rows,
        "state": state if state in selectors_labels.LABEL_FILTERS else "",
        "filters": selectors_labels.LABEL_FILTERS.items(),
    }
    return render_page_or_partial(
        request, "oracle/run_labels.html", context, partial="label_table"
    )


@require_GET
@admin_required
def run_label(request, run_id: int, label_id: int):
    """One window's Oracle label beside the window's trajectory (the window
    page's partials)."""
    run = selectors.run_get(admin=request.user, run_id=run_id)
    label = selectors_labels.run_label_get(
        admin=request.user, run=run, label_id=label_id
    )
    state = request.GET.get("state", "")
    context = window_page_context(request, label.window, full=True)
    context.update(
        {
            "run": run,
            "label": label,
            "shown": selectors_labels.oracle_label_shown(
                admin=request.user, label=label
            ),
            "neighbours": selectors_labels.run_label_neighbours(
                admin=request.user, run=run, label=label, state=state
            ),
            "state": state if state in selectors_labels.LABEL_FILTERS else "",
        }
    )
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


def _job_context(request, run, job) -> dict:
    if job is not None:
        job_check(job)  # a validation whose worker died is queued again now
    return {
        "run": run,
        "job": job,
        "job_progress": selectors.validation_job_progress(admin=request.user, job=job)
        if job
        else None,
    }


@require_GET
@admin_required
def run_validation(request, run_id: int):
    run = selectors.run_get(admin=request.user, run_id=run_id)
    reports = selectors.validation_reports_of(admin=request.user, run=run)
    report = None
    if request.GET.get("report"):
        report = selectors.validation_report_get(
            admin=request.user, run=run, report_id=request.GET["report"]
        )
    else:
        report = reports.first()
    if request.GET.get("job"):
        job = selectors.validation_job_get(
            admin=request.user, run=run, job_id=request.GET["job"]
        )
    else:
        job = selectors.validation_job_current(admin=request.user, run=run)
    context = {
        **_job_context(request, run, job),
        "reports": reports,
        "report": report,
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
    run = selectors.run_get(admin=request.user, run_id=run_id)
    job = selectors.validation_job_get(admin=request.user, run=run, job_id=job_id)
    context = _job_context(request, run, job)
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
