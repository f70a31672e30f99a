"""The agents' pages and the leaderboard's baselines: a reference run's page
with its progress, tokens and cost, a stay's memory, the baselines on the
release's leaderboard with agent, prompt version and backbone, and the
plumbing-only note for a fake LLM; who may see and start what."""

import pytest
from django.test import Client

from accounts.roles import Role
from agents.models import AgentRun
from agents.prompts import PROMPT_VERSION
from tests.agents.helpers import run_inline, run_queued
from tests.annotation.conftest import make_role_user

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def finished_run(fake_llm, fake_backbone, tiny_release, admin_user):
    return run_inline("full-context", tiny_release, fake_backbone, admin_user)


def test_leaderboard_shows_the_baseline_and_says_plumbing_only(
    finished_run, researcher
):
    page = client_for(researcher).get(
        f"/releases/{finished_run.release_id}/leaderboard/"
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert "data-baseline" in html
    assert "agent full-context" in html
    assert f"prompt {PROMPT_VERSION}" in html
    assert "backbone fake-llm" in html
    assert "data-plumbing-only" in html and "plumbing only" in html


def test_no_plumbing_note_without_a_fake_baseline(tiny_release, researcher):
    html = (
        client_for(researcher)
        .get(f"/releases/{tiny_release.pk}/leaderboard/")
        .content.decode()
    )
    assert "data-plumbing-only" not in html


def test_run_page_progress_tokens_cost_and_memory(finished_run, admin_user):
    client = client_for(admin_user)
    html = client.get(f"/agents/runs/{finished_run.pk}/").content.decode()
    assert "4 of 4 windows" in html
    assert f"{finished_run.tokens_in} in" in html
    assert "data-plumbing-only" in html
    assert "data-baseline" in html
    # The htmx poll gets the progress partial only.
    partial = client.get(
        f"/agents/runs/{finished_run.pk}/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="run-progress"' in partial and "<h1>" not in partial
    state = finished_run.stays.first()
    memory = client.get(f"/agents/runs/{finished_run.pk}/stays/{state.pk}/")
    assert memory.status_code == 200
    assert "keeps no memory" in memory.content.decode()


def _memory_page(user, run, memory: dict) -> str:
    """The memory page of the run's first stay, as ``user`` reads it, once
    that stay's memory is ``memory``."""
    state = run.stays.first()
    state.memory = memory
    state.save(update_fields=["memory"])
    page = client_for(user).get(f"/agents/runs/{run.pk}/stays/{state.pk}/")
    return page.content.decode()


def test_stay_memory_is_shown_as_json(finished_run, admin_user):
    memory = {"summary": "stable on noradrenaline"}
    html = _memory_page(admin_user, finished_run, memory)
    assert "stable on noradrenaline" in html and "data-memory-json" in html


def test_who_may_see_and_start_runs(finished_run, researcher, fake_backbone):
    # A researcher does not see an admin's reference run (404), and cannot
    # start one: a clear message and no run.
    client = client_for(researcher)
    assert client.get(f"/agents/runs/{finished_run.pk}/").status_code == 404
    response = client.post(
        "/agents/runs/start/",
        {
            "agent": "local-window",
            "release": finished_run.release_id,
            "backbone": fake_backbone.pk,
        },
        follow=True,
    )
    assert "Only an admin can start a reference agent run." in (
        response.content.decode()
    )
    assert AgentRun.objects.count() == 1
    physician = make_role_user(Role.PHYSICIAN)
    assert client_for(physician).get("/agents/").status_code == 403


def test_admin_starts_a_run_from_the_page(admin_user, tiny_release, fake_backbone):
    response = client_for(admin_user).post(
        "/agents/runs/start/",
        {"agent": "rag", "release": tiny_release.pk, "backbone": fake_backbone.pk},
    )
    run = AgentRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/agents/runs/{run.pk}/"
    assert (run.agent, run.backbone_id, run.windows_total) == (
        "rag",
        fake_backbone.pk,
        4,
    )
    assert run.stays.count() == 3


def test_icu_evo_memory_uses_its_own_partial(fake_backbone, tiny_release, admin_user):
    run = run_queued(
        user=admin_user, release=tiny_release, backbone=fake_backbone, agent="icu-evo"
    )
    memory = {"window_index": 3, "summaries": [], "hypotheses": []}
    html = _memory_page(admin_user, run, memory)
    assert "data-icu-evo-memory" in html and "data-memory-json" in html
