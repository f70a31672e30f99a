"""Threshold calibration pages (spec section 5): the list of calibration sets
(with the admin's form to draw one), the reference calibration of the shipped
models, the judging page where invited physicians say whether two items are the
same (keys S / D), and the admin's report sweeping tau, with the forms to invite
judges and to adopt a tau for the model."""

from __future__ import annotations

import math

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.access import admin_required, judge_required
from accounts.ids import MAX_INT32, id_parse
from accounts.web import error_text, refusal_shown, render_page_or_partial
from annotation import calibration as services
from annotation import calibration_judging as judging
from annotation import selectors
from annotation.models import Campaign, ConsensusTask, RecomputeState
from annotation.selectors.calibration import calibration_judge_page
from annotation.services.posted import calibration_judge_posted
from evaluation.matcher import (
    PACKAGED_MODELS,
    REFERENCE_TAUS,
    MatcherUnavailable,
    SemanticMatcher,
    configured_model_name,
)
from evaluation.reference_calibration import (
    KINDS,
    REFERENCE_PAIRS_PATH,
    reference_report_for,
)
from jobs.reaper import job_check

TASK_NAMES = dict(ConsensusTask.choices)


@require_GET
@judge_required
def calibration_list(request):
    context = judging.calibration_list_page(user=request.user)
    model_name = configured_model_name()
    return render(
        request,
        "annotation/calibration_list.html",
        {**context, "model_name": model_name, "in_force": _in_force(model_name)},
    )


def _in_force(model_name: str) -> dict | None:
    """The model's tau in force and where it comes from (nothing is loaded)."""
    try:
        matcher = SemanticMatcher(model_name)
    except MatcherUnavailable:
        return None
    return {"tau": matcher.tau, "tau_source": matcher.tau_source}


KIND_NAMES = {
    "problem": "Acute problems",
    "action": "Recommended actions",
    "red_flag": "Red flags",
}


def _shipped_models() -> list[str]:
    """The configured model first, then the other models shipped with a
    reference tau or a package."""
    names = [configured_model_name(), *REFERENCE_TAUS, *PACKAGED_MODELS]
    return list(dict.fromkeys(names))


def _same_tau(a, b) -> bool:
    return a is not None and b is not None and abs(a - b) < 1e-9


@require_GET
@admin_required
def calibration_reference(request):
    """The reference calibration of a shipped model (``?model=``, default the
    configured one): the sweep of the shipped clinical pairs with the share of
    unrelated pairs each tau matches, the adopted tau, and the tau in force
    with where it comes from. Computed once per process from the embeddings a
    worker cached (the web never loads the model: until then the page says
    so); an htmx request gets the report alone, which the list
    page loads after it is shown. Admins only: the judges are shown no scores
    or judged pairs that could sway their own judgments."""
    models = _shipped_models()
    model_name = request.GET.get("model") or models[0]
    if model_name not in models:
        raise Http404("No such shipped model.")
    error = ""
    try:
        report = reference_report_for(model_name, embedded_only=True)
    except MatcherUnavailable as exc:
        report, error = None, str(exc)
    rows = []
    if report:
        adopted, best = report["adopted"], report["best"]
        for row in report["rows"]:
            rates = row.get("unrelated_match_rate") or {}
            rows.append(
                {
                    **row,
                    "rates": [
                        None if rates.get(kind) is None else 100 * rates[kind]
                        for kind in KINDS
                    ],
                    "is_adopted": bool(adopted)
                    and _same_tau(row["tau"], adopted["tau"]),
                    "is_best": bool(best) and _same_tau(row["tau"], best["tau"]),
                    "in_force": _same_tau(row["tau"], report["tau_in_force"]),
                }
            )
    return render_page_or_partial(
        request,
        "annotation/calibration_reference.html",
        {
            "report": report,
            "error": error,
            "rows": rows,
            "model_name": model_name,
            "models": models,
            "kinds": [(kind, KIND_NAMES[kind]) for kind in KINDS],
            "by_kind": [
                (KIND_NAMES[kind], figures)
                for kind, figures in (report or {}).get("by_kind", {}).items()
            ],
            "pairs_file": REFERENCE_PAIRS_PATH.name,
            "max_unrelated_percent": 100 * report["max_unrelated_rate"]
            if report
            else None,
        },
        partial="reference",
    )


def _ids_posted(request, name: str) -> list[int]:
    """The ids posted under ``name``; what is not an id in range is left out
    (it names no row)."""
    ids = (id_parse(value) for value in request.POST.getlist(name))
    return [pk for pk in ids if pk is not None]


def _physicians_posted(request) -> list:
    """The physicians named in the form's ``judges`` (unknown ids ignored)."""
    return list(
        selectors.physicians_all().filter(pk__in=_ids_posted(request, "judges"))
    )


@require_POST
@admin_required
def calibration_draw(request):
    """Queue a draw for a worker (the matcher model is never loaded in a web
    process) and show its progress until the set is drawn."""
    campaigns = list(Campaign.objects.filter(pk__in=_ids_posted(request, "campaigns")))
    judges = _physicians_posted(request)
    try:
        per_stratum = int(request.POST.get("per_stratum") or "")
        band = float(request.POST.get("band") or "")
    except ValueError:
        messages.error(request, "Pairs per stratum and band must be numbers.")
        return redirect("annotation:calibration_list")
    if math.isnan(band):
        messages.error(request, "The band must be a number.")
        return redirect("annotation:calibration_list")
    seed = (request.POST.get("seed") or "0").strip()
    try:
        seed = int(seed)
    except ValueError:
        seed = None
    if seed is None or not -MAX_INT32 - 1 <= seed <= MAX_INT32:
        messages.error(
            request,
            f"The seed must be a whole number from {-MAX_INT32 - 1} to {MAX_INT32}.",
        )
        return redirect("annotation:calibration_list")
    try:
        draw = services.calibration_draw_request(
            admin=request.user,
            name=request.POST.get("name", ""),
            campaigns=campaigns,
            per_stratum=per_stratum,
            band=band,
            seed=seed,
            judges=judges,
        )
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, error_text(error))
        return redirect("annotation:calibration_list")
    return redirect("annotation:calibration_draw_progress", draw.pk)


@require_GET
@admin_required
def calibration_draw_progress(request, draw_id: int):
    """A draw's progress, polled by htmx until it ends; a finished draw leads
    to its set's report."""
    draw = services.calibration_draw_get(admin=request.user, draw_id=draw_id)
    job_check(draw)
    draw.refresh_from_db()
    if draw.state == RecomputeState.DONE and draw.calibration_set_id:
        url = reverse("annotation:calibration_report", args=[draw.calibration_set_id])
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = url
            return response
        return redirect(url)
    response = render_page_or_partial(
        request,
        "annotation/calibration_draw.html",
        {"draw": draw},
        partial="draw_progress",
    )
    response["Cache-Control"] = "no-store"
    return response


def _judge_context(request, set_id, *, error: str = "", last=None) -> dict:
    page = calibration_judge_page(user=request.user, set_id=set_id)
    pair = page["pair"]
    return {
        **page,
        "task_name": TASK_NAMES.get(pair.task, pair.task) if pair else "",
        "error": error,
        "last": last,
    }


@require_GET
@judge_required
def calibration_judge(request, set_id: int):
    response = render_page_or_partial(
        request,
        "annotation/calibration_judge.html",
        _judge_context(request, set_id),
        partial="judge_pair",
    )
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@judge_required
def calibration_judge_post(request, set_id: int):
    same = {"same": True, "different": False}.get(request.POST.get("judgment", ""))
    error, last = "", None
    try:
        last = calibration_judge_posted(
            judge=request.user,
            set_id=set_id,
            pair_id=request.POST.get("pair"),
            same=same,
        )
    except (ValidationError, PermissionDenied) as error_:
        error = error_text(error_)
    context = _judge_context(request, set_id, error=error, last=last)
    if request.htmx:
        return render(request, "annotation/calibration_judge.html#judge_pair", context)
    if error:
        messages.error(request, error)
    return redirect("annotation:calibration_judge", set_id)


@require_GET
@admin_required
def calibration_report(request, set_id: int):
    page = judging.calibration_report_page(admin=request.user, set_id=set_id)
    report = page["report"]
    rows = report["rows"]
    markers = []
    if report["current_tau"] is not None:
        markers.append({"x": report["current_tau"], "label": "current"})
    if report["best"]:
        markers.append({"x": report["best"]["tau"], "label": "best F1"})
    # The sweep's chart (static/js/charts.js); an undefined figure (nan) is null.
    plot = (
        {
            "kind": "lines",
            "x": [r["tau"] for r in rows],
            "x_label": "tau",
            "series": [
                {
                    "name": name,
                    "values": [r[key] if math.isfinite(r[key]) else None for r in rows],
                }
                for key, name in (
                    ("accuracy", "Accuracy"),
                    ("precision", "Precision"),
                    ("recall", "Recall"),
                    ("f1", "F1"),
                )
            ],
            "markers": markers,
        }
        if report["used"]
        else None
    )
    return render(
        request,
        "annotation/calibration_report.html",
        {
            **report,
            "plot": plot,
            "task_names": TASK_NAMES,
            "invitations": page["invitations"],
            "physicians_to_invite": page["physicians_to_invite"],
        },
    )


@require_POST
@admin_required
def calibration_invite(request, set_id: int):
    """Invite physicians to judge the set."""
    target = judging.calibration_invite_target(
        admin=request.user, set_id=set_id, judge_ids=_ids_posted(request, "judges")
    )
    calibration_set = target["calibration_set"]
    with refusal_shown(request):
        invited = services.calibration_invite(
            admin=request.user,
            calibration_set=calibration_set,
            judges=target["judges"],
        )
        messages.success(
            request, f"{invited} physician{'s' if invited != 1 else ''} invited."
        )
    return _judges_redirect(calibration_set)


def _set_act(request, set_id: int, act):
    """The admin's calibration set ``set_id``, after ``act(calibration_set)``
    has run: the success message it returns is shown, or the refusal it raises."""
    calibration_set = judging.calibration_set_get(
        user=request.user, set_id=set_id, admin_only=True
    )
    with refusal_shown(request):
        messages.success(request, act(calibration_set))
    return calibration_set


@require_POST
@admin_required
def calibration_invitation_withdraw(request, set_id: int):
    """Withdraw a physician's invitation to judge the set."""

    def withdraw(calibration_set) -> str:
        services.calibration_invitation_withdraw(
            admin=request.user,
            calibration_set=calibration_set,
            judge_id=request.POST.get("judge"),
        )
        return "Invitation withdrawn."

    return _judges_redirect(_set_act(request, set_id, withdraw))


def _judges_redirect(calibration_set):
    """Back to the set's report, at its judges and their invitations."""
    return redirect(
        reverse("annotation:calibration_report", args=[calibration_set.pk]) + "#judges"
    )


@require_POST
@admin_required
def calibration_adopt(request, set_id: int):
    def adopt(calibration_set) -> str:
        adoption = judging.tau_adopt(
            admin=request.user,
            calibration_set=calibration_set,
            tau=request.POST.get("tau"),
            reason=request.POST.get("reason", ""),
        )
        return (
            f"tau {adoption.tau:g} adopted for {adoption.matcher_model.name}. "
            "Recompute the campaigns' agreement to apply it."
        )

    calibration_set = _set_act(request, set_id, adopt)
    return redirect("annotation:calibration_report", calibration_set.pk)


__all__ = [
    "calibration_adopt",
    "calibration_draw",
    "calibration_draw_progress",
    "calibration_invitation_withdraw",
    "calibration_invite",
    "calibration_judge",
    "calibration_judge_post",
    "calibration_list",
    "calibration_reference",
    "calibration_report",
]
