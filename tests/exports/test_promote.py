"""Promoting an Oracle run to RealICU-Scale from its validation page: the
promote link opens the release page with the run's validation report next to
the button, each figure against its promotion threshold; the button builds the
release carrying that report. A run without a report, or with figures below a
threshold, is refused on the server, writing nothing, unless an admin
overrides with a reason, which is recorded and written into the manifest."""

import html
import json
import re

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from exports.models import Release, ReleaseKind, ReleaseState
from exports.services import release_create
from exports.tasks import release_build_task
from oracle.models import PromotionOverride, PromotionThresholds, ValidationReport
from oracle.promotion_gate import (
    DEFAULT_THRESHOLDS,
    PAPER_TABLE1,
    promotion_thresholds_set,
)

from .helpers import make_oracle_run

pytestmark = pytest.mark.django_db


def _promote_href(page: str) -> str:
    match = re.search(r'href="([^"]+)" data-promote>', page)
    assert match, "the validation page has no promote link"
    return html.unescape(match.group(1))


def figures(status, problems, actions, red_flags) -> dict:
    """A validation report's body with the four Table 1 figures."""
    return {
        "status_macro_f1": status,
        "status_accuracy": status,
        "acute_problems": {"f1": problems},
        "recommended_actions": {"f1": actions},
        "red_flags": {"f1": red_flags},
        "n_windows": 4,
    }


def report_with(run, body: dict) -> ValidationReport:
    report = ValidationReport.objects.get(run=run)
    report.report = body
    report.save(update_fields=["report"])
    return report


def test_admin_promotes_a_run_from_its_validation_page_to_a_built_scale_release(
    client, admin_user, tiny_run, release_dirs, django_capture_on_commit_callbacks
):
    report = report_with(tiny_run, figures(0.95, 0.96, 0.90, 0.93))
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
    assert "0.950" in body and "data-promote-build" in body
    assert "data-gate-failed" not in body and "data-override-reason" not in body
    assert f'name="validation_report" value="{report.pk}"' in body

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            "/releases/new/",
            {
                "oracle_run": tiny_run.pk,
                "validation_report": report.pk,
                "notes": "first",
            },
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
    manifest = json.loads(
        (release_dirs / release.directory / "manifest.json").read_text()
    )
    assert manifest["validation_report"]["id"] == report.pk
    assert manifest["source"]["oracle_run_id"] == tiny_run.pk
    assert manifest["promotion"]["override"] is None
    assert manifest["promotion"]["failures"] == []
    assert manifest["promotion"]["thresholds"]["values"] == DEFAULT_THRESHOLDS
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
    assert (
        chooser.status_code == 200
        and f'value="{tiny_run.pk}"' in chooser.content.decode()
    )
    response = client.post("/releases/new/", {"oracle_run": "999999"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not Release.objects.exists()


def test_only_admins_reach_the_promote_page(client, researcher, physician, tiny_run):
    for user in (researcher, physician):
        client.force_login(user)
        assert client.get(f"/releases/new/?run={tiny_run.pk}").status_code == 403
        assert (
            client.post("/releases/new/", {"oracle_run": tiny_run.pk}).status_code
            == 403
        )
    assert not Release.objects.exists()


def test_default_thresholds_are_table_1_minus_the_margin():
    assert DEFAULT_THRESHOLDS == {
        "status_macro_f1": 0.937,
        "acute_problems_f1": 0.937,
        "recommended_actions_f1": 0.845,
        "red_flags_f1": 0.914,
    }
    assert all(DEFAULT_THRESHOLDS[k] < PAPER_TABLE1[k] for k in PAPER_TABLE1)


def test_a_report_below_a_threshold_is_refused_naming_the_threshold(
    client, admin_user, tiny_run
):
    report = report_with(tiny_run, figures(0.95, 0.96, 0.80, 0.93))
    client.force_login(admin_user)

    page = client.get(f"/releases/new/?run={tiny_run.pk}&report={report.pk}")
    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-task="recommended_actions_f1" data-gate-failed' in body
    assert 'data-failed-threshold="recommended_actions_f1"' in body
    assert "data-override-reason" in body  # the override needs its reason
    assert body.count("data-failed-threshold=") == 1

    response = client.post(
        "/releases/new/", {"oracle_run": tiny_run.pk, "validation_report": report.pk}
    )
    assert response.status_code == 400
    answer = html.unescape(response.content.decode())
    assert "Recommended actions F1 0.800 is below the threshold 0.845" in answer
    assert (
        "Patient status"
        not in answer.split("data-promote-errors")[1].split("</div>")[0]
    )
    assert not Release.objects.exists() and not PromotionOverride.objects.exists()


def test_a_report_without_a_figure_is_refused(admin_user, tiny_run):
    report_with(tiny_run, {"status_macro_f1": 0.9})  # measured status only

    with pytest.raises(ValidationError) as refused:
        release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run)

    text = " ".join(refused.value.messages)
    assert "Patient status macro-F1 0.900 is below the threshold 0.937" in text
    assert "Red flags F1 is missing from the report" in text
    assert not Release.objects.exists()


def test_a_status_class_missing_from_gold_is_named_with_the_failed_threshold(
    client, admin_user, tiny_run
):
    body = figures(0.667, 0.96, 0.90, 0.93)
    body["confusion"] = {
        "labels": ["improving", "stable", "deteriorating"],
        "matrix": [[0, 0, 0], [0, 2, 0], [0, 0, 1]],
    }
    report = report_with(tiny_run, body)
    client.force_login(admin_user)

    response = client.post(
        "/releases/new/", {"oracle_run": tiny_run.pk, "validation_report": report.pk}
    )

    assert response.status_code == 400
    assert (
        "Patient status macro-F1 0.667 is below the threshold 0.937 (no compared "
        "Gold window is improving, so status macro-F1 cannot exceed 0.667)"
    ) in html.unescape(response.content.decode())
    assert not Release.objects.exists()


def test_an_override_without_a_reason_is_refused(client, admin_user, tiny_run):
    report = report_with(tiny_run, figures(0.60, 0.70, 0.50, 0.40))
    client.force_login(admin_user)

    response = client.post(
        "/releases/new/",
        {
            "oracle_run": tiny_run.pk,
            "validation_report": report.pk,
            "override_reason": "   ",
        },
    )

    assert response.status_code == 400
    assert "override with a reason" in response.content.decode()
    assert not Release.objects.exists() and not PromotionOverride.objects.exists()


def test_an_override_with_a_reason_is_recorded_and_written_into_the_manifest(
    client, admin_user, tiny_run, release_dirs
):
    report = report_with(tiny_run, figures(0.60, 0.96, 0.90, 0.40))
    reason = "Offline rules Oracle for the demo; no LLM labels exist yet."
    client.force_login(admin_user)

    response = client.post(
        "/releases/new/",
        {
            "oracle_run": tiny_run.pk,
            "validation_report": report.pk,
            "override_reason": f"  {reason} ",
        },
    )

    assert response.status_code == 302
    release = Release.objects.get()
    override = PromotionOverride.objects.get()
    assert override.release_id == release.pk and override.report == report
    assert override.created_by == admin_user and override.reason == reason
    assert [f["key"] for f in override.failures] == ["status_macro_f1", "red_flags_f1"]
    release_build_task(release.pk)
    release.refresh_from_db()
    assert release.state == ReleaseState.READY, release.error
    manifest = json.loads(
        (release_dirs / release.directory / "manifest.json").read_text()
    )
    promotion = manifest["promotion"]
    assert promotion["override"]["reason"] == reason
    assert promotion["override"]["by"] == admin_user.get_username()
    assert promotion["override"]["at"] == override.created_at.isoformat()
    assert [f["key"] for f in promotion["failures"]] == [
        "status_macro_f1",
        "red_flags_f1",
    ]
    assert promotion["failures"][0]["figure"] == 0.60
    assert promotion["thresholds"]["values"]["status_macro_f1"] == 0.937


def test_thresholds_an_admin_sets_apply_and_others_cannot_set_them(
    client, admin_user, physician, tiny_run
):
    report = report_with(tiny_run, figures(0.80, 0.80, 0.70, 0.75))
    with pytest.raises(ValidationError):
        release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run)
    with pytest.raises(PermissionDenied):
        promotion_thresholds_set(user=physician, values=dict(DEFAULT_THRESHOLDS))
    bad = {**DEFAULT_THRESHOLDS, "red_flags_f1": 1.5, "status_macro_f1": "high"}
    with pytest.raises(ValidationError) as refused:
        promotion_thresholds_set(user=admin_user, values=bad)
    assert len(refused.value.messages) == 2
    assert not PromotionThresholds.objects.exists()

    promotion_thresholds_set(
        user=admin_user,
        values={
            "status_macro_f1": 0.8,
            "acute_problems_f1": 0.8,
            "recommended_actions_f1": 0.7,
            "red_flags_f1": 0.7,
        },
        note="pilot Gold set of 40 windows",
    )
    client.force_login(admin_user)
    body = client.get(f"/releases/new/?run={tiny_run.pk}").content.decode()
    assert "set by an admin" in body and "data-gate-failed" not in body

    release = release_create(
        user=admin_user,
        kind=ReleaseKind.SCALE,
        oracle_run=tiny_run,
        validation_report=report,
    )
    assert release.validation_report == report
    assert not PromotionOverride.objects.exists()


def test_the_command_line_refuses_below_the_thresholds_and_takes_an_override_reason(
    admin_user, tiny_run, release_dirs
):
    """build_release holds the CLI to the same gate as the promote page."""
    from io import StringIO

    from django.core.management import CommandError, call_command

    report_with(tiny_run, figures(0.60, 0.96, 0.90, 0.40))
    args = [
        "build_release",
        "--oracle-run",
        str(tiny_run.pk),
        "--user",
        admin_user.get_username(),
    ]
    with pytest.raises(
        CommandError, match="status macro-F1 0.600 is below the threshold"
    ):
        call_command(*args, stdout=StringIO(), stderr=StringIO())
    assert not Release.objects.exists() and not PromotionOverride.objects.exists()

    reason = "Pilot Scale release for the reading group; thresholds not reached yet."
    out = StringIO()
    call_command(*args, "--override-reason", reason, stdout=out, stderr=StringIO())
    release = Release.objects.get()
    assert release.state == ReleaseState.READY and "windows in" in out.getvalue()
    override = PromotionOverride.objects.get()
    assert override.release_id == release.pk and override.reason == reason
    manifest = json.loads(
        (release_dirs / release.directory / "manifest.json").read_text()
    )
    assert manifest["promotion"]["override"]["reason"] == reason


def test_the_command_line_refuses_an_override_reason_for_gold(admin_user):
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="for Scale releases"):
        call_command(
            "build_release",
            "--campaign",
            "1",
            "--user",
            admin_user.get_username(),
            "--override-reason",
            "x",
            stdout=StringIO(),
            stderr=StringIO(),
        )
