"""The researcher REST API: who gets in (researchers and admins by token; a
physician 403, no token 401), what a researcher can reach (releases only),
pagination and filters, downloads with ETag and Range, submissions through
the API, throttling, and the OpenAPI schema (valid, and schemathesis finds no
server error)."""

import hashlib
import io
import json
import re

import pytest
from rest_framework.test import APIClient

from exports.models import ApiToken, Submission
from exports.services import token_create
from exports.tokens import token_store
from tests.exports.helpers import delirium_line

pytestmark = pytest.mark.django_db


def _client(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).key}")
    return client


def test_no_token_is_401(tiny_release):
    response = APIClient().get("/api/v1/releases/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


def test_a_physicians_token_is_refused(tiny_release, physician):
    token = token_store(user=physician)  # as if made before a role change
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    for url in (
        "/api/v1/releases/",
        f"/api/v1/releases/{tiny_release.pk}/windows/",
        f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl",
    ):
        assert client.get(url).status_code == 403, url


def test_a_physician_cannot_make_a_token(physician):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        token_create(user=physician)
    assert not ApiToken.objects.exists()


def test_researcher_lists_releases_with_manifests(tiny_release, researcher):
    body = _client(researcher).get("/api/v1/releases/").json()
    assert body["count"] == 1
    release = body["results"][0]
    assert release["name"] == "realicu-scale-v1"
    assert release["manifest"]["counts"]["windows"] == 4
    assert {"windows.jsonl", "manifest.json"} <= {f["path"] for f in release["files"]}


def test_researcher_token_reaches_nothing_outside_releases(tiny_release, researcher):
    client = _client(researcher)
    stay = tiny_release.window_records.first().stay_id
    for url in (
        "/stays/",
        f"/stays/{stay}/",
        "/annotate/",
        "/annotate/campaigns/",
        "/imports/",
        "/admin/",
        "/admin/annotation/label/",
    ):
        response = client.get(url)
        # Token authentication is the API's only: every page answers as to an
        # anonymous visitor (login redirect) or hides itself.
        assert response.status_code in (302, 404), (url, response.status_code)
        if response.status_code == 302:
            assert "/login/" in response["Location"]


def test_window_records_page_and_filter(tiny_release, tiny_stays, researcher):
    client = _client(researcher)
    url = f"/api/v1/releases/{tiny_release.pk}/windows/"
    first = client.get(url, {"page_size": 3}).json()
    assert first["count"] == 4 and len(first["results"]) == 3 and first["next"]
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 1 and second["next"] is None
    ids = [r["window_id"] for r in first["results"] + second["results"]]
    assert len(set(ids)) == 4
    a = tiny_stays["stays"][0]
    by_stay = client.get(url, {"stay_id": a.pk}).json()
    assert [r["record"]["window_index"] for r in by_stay["results"]] == [0, 1]
    late = client.get(url, {"stay_id": a.pk, "hours_min": 1, "hours_max": 3}).json()
    assert [r["hours_since_admit"] for r in late["results"]] == [2.0]
    neuro = client.get(url, {"disease_group": "neurological"}).json()
    assert neuro["count"] == 1
    bad = client.get(url, {"disease_group": "nonsense", "hours_min": "x"})
    assert bad.status_code == 400 and "hours_min" in bad.json()


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_download_with_etag_and_range(tiny_release, researcher, release_dirs):
    client = _client(researcher)
    url = f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl"
    whole = (release_dirs / tiny_release.directory / "windows.jsonl").read_bytes()
    response = client.get(url)
    assert response.status_code == 200
    assert _body(response) == whole
    etag = response["ETag"]
    assert etag == f'"{hashlib.sha256(whole).hexdigest()}"'
    assert response["Accept-Ranges"] == "bytes"

    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304

    part = client.get(url, HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 10-19/{len(whole)}"
    assert _body(part) == whole[10:20]
    tail = client.get(url, HTTP_RANGE="bytes=-5")
    assert tail.status_code == 206 and _body(tail) == whole[-5:]
    open_end = client.get(url, HTTP_RANGE=f"bytes={len(whole) - 3}-")
    assert _body(open_end) == whole[-3:]

    beyond = client.get(url, HTTP_RANGE=f"bytes={len(whole)}-")
    assert beyond.status_code == 416
    assert beyond["Content-Range"] == f"bytes */{len(whole)}"
    # A Range for another version of the file (If-Range) gets the whole file.
    other = client.get(url, HTTP_RANGE="bytes=0-1", HTTP_IF_RANGE='"stale"')
    assert other.status_code == 200 and _body(other) == whole

    context = client.get(
        f"/api/v1/releases/{tiny_release.pk}/files/context/{tiny_release.window_records.first().stay_id}.jsonl"
    )
    assert context.status_code == 200
    for path in ("../manifest.json", "nothing.txt", "context/../../x"):
        assert (
            client.get(f"/api/v1/releases/{tiny_release.pk}/files/{path}").status_code
            == 404
        )


def test_submission_through_the_api_is_validated_and_readable(
    tiny_release, tiny_stays, researcher, admin_user
):
    client = _client(researcher)
    url = f"/api/v1/releases/{tiny_release.pk}/submissions/"
    bad = io.BytesIO(b'{"window_id": 1}\nnot json\n')
    bad.name = "p.jsonl"
    response = client.post(url, {"file": bad, "model_name": "m"}, format="multipart")
    assert response.status_code == 400
    assert any("line 2: not valid JSON" in m for m in response.json()["detail"])
    assert not Submission.objects.exists()

    good = io.BytesIO(delirium_line(tiny_stays))
    good.name = "p.jsonl"
    response = client.post(
        url, {"file": good, "model_name": "m", "k": 3}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["k"] == 3 and created["prediction_count"] == 1
    mine = client.get(f"/api/v1/submissions/{created['id']}/")
    assert mine.status_code == 200
    assert client.get(url).json()["count"] == 1
    # Another researcher sees neither the submission nor its scores.
    from accounts.roles import Role
    from tests.annotation.conftest import make_role_user

    other = _client(make_role_user(Role.RESEARCHER))
    assert other.get(f"/api/v1/submissions/{created['id']}/").status_code == 404
    assert other.get(url).json()["count"] == 0
    assert (
        other.post(
            f"/api/v1/submissions/{created['id']}/publish/", {"public": True}
        ).status_code
        == 404
    )


def test_throttling_is_per_token(tiny_release, researcher, admin_user, monkeypatch):
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(
        ScopedRateThrottle,
        "THROTTLE_RATES",
        {**ScopedRateThrottle.THROTTLE_RATES, "releases": "2/min"},
    )
    from django.core.cache import cache

    cache.clear()
    client, other = _client(researcher), _client(admin_user)
    codes = [client.get("/api/v1/releases/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert other.get("/api/v1/releases/").status_code == 200
    cache.clear()


def test_openapi_schema_is_valid(client):
    from drf_spectacular.validation import validate_schema

    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate_schema(schema)  # raises on an invalid OpenAPI 3 document
    assert "/api/v1/releases/{release_id}/files/{file_path}" in schema["paths"]
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_docs_page_is_swagger_ui_served_offline_with_no_inline_script(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    # The plain name, or the hashed one once collectstatic has run (var/).
    assert re.search(
        r"/static/drf_spectacular_sidecar/swagger-ui-dist/"
        r"swagger-ui-bundle(\.[0-9a-f]{12})?\.js",
        html,
    )
    assert "cdn" not in html.lower() and "https://" not in html
    # Every script has a src (the CSP allows no inline script): the set-up one
    # is served from the page's own address.
    assert html.count("<script") == html.count("<script src=") == 3
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert '"/api/schema/"' in script.content.decode()
    assert '"validatorUrl": null' in script.content.decode()


def test_schemathesis_finds_no_server_error(tiny_release, researcher, admin_user):
    import schemathesis
    from django.core import signals
    from django.db import close_old_connections

    from realicu_web.wsgi import application

    # As Django's test client does: the WSGI handler would otherwise close the
    # test's database connection at the end of each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        _schemathesis_run(schemathesis, application, token_create(user=researcher).key)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _schemathesis_run(schemathesis, application, key):
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.from_wsgi("/api/schema/?format=json", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 10
    for operation in operations:

        @settings(
            max_examples=12,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
        @given(case=operation.as_strategy())
        def run(case):
            response = case.call_wsgi(headers={"Authorization": f"Token {key}"})
            case.validate_response(response, checks=(not_a_server_error,))

        run()


def test_a_researcher_who_also_rates_is_refused_while_a_window_is_open(
    tiny_release, tiny_stays, researcher, admin_user
):
    """A Gold release may hold a co-rater's items on a window the researcher
    still rates as a physician (annotation.blindness): no release reads until
    every window they rate is closed."""
    from accounts.roles import Role, roles_ensure
    from annotation.models import AssignmentState
    from annotation.services import campaign_create
    from tests.factories import make_user

    client = _client(researcher)
    assert client.get("/api/v1/releases/").status_code == 200
    researcher.groups.add(roles_ensure()[Role.PHYSICIAN])
    researcher = type(researcher).objects.get(pk=researcher.pk)  # roles are cached
    other = make_user(role=Role.PHYSICIAN)
    window = tiny_stays["windows"]["A"][0]
    type(window).objects.filter(pk=window.pk).update(sampled_gold=True)
    campaign = campaign_create(
        admin=admin_user,
        name="blind",
        windows=[window.pk],
        physicians=[researcher, other],
    )
    for url in (
        "/api/v1/releases/",
        f"/api/v1/releases/{tiny_release.pk}/windows/",
        f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl",
    ):
        assert client.get(url).status_code == 403, url
    # once their label is submitted and the window closed, reads return
    campaign.assignments.filter(annotator=researcher).update(
        state=AssignmentState.SUBMITTED
    )
    campaign.campaign_windows.update(closed_at=campaign.created_at)
    assert client.get("/api/v1/releases/").status_code == 200


def test_the_schema_and_docs_are_public_and_hold_nothing_of_the_data(
    client, tiny_release, admin_user
):
    """A decision (README "Threat model"): /api/schema/ and /api/docs/ answer
    anyone, as the documentation of the researchers' public API. The schema is
    the same document for anyone, signed in or not, names no release or user,
    and every operation in it asks for a token, which the API enforces."""
    anonymous = client.get("/api/schema/?format=json")
    assert anonymous.status_code == 200
    assert client.get("/api/docs/").status_code == 200
    signed_in = type(client)()
    signed_in.force_login(admin_user)
    assert signed_in.get("/api/schema/?format=json").content == anonymous.content
    text = anonymous.content.decode()
    assert tiny_release.name not in text and admin_user.username not in text
    schema = json.loads(text)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["security"] == [{"tokenAuth": []}], (method, path)
    assert client.get("/api/v1/releases/").status_code == 401
