"""Reads composed for one agents page each (issue 37: a view calls one selector
and at most one service): the runs page with what its forms offer, and a run's
page with its stays, each open one checked by the reaper first
(jobs.reaper)."""

from __future__ import annotations

from django.http import Http404

from accounts.roles import user_is_admin
from agents.models import ContextMode
from agents.reference import agents_available
from agents.selectors import (
    endpoint_list,
    ready_releases,
    run_failures,
    run_get,
    run_list,
    run_stays,
)
from jobs.reaper import job_check

RUNS_SHOWN = 100
ENDPOINTS_SHOWN = 50


def run_list_page(*, user) -> dict:
    """The user's runs (newest first, as ``run_list``), the reference agents,
    the ready releases the user may run over (``releases``: the forms' only
    choices), the OpenAI-compatible backbones (admins only), the user's
    endpoints and the context modes. Its querysets are lazy: a start view
    picks the posted release among ``releases`` before the page renders."""
    from oracle.models import Backbone, BackboneKind

    is_admin = user_is_admin(user)
    return {
        "runs": run_list(user=user)[:RUNS_SHOWN],
        "agents": agents_available(),
        "releases": ready_releases(user=user),
        "backbones": Backbone.objects.filter(kind=BackboneKind.OPENAI)
        if is_admin
        else [],
        "endpoints": endpoint_list(user=user)[:ENDPOINTS_SHOWN],
        "context_modes": ContextMode.choices,
        "is_admin": is_admin,
    }


def run_detail_get(*, user, run_id: int) -> dict:
    """The run (Http404 for one the user may not see), its stays, each queued
    or running one checked by the reaper (a stay whose worker died is queued
    again now), and its failed predictions."""
    run = run_get(user=user, run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    stays = list(run_stays(run=run))
    for state in stays:
        if state.state in ("running", "queued"):
            job_check(state)
    return {"run": run, "stays": stays, "failures": run_failures(run=run)}
