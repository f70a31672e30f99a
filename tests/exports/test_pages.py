"""The release pages: who sees them, the token page, the upload form's
line-numbered refusals, the leaderboard showing public submissions only."""

import io
import re

import pytest
from django.utils.html import escape

from evaluation.matcher import tau_source_of
from exports.models import ApiToken, Submission
from exports.services import submission_create, submission_publish, submission_score

from .helpers import ExactMatcher, delirium_line

pytestmark = pytest.mark.django_db


def test_a_physician_does_not_see_release_pages(client, physician, tiny_release):
    client.force_login(physician)
    for url in ("/releases/", f"/releases/{tiny_release.pk}/", "/releases/token/"):
        assert client.get(url).status_code == 403
    assert "Releases</a>" not in client.get("/stays/").content.decode()


def test_researcher_sees_releases_and_the_nav_link(client, researcher, tiny_release):
    client.force_login(researcher)
    page = client.get("/releases/").content.decode()
    assert "realicu-scale-v1" in page and "Releases</a>" in page
    assert "Build a release" not in page
    detail = client.get(f"/releases/{tiny_release.pk}/").content.decode()
    assert "windows.jsonl" in detail and "DATACARD.md" in detail


def test_token_is_created_shown_once_and_revoked(client, researcher):
    client.force_login(researcher)
    made = client.post("/releases/token/create/")
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    key = re.search(r'id="new-token"[^>]*>([0-9a-f]{40})<', made.content.decode())[1]
    token = ApiToken.objects.get(user=researcher)
    assert key.startswith(token.prefix) and key != token.digest
    later = client.get("/releases/token/").content.decode()
    assert key not in later and f"{token.prefix}…" in later
    client.post("/releases/token/revoke/")
    assert not ApiToken.objects.filter(user=researcher).exists()


def test_upload_form_lists_the_bad_lines_and_stores_nothing(
    client, researcher, tiny_release
):
    client.force_login(researcher)
    upload = io.BytesIO(b'{"window_id": "x"}\n')
    upload.name = "p.jsonl"
    response = client.post(
        f"/releases/{tiny_release.pk}/submit/",
        {"file": upload, "model_name": "m", "k": 5},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert (
        "line 1: missing field(s) status, acute_problems, recommended_actions" in html
    )
    assert "line 1: window_id must be an integer" in html
    assert not Submission.objects.exists()


def test_leaderboard_shows_public_submissions_only(
    client, researcher, admin_user, tiny_release, tiny_stays
):
    line = delirium_line(tiny_stays)
    public = submission_create(
        user=researcher,
        release=tiny_release,
        upload=io.BytesIO(line),
        model_name="open-model",
    )
    hidden = submission_create(
        user=researcher,
        release=tiny_release,
        upload=io.BytesIO(line),
        model_name="secret-model",
    )
    for s in (public, hidden):
        submission_score(submission=s, matcher=ExactMatcher())
    submission_publish(user=researcher, submission=public, public=True)
    client.force_login(admin_user)
    board = client.get(f"/releases/{tiny_release.pk}/leaderboard/").content.decode()
    assert "open-model" in board and "secret-model" not in board
    assert client.get(f"/releases/submissions/{hidden.pk}/").status_code == 404
    scores = client.get(f"/releases/submissions/{public.pk}/")
    assert scores.status_code == 200 and "All windows" in scores.content.decode()
    plot = client.get(f"/releases/submissions/{public.pk}/plots/by_disease_group.png")
    assert plot.status_code == 200 and plot["Content-Type"] == "image/png"


def test_release_and_score_pages_say_which_tau_matched_and_where_it_came_from(
    client, researcher, tiny_release, tiny_stays
):
    line = delirium_line(tiny_stays)
    submission = submission_create(
        user=researcher, release=tiny_release, upload=io.BytesIO(line), model_name="m"
    )
    submission_score(submission=submission, matcher=ExactMatcher())
    source = tau_source_of(tiny_release.matcher_model, tiny_release.tau)
    client.force_login(researcher)

    detail = client.get(f"/releases/{tiny_release.pk}/").content.decode()
    assert f'data-tau="{tiny_release.tau}"' in detail
    assert f"<span data-tau-source>{escape(source)}</span>" in detail

    scores = client.get(f"/releases/submissions/{submission.pk}/").content.decode()
    assert f'data-tau="{tiny_release.tau}"' in scores
    assert f"<span data-tau-source>{escape(source)}</span>" in scores

    # Scores recorded before their tau's source was: the page names today's.
    Submission.objects.filter(pk=submission.pk).update(
        scores={**submission.scores, "tau_source": None}
    )
    scores = client.get(f"/releases/submissions/{submission.pk}/").content.decode()
    assert f"<span data-tau-source>{escape(source)}</span>" in scores
