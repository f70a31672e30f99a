"""The address policy when a backbone or an online-evaluation endpoint is saved
through the Django admin site (issue 31 item 1). The admin site shows both
read-only (they are edited on the Oracle and agents pages, through the services
that check them); and the check is the models' own (``clean_fields``), so an
admin made editable, or any other model form, refuses every form of the table
(tests/oracle/address_forms.py) with the policy's sentence and saves nothing."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.test import Client

from accounts.roles import Role
from agents.admin import OnlineEndpointAdmin
from agents.models import OnlineEndpoint
from oracle.admin import BackboneAdmin
from oracle.models import Backbone, BackboneKind
from tests.exports.conftest import (  # noqa: F401 - fixtures
    release_dirs,
    tiny_labels,
    tiny_release,
    tiny_run,
    tiny_stays,
)
from tests.factories import make_user
from tests.oracle.address_forms import (  # noqa: F401 - fixtures
    NOT_PUBLIC,
    PRIVATE_ANSWER,
    PUBLIC_ANSWER,
    REFUSED_FOR_ALL,
    fake_dns,
    no_socket_opened,
)

pytestmark = pytest.mark.django_db

DJANGO_URL_ERROR = "Enter a valid URL."


@pytest.fixture
def site(db) -> Client:
    client = Client()
    client.force_login(make_user(staff=True, is_superuser=True, role=Role.ADMIN))
    return client


@pytest.fixture
def editable(monkeypatch):
    """The two admins as ModelAdmin's defaults would make them: add and change
    allowed to a superuser."""
    for admin_class in (BackboneAdmin, OnlineEndpointAdmin):
        monkeypatch.setattr(
            admin_class, "has_add_permission", admin.ModelAdmin.has_add_permission
        )
        monkeypatch.setattr(
            admin_class, "has_change_permission", admin.ModelAdmin.has_change_permission
        )


def _expected(url: str, why: str) -> str:
    """Django's URL field refuses some forms (a host without a dot, a numeric
    host) before the address policy sees them: its sentence, else the
    policy's."""
    try:
        URLValidator()(url)
    except ValidationError:
        return DJANGO_URL_ERROR
    return why


def _backbone_post(url: str, name: str = "admin-made") -> dict:
    return {
        "name": name,
        "kind": BackboneKind.OPENAI,
        "base_url": url,
        "model": "m",
        "api_key_env": "",
        "parameters": "{}",
        "timeout_seconds": "120",
        "max_retries": "5",
        "concurrency": "16",
        "requests_per_minute": "600",
        "context_tokens": "",
        "max_completion_tokens": "",
        "reply_format": "json_object",
        "tokenizer": "",
        "server_report": "{}",
        "calibration": "{}",
        "price_per_million_input": "0",
        "price_per_million_output": "0",
        "created_by": "",
    }


def _endpoint_post(url: str, release, user, name: str = "admin-made") -> dict:
    return {
        "release": release.pk,
        "name": name,
        "url": url,
        "timeout_seconds": "30",
        "max_retries": "3",
        "requests_per_minute": "600",
        "context_mode": "streamed",
        "created_by": user.pk,
    }


def _errors_of(response) -> str:
    assert response.status_code == 200, response.status_code
    form = response.context["adminform"].form
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


def test_the_admin_site_adds_and_changes_no_backbone_and_no_endpoint(
    site, fake_dns, tiny_release, researcher
):
    backbone = Backbone.objects.create(
        name="b", kind=BackboneKind.OPENAI, base_url="http://10.0.0.5/v1", model="m"
    )
    endpoint = OnlineEndpoint.objects.create(
        release=tiny_release,
        name="e",
        url="https://agent.example/predict",
        created_by=researcher,
    )
    metadata = "http://169.254.169.254/v1"
    assert site.get("/admin/oracle/backbone/add/").status_code == 403
    assert site.post(
        "/admin/oracle/backbone/add/", _backbone_post(metadata)
    ).status_code == (403)
    assert (
        site.post(
            f"/admin/oracle/backbone/{backbone.pk}/change/",
            _backbone_post(metadata, name="b"),
        ).status_code
        == 403
    )
    assert site.get("/admin/agents/onlineendpoint/add/").status_code == 403
    assert (
        site.post(
            f"/admin/agents/onlineendpoint/{endpoint.pk}/change/",
            _endpoint_post(metadata, tiny_release, researcher, name="e"),
        ).status_code
        == 403
    )
    # Listed, with where they point.
    assert "http://10.0.0.5/v1" in site.get("/admin/oracle/backbone/").content.decode()
    listing = site.get("/admin/agents/onlineendpoint/").content.decode()
    assert "https://agent.example/predict" in listing
    backbone.refresh_from_db()
    endpoint.refresh_from_db()
    assert backbone.base_url == "http://10.0.0.5/v1"
    assert endpoint.url == "https://agent.example/predict"
    assert not Backbone.objects.filter(name="admin-made").exists()
    assert OnlineEndpoint.objects.count() == 1


@pytest.mark.parametrize("form", REFUSED_FOR_ALL, ids=lambda form: form.id)
def test_an_editable_admin_refuses_a_backbone_on_every_refused_form(
    site, editable, fake_dns, no_socket_opened, form
):
    # Added: the form's reason on the page, nothing saved.
    errors = _errors_of(
        site.post("/admin/oracle/backbone/add/", _backbone_post(form.url))
    )
    assert _expected(form.url, form.why) in errors, errors
    assert not Backbone.objects.filter(name="admin-made").exists()

    # Changed: a private LLM server's backbone keeps its URL.
    saved = Backbone.objects.create(
        name="private",
        kind=BackboneKind.OPENAI,
        base_url=f"http://{PRIVATE_ANSWER}:8080/v1",
        model="m",
    )
    errors = _errors_of(
        site.post(
            f"/admin/oracle/backbone/{saved.pk}/change/",
            _backbone_post(form.url, name="private"),
        )
    )
    assert _expected(form.url, form.why) in errors, errors
    saved.refresh_from_db()
    assert saved.base_url == f"http://{PRIVATE_ANSWER}:8080/v1"

    # A DNS name answering the form's address: the policy, whatever the spelling.
    fake_dns.answer("llm.example", form.answer)
    errors = _errors_of(
        site.post(
            "/admin/oracle/backbone/add/",
            _backbone_post(f"http://llm.example:{form.port}/v1"),
        )
    )
    assert (form.why if form.why != "cannot be read" else "own address") in errors
    assert not Backbone.objects.filter(name="admin-made").exists()
    assert no_socket_opened == []


@pytest.mark.parametrize("form", NOT_PUBLIC, ids=lambda form: form.id)
def test_an_editable_admin_saves_a_backbone_on_a_private_server(
    site, editable, fake_dns, form
):
    response = site.post("/admin/oracle/backbone/add/", _backbone_post(form.url))
    if _expected(form.url, "") == DJANGO_URL_ERROR:
        assert DJANGO_URL_ERROR in _errors_of(response)
        return
    assert response.status_code == 302, _errors_of(response)
    assert Backbone.objects.get(name="admin-made").base_url == form.url


@pytest.mark.parametrize("form", REFUSED_FOR_ALL + NOT_PUBLIC, ids=lambda f: f.id)
def test_an_editable_admin_refuses_an_endpoint_on_every_refused_form(
    site, editable, fake_dns, no_socket_opened, settings, tiny_release, researcher, form
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    errors = _errors_of(
        site.post(
            "/admin/agents/onlineendpoint/add/",
            _endpoint_post(form.url, tiny_release, researcher),
        )
    )
    assert _expected(form.url, form.why) in errors, errors
    fake_dns.answer("agent.example", form.answer)
    errors = _errors_of(
        site.post(
            "/admin/agents/onlineendpoint/add/",
            _endpoint_post(
                f"http://agent.example:{form.port}/predict", tiny_release, researcher
            ),
        )
    )
    assert "The endpoint's URL is refused" in errors, errors
    assert (form.why if form.why != "cannot be read" else "own address") in errors
    assert not OnlineEndpoint.objects.exists()
    assert no_socket_opened == []


def test_an_editable_admin_saves_an_endpoint_on_a_public_address(
    site, editable, fake_dns, settings, tiny_release, researcher
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    fake_dns.answer("agent.example", PUBLIC_ANSWER)
    url = "https://agent.example/predict"
    response = site.post(
        "/admin/agents/onlineendpoint/add/",
        _endpoint_post(url, tiny_release, researcher),
    )
    assert response.status_code == 302, _errors_of(response)
    assert OnlineEndpoint.objects.get().url == url


def test_a_model_form_checks_the_url_as_the_services_do(fake_dns, settings):
    """full_clean, which every model form runs: the policy's sentence for the
    URL, beside the fields' own errors."""
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    backbone = Backbone(
        name="", kind=BackboneKind.OPENAI, base_url="http://[::1]:6379/"
    )
    with pytest.raises(ValidationError) as error:
        backbone.full_clean()
    assert "own address" in " ".join(error.value.message_dict["base_url"])
    assert "name" in error.value.message_dict
    # A run's start calls clean() alone: the URL is its own check there.
    backbone.name = "x"
    backbone.model = "m"
    backbone.clean()
    endpoint = OnlineEndpoint(name="x", url="http://10.0.0.5/predict")
    with pytest.raises(ValidationError) as error:
        endpoint.full_clean(exclude=["release", "created_by"])
    assert "not a public address" in " ".join(error.value.message_dict["url"])
