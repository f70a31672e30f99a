"""Agent pages: runs of reference agents (admins start them) and online
evaluations of researchers' endpoints, with each run's progress, tokens, cost
and per-stay memory."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.views.decorators.http import require_GET, require_POST

from accounts.access import role_required
from accounts.roles import user_is_admin
from accounts.web import (
    error_text,
    found_or_404,
    refusal_shown,
    render_page_or_partial,
)
from agents import selectors, selectors_pages, services
from exports.roles import user_may_use_releases

agents_user_required = role_required(
    lambda user: user_is_admin(user) or user_may_use_releases(user),
    message="Agent runs are for admins and researchers.",
)


def _run_or_404(request, run_id: int):
    return found_or_404(
        selectors.run_get(user=request.user, run_id=run_id), "No such run."
    )


def _run_list_page(request, page: dict, *, status: int = 200):
    return render(request, "agents/run_list.html", page, status=status)


def _refused(request, page: dict, error):
    """The runs page again with the service's reason: 400 for a form error,
    403 for a role that may not do it; nothing was saved."""
    messages.error(request, error_text(error))
    return _run_list_page(
        request, page, status=403 if isinstance(error, PermissionDenied) else 400
    )


@require_GET
@agents_user_required
def run_list(request):
    return _run_list_page(request, selectors_pages.run_list_page(user=request.user))


def _id_posted(request, field: str, message: str) -> int:
    """A posted row id, or ValidationError with ``message`` (not a number, or
    out of a database id's range)."""
    value = (request.POST.get(field) or "").strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 19):
        raise ValidationError(message)
    if not 0 < int(value) < 2**63:
        raise ValidationError(message)
    return int(value)


def _release(request, page: dict, field="release"):
    """The posted release, one of the ready releases the page offers."""
    release_id = _id_posted(request, field, "Choose a ready release.")
    release = page["releases"].filter(pk=release_id).first()
    if release is None:
        raise ValidationError("Choose a ready release.")
    return release


def _start(request, start):
    """A run started from the runs page over the posted release by
    ``start(release)``, then its page; or the runs page with the refusal."""
    page = selectors_pages.run_list_page(user=request.user)
    try:
        run = start(_release(request, page))
    except (ValidationError, PermissionDenied) as error:
        return _refused(request, page, error)
    return redirect("agents:run_detail", run_id=run.pk)


@require_POST
@agents_user_required
def run_start(request):
    from oracle.models import Backbone

    def start(release):
        backbone = None
        if request.POST.get("backbone"):
            backbone = Backbone.objects.filter(
                pk=_id_posted(request, "backbone", "Choose a backbone from the list.")
            ).first()
            if backbone is None:
                raise ValidationError("Choose a backbone from the list.")
        return services.agent_run_start(
            user=request.user,
            release=release,
            agent=request.POST.get("agent", ""),
            backbone=backbone,
        )

    return _start(request, start)


@require_POST
@agents_user_required
def endpoint_start(request):
    def start(release):
        return services.endpoint_evaluate(
            user=request.user,
            release=release,
            name=request.POST.get("name", ""),
            url=request.POST.get("url", ""),
            context_mode=request.POST.get("context_mode") or "streamed",
        )

    return _start(request, start)


@require_GET
@agents_user_required
def run_detail(request, run_id: int):
    context = selectors_pages.run_detail_get(user=request.user, run_id=run_id)
    context["run"] = services.agent_run_settle(run=context["run"])
    context["is_admin"] = user_is_admin(request.user)
    return render_page_or_partial(
        request, "agents/run_detail.html", context, partial="run_progress"
    )


def _run_act(request, run_id: int, action):
    """``action`` (a service taking the user and the run) on the run the
    address names; its refusal as a message, and back to the run's page."""
    run = _run_or_404(request, run_id)
    with refusal_shown(request):
        action(user=request.user, run=run)
    return redirect("agents:run_detail", run_id=run.pk)


@require_POST
@agents_user_required
def run_cancel(request, run_id: int):
    return _run_act(request, run_id, services.agent_run_cancel)


@require_POST
@agents_user_required
def run_resume(request, run_id: int):
    return _run_act(request, run_id, services.agent_run_resume)


def _has_template(name: str) -> bool:
    try:
        get_template(name)
    except TemplateDoesNotExist:
        return False
    return True


@require_GET
@agents_user_required
def stay_memory(request, run_id: int, stay_state_id: int):
    run = _run_or_404(request, run_id)
    state = found_or_404(
        selectors.stay_state_get(run=run, stay_state_id=stay_state_id),
        "No such stay in this run.",
    )
    template = "agents/_icu_evo_memory.html"
    context = {
        "run": run,
        "state": state,
        "memory": state.memory,
        "memory_json": json.dumps(state.memory, indent=2, ensure_ascii=False),
        "icu_evo_template": template
        if run.agent == "icu-evo" and _has_template(template)
        else "",
    }
    return render(request, "agents/stay_memory.html", context)
