"""Release access by credential (issue 34, item 3): a release built from
MIMIC-IV is listed and downloadable, on the pages and through the API, only
by researchers whose account records an approved, unexpired credential for
MIMIC-IV; everyone else gets 403 with the reason, and each download (or
refusal) is an audit line. The CLIF demo's releases stay open."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from datause import services
from datause.models import AuditEvent, AuditKind, Credential
from exports.services import token_create
from tests.datause.conftest import days
from windows.datasources import CLIF_DEMO, MIMIC_IV, data_source_get, stays_link

pytestmark = pytest.mark.django_db

AGREEMENT = "PhysioNet Credentialed Health Data Use Agreement 1.5.0"


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).key}")
    return client


def _pages(client, user):
    client.force_login(user)
    return client


def _record(user, *, actor=None, expires=365) -> Credential:
    return services.credential_record(
        actor=actor or user,
        user=user,
        source=data_source_get(MIMIC_IV),
        physionet_username="jdoe",
        agreement_version=AGREEMENT,
        signed_on=days(-30),
        expires_on=days(expires),
    )


def _statuses(client, api, release) -> dict:
    """What a user gets of ``release``: listed on the page and in the API,
    and the status of its page, a file page, and the API's detail, file and
    window records."""
    listed_page = (
        f"/releases/{release.pk}/"
        in client.get(reverse("exports:release_list")).content.decode()
    )
    listed_api = [r["id"] for r in api.get("/api/v1/releases/").json()["results"]]
    return {
        "listed": (listed_page, release.pk in listed_api),
        "page": client.get(
            reverse("exports:release_detail", args=[release.pk])
        ).status_code,
        "file": client.get(
            reverse("exports:release_file", args=[release.pk, "windows.jsonl"])
        ).status_code,
        "api": api.get(f"/api/v1/releases/{release.pk}/").status_code,
        "api_file": api.get(
            f"/api/v1/releases/{release.pk}/files/windows.jsonl"
        ).status_code,
        "api_windows": api.get(f"/api/v1/releases/{release.pk}/windows/").status_code,
    }


# The release's page, file and API answers, each refused (403) or served (200).
ANSWERS = ("page", "file", "api", "api_file", "api_windows")
REFUSED = {"listed": (False, False)} | dict.fromkeys(ANSWERS, 403)
ALLOWED = {"listed": (True, True)} | dict.fromkeys(ANSWERS, 200)


def test_the_release_of_mimic_iv_data_records_credentialed_terms(mimic_release):
    data_use = mimic_release.manifest["data_use"]
    assert data_use["terms"] == "credentialed"
    assert [s["key"] for s in data_use["sources"]] == [MIMIC_IV]
    assert data_use["sources"][0]["agreement"].startswith("PhysioNet Credentialed")
    assert any(
        "MIMIC-IV, a freely accessible" in c for c in data_use["required_citations"]
    )
    assert "PhysioNet credentialed access" in data_use["access"]


def test_a_researcher_without_a_credential_gets_403_and_once_approved_gets_it(
    client, mimic_release, researcher, admin_user
):
    pages, api = _pages(client, researcher), _api(researcher)
    assert _statuses(pages, api, mimic_release) == REFUSED
    refusal = api.get(f"/api/v1/releases/{mimic_release.pk}/").json()["detail"]
    assert "MIMIC-IV" in refusal and "credential" in refusal
    page = pages.get(reverse("exports:release_detail", args=[mimic_release.pk]))
    assert "PhysioNet credential" in page.content.decode()
    refused = AuditEvent.objects.filter(kind=AuditKind.DOWNLOAD_REFUSED)
    assert refused.count() == 2  # the file page and the API's file
    assert set(refused.values_list("actor_name", "release_id", "file_path")) == {
        (researcher.username, mimic_release.pk, "windows.jsonl")
    }

    # Recorded by the researcher: waits for an admin.
    credential = _record(researcher)
    assert credential.state == "requested"
    assert _statuses(pages, api, mimic_release) == REFUSED

    services.credential_approve(admin=admin_user, credential=credential)
    assert _statuses(pages, api, mimic_release) == ALLOWED
    downloads = AuditEvent.objects.filter(kind=AuditKind.DOWNLOAD)
    assert (
        list(downloads.values_list("actor_name", "release_name", "file_path"))
        == [(researcher.username, mimic_release.name, "windows.jsonl")] * 2
    )
    kinds = set(AuditEvent.objects.values_list("kind", flat=True))
    assert {AuditKind.CREDENTIAL_RECORDED, AuditKind.CREDENTIAL_APPROVED} <= kinds


def test_an_expired_credential_is_refused_again(
    client, mimic_release, researcher, admin_user
):
    credential = _record(researcher, actor=admin_user)  # an admin's: approved at once
    assert credential.state == "approved"
    pages, api = _pages(client, researcher), _api(researcher)
    assert _statuses(pages, api, mimic_release) == ALLOWED

    # The expiry passes.
    Credential.objects.filter(pk=credential.pk).update(expires_on=days(-1))
    assert _statuses(pages, api, mimic_release) == REFUSED


def test_a_revoked_credential_is_refused_and_logged(
    client, mimic_release, researcher, admin_user
):
    credential = _record(researcher, actor=admin_user)
    services.credential_revoke(actor=admin_user, credential=credential)
    assert (
        _statuses(_pages(client, researcher), _api(researcher), mimic_release)
        == REFUSED
    )
    assert AuditEvent.objects.filter(kind=AuditKind.CREDENTIAL_REVOKED).count() == 1


def test_a_credential_for_another_source_does_not_open_it(
    client, mimic_release, researcher, admin_user
):
    services.credential_record(
        actor=admin_user,
        user=researcher,
        source=data_source_get("mimic-iv-note"),
        physionet_username="jdoe",
        agreement_version=AGREEMENT,
        signed_on=days(-1),
        expires_on=days(30),
    )
    assert (
        _statuses(_pages(client, researcher), _api(researcher), mimic_release)
        == REFUSED
    )


def test_admins_see_every_release_and_their_downloads_are_logged(
    client, mimic_release, admin_user
):
    assert (
        _statuses(_pages(client, admin_user), _api(admin_user), mimic_release)
        == ALLOWED
    )
    assert (
        AuditEvent.objects.filter(
            kind=AuditKind.DOWNLOAD, actor_name=admin_user.username
        ).count()
        == 2
    )


def test_the_clif_demos_releases_stay_open(client, tiny_release, researcher):
    assert tiny_release.manifest["data_use"]["terms"] == "open"
    assert [s["key"] for s in tiny_release.manifest["data_use"]["sources"]] == [
        CLIF_DEMO
    ]
    assert (
        _statuses(_pages(client, researcher), _api(researcher), tiny_release) == ALLOWED
    )


def test_a_mixed_release_takes_the_strictest_terms(admin_user, tiny_stays, tiny_labels):
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create
    from tests.exports.helpers import make_oracle_run

    a, b, c = tiny_stays["stays"]
    stays_link(stay_ids=[a.pk], keys=[CLIF_DEMO])
    stays_link(stay_ids=[b.pk], keys=[MIMIC_IV])
    stays_link(stay_ids=[c.pk], keys=["site"])
    run = make_oracle_run(admin=admin_user, labels=tiny_labels, name="mixed")
    release = release_build(
        release=release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    data_use = release.manifest["data_use"]
    assert data_use["terms"] == "restricted"
    assert [s["key"] for s in data_use["sources"]] == ["site", MIMIC_IV, CLIF_DEMO]


def test_the_manifest_file_and_data_card_state_terms_and_citations(
    client, mimic_release, admin_user, release_dirs
):
    folder = release_dirs / mimic_release.directory
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["data_use"]["terms"] == "credentialed"
    card = (folder / "DATACARD.md").read_text()
    assert "## Data use" in card
    assert "Credentialed (PhysioNet)" in card
    assert "PhysioNet Credentialed Health Data License 1.5.0" in card
    assert "MIMIC-IV, a freely accessible electronic health record dataset" in card


@pytest.mark.parametrize(
    "change, message",
    [
        ({"physionet_username": ""}, "PhysioNet username"),
        ({"physionet_username": "bad name!"}, "letters, digits"),
        ({"agreement_version": ""}, "agreement"),
        ({"signed_on": "yesterday"}, "date"),
        ({"signed_on": days(2)}, "future"),
        ({"expires_on": days(-1)}, "expired"),
        ({"source": "clif-demo"}, "open data"),
    ],
)
def test_a_bad_credential_is_refused_with_the_reason_and_nothing_written(
    researcher, change, message
):
    fields = {
        "source": data_source_get(MIMIC_IV),
        "physionet_username": "jdoe",
        "agreement_version": AGREEMENT,
        "signed_on": days(-1),
        "expires_on": days(30),
    }
    if change.get("source"):
        change = {"source": data_source_get(change["source"])}
    fields.update(change)
    with pytest.raises(ValidationError) as refused:
        services.credential_record(actor=researcher, user=researcher, **fields)
    assert message in " ".join(refused.value.messages)
    assert not Credential.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_researcher_cannot_record_or_approve_anothers_credential(
    researcher, second_researcher
):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        _record(second_researcher, actor=researcher)
    credential = _record(second_researcher)
    with pytest.raises(PermissionDenied):
        services.credential_approve(admin=researcher, credential=credential)
    assert Credential.objects.get().approved_at is None
