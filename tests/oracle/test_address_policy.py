"""One address policy for an admin's backbones (issue 31 item 1): every form of
the platform's own address and of link-local / metadata addresses
(tests/oracle/address_forms.py) is refused when a backbone is saved, when a
run starts, and on every connection, also when the name's DNS answer changes
between the check and the connection (rebinding): the connection goes only to
the address checked. Loopback and private servers stay allowed for admins."""

from __future__ import annotations

import httpx
import pytest
from django.core.exceptions import ValidationError

from oracle import services
from oracle.backbones import http
from oracle.backbones.endpoints import EndpointRefused, Purpose, url_check
from oracle.context import window_contexts_build
from oracle.models import Backbone, BackboneKind, OracleRun
from tests.oracle.address_forms import (  # noqa: F401 - fixtures
    NOT_PUBLIC,
    OWN,
    PRIVATE_ANSWER,
    REFUSED_FOR_ALL,
    fake_dns,
    no_socket_opened,
)
from tests.oracle.helpers import (
    backbone_form_post,
    labeller,
    make_cohort_with_stay,
    openai_backbone,
    stable_stay,
    windows_of,
)

pytestmark = pytest.mark.django_db


def test_the_table_holds_every_form_the_issue_names():
    assert len(REFUSED_FOR_ALL) >= 30
    ids = {form.id for form in REFUSED_FOR_ALL}
    for needed in (
        "v4-mapped",
        "v4-mapped-hex",
        "v4-mapped-long",
        "v4-compatible",
        "nat64",
        "6to4",
        "ipv6-loopback",
        "ipv4-short",
        "ipv4-decimal",
        "ipv4-hex",
        "ipv4-octal",
        "service-web",
        "service-postgres",
        "service-redis",
        "service-worker",
        "service-housekeeping",
        "metadata",
        "link-local-v6",
        "metadata-aws-v6",
        "metadata-nat64",
        "metadata-6to4",
        "metadata-mapped",
    ):
        assert needed in ids


def _rebound_why(form) -> str:
    # The octal form cannot even be written as a URL; its address, answered by
    # a DNS name, is the app's own.
    return OWN if form.why == "cannot be read" else form.why


@pytest.mark.parametrize("form", REFUSED_FOR_ALL, ids=lambda form: form.id)
def test_a_backbone_on_the_app_or_metadata_is_refused_at_saving_run_and_request(
    admin_user, fake_dns, no_socket_opened, form
):
    # At saving: the form's reason, nothing written.
    with pytest.raises(ValidationError) as error:
        openai_backbone(
            admin_user,
            form.url,
            "x",
            model="m",
        )
    assert form.why in " ".join(error.value.message_dict["base_url"])
    assert not Backbone.objects.filter(kind=BackboneKind.OPENAI).exists()

    # At a run's start: a backbone saved before the rule (or under others).
    cohort, _, _ = make_cohort_with_stay(hours=1.0)
    backbone = openai_backbone(
        admin_user,
        f"http://{PRIVATE_ANSWER}:8080/v1",
        "older",
        model="m",
    )
    Backbone.objects.filter(pk=backbone.pk).update(base_url=form.url)
    backbone.refresh_from_db()
    with pytest.raises(ValidationError, match="cannot be used"):
        services.oracle_run_create(
            admin=admin_user, name="r", backbone=backbone, cohort=cohort, enqueue=False
        )
    assert not OracleRun.objects.exists()

    # On the connection, the URL as written.
    client = http.guarded_client(purpose=Purpose.BACKBONE, timeout_seconds=5)
    with pytest.raises((http.AddressRefused, httpx.InvalidURL)):
        http.request(client, "POST", form.url, deadline_seconds=5, max_bytes=1000)

    # On the connection, a name whose DNS answer changed since it was checked.
    rebound = f"http://rebind.example:{form.port}/v1"
    fake_dns.answer("rebind.example", PRIVATE_ANSWER, form.answer)
    url_check(rebound)
    with pytest.raises(http.AddressRefused) as refused:
        http.request(client, "POST", rebound, deadline_seconds=5, max_bytes=1000)
    assert _rebound_why(form) in str(refused.value)
    client.close()
    assert no_socket_opened == []


@pytest.mark.parametrize("form", NOT_PUBLIC, ids=lambda form: form.id)
def test_loopback_and_private_servers_stay_allowed_for_an_admins_backbone(
    admin_user, fake_dns, form
):
    backbone = openai_backbone(
        admin_user,
        form.url,
        "local",
        model="m",
    )
    assert backbone.pk
    url_check(form.url, purpose=Purpose.BACKBONE)
    with pytest.raises(EndpointRefused, match="not a public"):
        url_check(form.url, purpose=Purpose.ENDPOINT)


def test_one_refused_answer_among_good_ones_refuses_the_name(admin_user, fake_dns):
    fake_dns.answer("mixed.example", [PRIVATE_ANSWER, "169.254.169.254"])
    with pytest.raises(ValidationError, match="metadata"):
        openai_backbone(admin_user, "http://mixed.example:8080/v1", "mixed")


def test_the_apps_own_bind_address_follows_the_setting(admin_user, fake_dns, settings):
    settings.REALICU_APP_ADDRESSES = ["10.1.2.3:8443"]
    for url in ("http://10.1.2.3:8443/v1", "http://[::ffff:10.1.2.3]:8443/v1"):
        with pytest.raises(EndpointRefused, match="own address"):
            url_check(url)
    url_check("http://10.1.2.3:8080/v1")  # another server on that machine


@pytest.fixture
def contexts():
    stay = stable_stay(hours=2)
    return window_contexts_build(windows=windows_of(stay))


def test_the_oracle_connects_only_to_the_address_it_checked(
    fake_llm, fake_dns, contexts
):
    # The run's check sees the LLM server; by the connection the name points
    # at the metadata service: refused, nothing sent anywhere.
    fake_dns.answer("llm.example", "127.0.0.1", "169.254.169.254")
    url = f"http://llm.example:{fake_llm.port}/v1"
    results = labeller(url).label_many(contexts)
    assert results and not any(r.ok for r in results)
    assert all("refused when connecting" in r.error for r in results)
    assert all("metadata" in r.error for r in results)
    assert fake_llm.requests == []

    # A name that keeps its answer is connected at that address, with the
    # name as its Host.
    fake_dns.answer("llm.example", "127.0.0.1")
    results = labeller(url).label_many(contexts)
    assert results and all(r.ok for r in results)
    assert {
        r.headers.get("host") or r.headers.get("Host") for r in fake_llm.requests
    } == {f"llm.example:{fake_llm.port}"}


@pytest.mark.parametrize(
    "url", ["http://[::1/v1", "http://[::1]:99999/v1", "http://a\\@127.0.0.1:8000/"]
)
def test_an_unreadable_base_url_is_a_form_error(client, admin_user, url):
    response = backbone_form_post(client, admin_user, name="unreadable", base_url=url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "cannot be read" in html or "backslashes" in html
    assert not Backbone.objects.filter(name="unreadable").exists()
    with pytest.raises(ValidationError):
        services.backbone_create(
            admin=admin_user, name="x", kind=BackboneKind.OPENAI, base_url=url
        )
