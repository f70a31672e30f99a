"""Where a backbone may send and what key it may send (issue 14 items 1 and 6),
each reproduction with its refusal and nothing written: an API key variable
the operator did not allow (at saving, and for a backbone saved before the
rule when a run starts or a chunk sends), metadata, link-local and the app's
own addresses as URLs, and an endpoint's body never shown on the run page."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from oracle import services
from oracle.backbones.endpoints import EndpointRefused, url_check
from oracle.backbones.openai_compat import BackboneConfigError
from oracle.models import Backbone, BackboneKind, OracleLabel, OracleRun
from tests.oracle.helpers import backbone_form_post, make_cohort_with_stay

pytestmark = pytest.mark.django_db

INTERNAL = "INTERNAL-ONLY db password=hunter2"


def openai_backbone(admin, fake, **fields):
    name = fields.pop("name", "fake")
    settings = {
        "base_url": fake.base_url,
        "model": "fake-model",
        "concurrency": 1,
        "requests_per_minute": 6000,
        "max_retries": 0,
    }
    settings.update(fields)
    return services.backbone_create(
        admin=admin, name=name, kind=BackboneKind.OPENAI, **settings
    )


# --- item 1: the key's variable ----------------------------------------------------


@pytest.mark.parametrize(
    "name", ["REALICU_VAR_DIR", "DJANGO_SECRET_KEY", "DATABASE_URL"]
)
def test_a_key_variable_the_operator_did_not_allow_is_refused(
    admin_user, fake_llm, name
):
    with pytest.raises(ValidationError) as error:
        openai_backbone(admin_user, fake_llm, api_key_env=name)
    message = " ".join(error.value.message_dict["api_key_env"])
    assert f"{name} is not one the operator allows" in message
    assert "REALICU_LLM_" in message
    assert not Backbone.objects.filter(kind=BackboneKind.OPENAI).exists()


def test_allowed_key_variables_follow_the_operators_setting(
    admin_user, fake_llm, settings
):
    openai_backbone(admin_user, fake_llm, name="a", api_key_env="REALICU_LLM_VLLM")
    openai_backbone(admin_user, fake_llm, name="b", api_key_env="OPENAI_API_KEY")
    settings.REALICU_LLM_KEY_ENV_PREFIXES = []
    settings.REALICU_LLM_KEY_ENV_NAMES = ["MY_GATEWAY_KEY"]
    openai_backbone(admin_user, fake_llm, name="c", api_key_env="MY_GATEWAY_KEY")
    with pytest.raises(ValidationError, match="not one the operator allows"):
        openai_backbone(admin_user, fake_llm, name="d", api_key_env="REALICU_LLM_VLLM")
    saved = Backbone.objects.filter(kind=BackboneKind.OPENAI).values_list(
        "name", flat=True
    )
    assert sorted(saved) == ["a", "b", "c"]


def test_the_form_shows_the_refusal_and_saves_nothing(client, admin_user):
    response = backbone_form_post(
        client,
        admin_user,
        name="leaky",
        base_url="http://127.0.0.1:8001/v1",
        api_key_env="REALICU_VAR_DIR",
    )
    assert response.status_code == 200
    assert "REALICU_VAR_DIR is not one the operator allows" in response.content.decode()
    assert not Backbone.objects.filter(name="leaky").exists()


def test_a_backbone_saved_before_the_rule_cannot_start_a_run(admin_user, fake_llm):
    cohort, _, _ = make_cohort_with_stay()
    backbone = openai_backbone(admin_user, fake_llm)
    # As an older version of the platform let it be saved.
    Backbone.objects.filter(pk=backbone.pk).update(api_key_env="DJANGO_SECRET_KEY")
    backbone.refresh_from_db()
    with pytest.raises(
        ValidationError, match="DJANGO_SECRET_KEY is not one the operator"
    ):
        services.oracle_run_create(
            admin=admin_user, name="r", backbone=backbone, cohort=cohort, enqueue=False
        )
    assert not OracleRun.objects.exists()


def test_a_run_whose_backbone_changed_to_a_refused_variable_sends_nothing(
    admin_user, fake_llm, monkeypatch
):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-secret-key")
    cohort, _, _ = make_cohort_with_stay()
    backbone = openai_backbone(admin_user, fake_llm)
    run = services.oracle_run_create(
        admin=admin_user, name="r", backbone=backbone, cohort=cohort, enqueue=False
    )
    Backbone.objects.filter(pk=backbone.pk).update(api_key_env="DJANGO_SECRET_KEY")
    with pytest.raises(BackboneConfigError, match="DJANGO_SECRET_KEY is not one"):
        services.oracle_run_execute_chunk(run_id=run.pk)
    assert fake_llm.requests == []
    assert not OracleLabel.objects.filter(run=run).exists()
    # Nor can it be resumed until the backbone is edited.
    services.oracle_run_cancel(admin=admin_user, run=run)
    with pytest.raises(ValidationError, match="Edit the backbone first"):
        services.oracle_run_resume(admin=admin_user, run=run, enqueue=False)
    run.refresh_from_db()
    assert run.state == "cancelled"


# --- item 6: where it may send ------------------------------------------------------


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://169.254.169.254/latest/meta-data", "metadata"),
        ("http://169.254.10.1:8000/v1", "link-local"),
        ("http://[fe80::1]:8000/v1", "link-local"),
        ("http://[::ffff:169.254.169.254]/v1", "metadata"),
        ("http://[fd00:ec2::254]/v1", "metadata"),
        ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
        ("http://127.0.0.1:8000/v1", "own address"),
        ("http://localhost:8000/v1", "own address"),
    ],
)
def test_metadata_link_local_and_the_apps_own_urls_are_refused(admin_user, url, why):
    with pytest.raises(ValidationError) as error:
        services.backbone_create(
            admin=admin_user,
            name="x",
            kind=BackboneKind.OPENAI,
            base_url=url,
            model="m",
        )
    assert why in " ".join(error.value.message_dict["base_url"])
    assert not Backbone.objects.filter(kind=BackboneKind.OPENAI).exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "http://10.0.0.5:8000/v1",
        "http://192.168.1.20/v1",
        "http://172.16.4.2:8000/v1",
        "http://[::1]:8080/v1",
        "https://api.openai.com/v1",
    ],
)
def test_loopback_private_and_public_llm_urls_are_allowed(url):
    url_check(url)


def test_the_page_refuses_the_host_it_is_served_on(client, admin_user):
    response = backbone_form_post(
        client, admin_user, name="self", base_url="http://testserver/v1"
    )
    assert "own address" in response.content.decode()
    assert not Backbone.objects.filter(name="self").exists()


def test_a_backbone_saved_with_a_metadata_url_cannot_start_a_run(admin_user, fake_llm):
    cohort, _, _ = make_cohort_with_stay()
    backbone = openai_backbone(admin_user, fake_llm)
    Backbone.objects.filter(pk=backbone.pk).update(
        base_url="http://169.254.169.254/latest"
    )
    backbone.refresh_from_db()
    with pytest.raises(ValidationError, match="cannot be used: 169.254.169.254"):
        services.oracle_run_create(
            admin=admin_user, name="r", backbone=backbone, cohort=cohort, enqueue=False
        )
    assert not OracleRun.objects.exists()
    with pytest.raises(EndpointRefused):
        url_check(backbone.base_url)


@pytest.mark.parametrize(
    "status, content_type, shown",
    [
        (200, "text/html", "not a chat completion (HTTP 200 (text/html))"),
        (403, "text/plain", "HTTP 403 (text/plain)"),
        (404, "application/json", "HTTP 404 (application/json)"),
    ],
)
def test_a_non_llm_response_is_reported_by_status_and_type_never_its_body(
    client, admin_user, fake_llm, status, content_type, shown
):
    cohort, _, windows = make_cohort_with_stay(hours=1.0)
    backbone = openai_backbone(admin_user, fake_llm)
    for _ in windows:
        fake_llm.push(
            status=status,
            headers={"Content-Type": content_type},
            body=f"<html>{INTERNAL}</html>",
        )
    run = services.oracle_run_create(
        admin=admin_user, name="r", backbone=backbone, cohort=cohort, enqueue=False
    )
    services.oracle_run_execute_inline(run_id=run.pk)
    labels = list(OracleLabel.objects.filter(run=run))
    assert labels and all(label.state == "failed" for label in labels)
    assert all(shown in label.error for label in labels)
    # Not one window labelled: the run failed, it did not complete.
    run.refresh_from_db()
    assert run.state == "failed" and "No window was labelled" in run.error
    assert all(INTERNAL not in label.error + label.raw_response for label in labels)
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert shown.split(" (")[0] in page or "HTTP" in page
    # Its failed windows are retried; labelled this time, it completes.
    assert services.oracle_run_retry_failed(admin=admin_user, run=run, enqueue=False)
    services.oracle_run_execute_inline(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == "completed" and run.error == ""
    assert "INTERNAL-ONLY" not in page and "hunter2" not in page
