"""Promoting an Oracle run to RealICU-Scale from its validation page: the
promote link opens the release page with the run's validation report next to
the button, the button builds the release carrying that report, and a run
without a report is refused on the server, writing nothing."""

import html
import json
import re

import pytest

from exports.models import Release, ReleaseKind, ReleaseState
from exports.tasks import release_build_task
from oracle.models import ValidationReport

from .helpers import make_oracle_run

pytestmark = pytest.mark.django_db


def _promote_href(page: str) -> str:
    match = re.search(r'href="([^"]+)" data-promote>', page)
    assert match, "the validation page has no promote link"
    return html.unescape(match.group(1))


def test_admin_promotes_a_run_from_its_validation_page_to_a_built_scale_release(
    client, admin_user, tiny_run, release_dirs, django_capture_on_commit_callbacks
):
    report = ValidationReport.objects.get(run=tiny_run)
    client.force_login(admin_user)
    validation = client.get(f"/oracle/runs/{tiny_run.pk}/validation/")
    assert validation.status_code == 200
    href = _promote_href(validation.content.decode())
    assert href == f"/releases/new/?run={tiny_run.pk}&report={report.pk}"

    page = client.get(href)
    assert page.status_code == 200
    body = page.content.decode()
    # The report the release will carry is shown next to the build button.
    assert f'data-report-id="{report.pk}"' in body
    assert "0.900" in body and "data-promote-build" in body
    assert f'name="validation_report" value="{report.pk}"' in body

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            "/releases/new/",
            {"oracle_run": tiny_run.pk, "validation_report": report.pk, "notes": "first"},
        )
    assert response.status_code == 302 and response["Location"] == "/releases/"
    release = Release.objects.get()
    assert release.kind == ReleaseKind.SCALE and release.state == ReleaseState.QUEUED
    assert release.oracle_run == tiny_run and release.validation_report == report
    assert len(callbacks) == 1  # the build is queued once the row is committed
    listing = client.get("/releases/").content.decode()
    assert f'id="release-{release.pk}"' in listing and "<progress" in listing

    # What the queued job runs (the worker test covers the queue itself).
    release_build_task(release.pk)
    release.refresh_from_db()
    assert release.state == ReleaseState.READY, release.error
    manifest = json.loads((release_dirs / release.directory / "manifest.json").read_text())
    assert manifest["validation_report"]["id"] == report.pk
    assert manifest["source"]["oracle_run_id"] == tiny_run.pk
    assert client.get(f"/releases/{release.pk}/").status_code == 200


def test_a_run_without_a_validation_report_is_refused_and_nothing_is_built(
    client, admin_user, tiny_labels
):
    run = make_oracle_run(admin=admin_user, labels=tiny_labels, validated=False)
    client.force_login(admin_user)
    validation = client.get(f"/oracle/runs/{run.pk}/validation/").content.decode()
    assert "data-promote>" not in validation
    page = client.get(f"/releases/new/?run={run.pk}").content.decode()
    assert "data-no-report" in page and "data-promote-build" not in page
    # A hand-made POST is refused by the server with the reason.
    response = client.post("/releases/new/", {"oracle_run": run.pk})
    assert response.status_code == 400
    assert "has no validation report" in response.content.decode()
    assert not Release.objects.exists()


def test_a_report_of_another_run_is_refused(client, admin_user, tiny_run, tiny_labels):
    other = make_oracle_run(admin=admin_user, labels=tiny_labels, name="other")
    foreign = ValidationReport.objects.get(run=other)
    client.force_login(admin_user)
    response = client.post(
        "/releases/new/", {"oracle_run": tiny_run.pk, "validation_report": foreign.pk}
    )
    assert response.status_code == 400
    assert "is not a report of Oracle run" in response.content.decode()
    assert not Release.objects.exists()


def test_bad_promote_requests_get_clear_answers(client, admin_user, tiny_run):
    client.force_login(admin_user)
    assert client.get("/releases/new/?run=abc").status_code == 404
    assert client.get("/releases/new/?run=999999").status_code == 404
    chooser = client.get("/releases/new/")
    assert chooser.status_code == 200 and f'value="{tiny_run.pk}"' in chooser.content.decode()
    response = client.post("/releases/new/", {"oracle_run": "999999"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not Release.objects.exists()


def test_only_admins_reach_the_promote_page(client, researcher, physician, tiny_run):
    for user in (researcher, physician):
        client.force_login(user)
        assert client.get(f"/releases/new/?run={tiny_run.pk}").status_code == 404
        assert client.post("/releases/new/", {"oracle_run": tiny_run.pk}).status_code == 404
    assert not Release.objects.exists()
