"""The Data use pages (issue 34): a researcher records a credential and an
endpoint attestation, an admin approves them; the audit log is an admin's
page, listing downloads, approvals and refused egress; bad input is refused
with the reason and writes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datause.models import Attestation, AuditEvent, AuditKind, Credential
from tests.datause.conftest import days
from windows.datasources import MIMIC_IV

pytestmark = pytest.mark.django_db


def _credential_form(**change) -> dict:
    form = {
        "source": MIMIC_IV,
        "physionet_username": "jdoe",
        "agreement_version": "PhysioNet Credentialed Health Data Use Agreement 1.5.0",
        "signed_on": days(-10).isoformat(),
        "expires_on": days(200).isoformat(),
    }
    form.update(change)
    return form


def test_a_researcher_records_a_credential_and_an_admin_approves_it(
    client, researcher, admin_user
):
    client.force_login(researcher)
    page = client.get(reverse("datause:data_use"))
    assert page.status_code == 200
    assert "MIMIC-IV" in page.content.decode()
    response = client.post(reverse("datause:credential_record"), _credential_form())
    assert response.status_code == 302
    credential = Credential.objects.get()
    assert credential.user == researcher and credential.state == "requested"

    # A researcher cannot approve (not even their own).
    approve = reverse("datause:credential_approve", args=[credential.pk])
    assert client.post(approve).status_code == 403
    client.force_login(admin_user)
    assert (
        "Awaiting your approval"
        in client.get(reverse("datause:data_use")).content.decode()
    )
    assert client.post(approve).status_code == 302
    credential.refresh_from_db()
    assert credential.state == "approved" and credential.approved_by == admin_user


def test_a_bad_credential_form_is_refused_and_writes_nothing(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("datause:credential_record"),
        _credential_form(expires_on=days(-5).isoformat()),
    )
    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert not Credential.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_researcher_attests_their_endpoint_and_cannot_attest_a_backbone(
    client, researcher
):
    client.force_login(researcher)
    form = {
        "address": "https://agent.example.org/predict",
        "source": MIMIC_IV,
        "purpose": "backbone",  # ignored: a researcher attests endpoints only
        "service": "My lab's inference server",
        "zero_retention": "on",
        "no_training": "on",
        "no_human_review": "on",
        "evidence_url": "https://lab.example.org/policy",
    }
    assert client.post(reverse("datause:attestation_record"), form).status_code == 302
    attestation = Attestation.objects.get()
    assert attestation.purpose == "endpoint" and attestation.host == "agent.example.org"
    assert attestation.state == "requested"

    del form["no_human_review"]
    response = client.post(reverse("datause:attestation_record"), form)
    assert response.status_code == 400
    assert "no human review" in response.content.decode()
    assert Attestation.objects.count() == 1


def test_the_audit_log_is_an_admins_page(client, researcher, admin_user, physician):
    client.force_login(researcher)
    assert client.get(reverse("datause:audit")).status_code == 403
    client.force_login(physician)
    assert client.get(reverse("datause:data_use")).status_code == 403
    client.force_login(admin_user)
    client.post(
        reverse("datause:credential_record"),
        _credential_form(username=researcher.username),
    )
    page = client.get(reverse("datause:audit"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "Credential recorded" in body and "Credential approved" in body
    filtered = client.get(
        reverse("datause:audit"), {"kind": AuditKind.CREDENTIAL_APPROVED}
    ).content.decode()
    assert "Credential approved" in filtered
    assert f"recorded {researcher.username}" not in filtered


def test_downloads_appear_in_the_audit_log(client, admin_user, tiny_release):
    client.force_login(admin_user)
    client.get(reverse("exports:release_file", args=[tiny_release.pk, "windows.jsonl"]))
    body = client.get(reverse("datause:audit")).content.decode()
    assert "windows.jsonl" in body and tiny_release.name in body


def test_the_nav_links_the_data_use_page(client, researcher):
    client.force_login(researcher)
    body = client.get(reverse("exports:release_list")).content.decode()
    assert reverse("datause:data_use") in body
