"""What each user may see of agent runs: admins every run, researchers the runs
they started (their endpoints' online evaluations). Forged ids find nothing."""

from __future__ import annotations

from django.db.models import QuerySet

from accounts.roles import user_is_admin
from agents.models import AgentPrediction, AgentRun, AgentStayState, OnlineEndpoint
from exports.models import Release, ReleaseState


def run_list(*, user) -> QuerySet[AgentRun]:
    runs = AgentRun.objects.select_related(
        "release", "backbone", "endpoint", "submission"
    )
    if user_is_admin(user):
        return runs
    return runs.filter(created_by=user)


def run_get(*, user, run_id: int) -> AgentRun | None:
    return run_list(user=user).filter(pk=run_id).first()


def run_stays(*, run: AgentRun) -> QuerySet[AgentStayState]:
    return AgentStayState.objects.filter(run=run).order_by("stay_id")


def stay_state_get(*, run: AgentRun, stay_state_id: int) -> AgentStayState | None:
    return run_stays(run=run).filter(pk=stay_state_id).first()


def run_failures(*, run: AgentRun, limit: int = 50) -> list[AgentPrediction]:
    return list(
        AgentPrediction.objects.filter(run=run)
        .exclude(error="")
        .order_by("stay_id", "window_id")[:limit]
    )


def endpoint_list(*, user) -> QuerySet[OnlineEndpoint]:
    endpoints = OnlineEndpoint.objects.select_related("release")
    if user_is_admin(user):
        return endpoints
    return endpoints.filter(created_by=user)


def ready_releases(*, user) -> QuerySet[Release]:
    from exports.selectors import release_list

    return release_list(user=user).filter(state=ReleaseState.READY)
