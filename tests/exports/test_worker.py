"""The queue: a release built by the Celery task, and a submission uploaded
through the API scored by a real worker with the release's real matcher."""

import io
import json
import time

import pytest
from rest_framework.test import APIClient

from exports.models import Release, ReleaseState, Submission, SubmissionState
from exports.services import release_create, token_create

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_dirs(tmp_path, monkeypatch, settings):
    # The worker is another process: it reads the folders from its environment.
    monkeypatch.setenv("REALICU_RELEASES_DIR", str(settings.REALICU_RELEASES_DIR))
    monkeypatch.setenv("REALICU_SUBMISSIONS_DIR", str(settings.REALICU_SUBMISSIONS_DIR))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _wait(predicate, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_release_is_built_and_predictions_scored_by_the_worker(
    worker_dirs, admin_user, researcher, tiny_run, tiny_stays, celery_worker_process
):
    # Creating the release records its build task (jobs.outbox), sent on commit.
    release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
    assert _wait(
        lambda: Release.objects.get(pk=release.pk).state
        in (ReleaseState.READY, ReleaseState.FAILED)
    )
    release.refresh_from_db()
    assert release.state == ReleaseState.READY, release.error

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=researcher).key}")
    w = tiny_stays["windows"]
    upload = io.BytesIO(
        json.dumps(
            {
                "window_id": w["A"][0].pk,
                "status": "deteriorating",
                "acute_problems": ["Septic shock"],
                "recommended_actions": ["Fluid bolus"],
            }
        ).encode()
    )
    upload.name = "p.jsonl"
    created = client.post(
        f"/api/v1/releases/{release.pk}/submissions/",
        {"file": upload, "model_name": "m"},
        format="multipart",
    ).json()
    assert _wait(
        lambda: Submission.objects.get(pk=created["id"]).state
        in (SubmissionState.SCORED, SubmissionState.FAILED)
    )
    scores = client.get(f"/api/v1/submissions/{created['id']}/").json()
    assert scores["state"] == "scored", scores["error"]
    overall = scores["scores"]["overall"]
    # a0: exact texts match at any tau <= 1; the other three windows have no
    # prediction. Problems W' = a0, b0, c0: Hit 1/3; HRR: a0 [Fluid bolus] is
    # the red flag: 1.
    assert overall["problems_hit_at_k"] == pytest.approx(1 / 3)
    assert overall["actions_hrr_at_k"] == pytest.approx(1.0)
    assert overall["status_accuracy"] == pytest.approx(1 / 4)
