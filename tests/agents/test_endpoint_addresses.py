"""Where a researcher's online-evaluation endpoint (and an agent's backbone)
may connect (issue 31 item 1): every form of the platform's own address and of
link-local / metadata addresses (tests/oracle/address_forms.py), and for
endpoints every non-public address, is refused at registering, at a run's
start and on every connection, also when the name's DNS answer changes after
the check (rebinding); the connection goes to the address checked, with the
name as its Host. Whatever fails before a usable reply is one sentence for the
researcher (no port mapping); the admin sees what happened. And the 500s of the
issue: a backbone id that is not a number, an unreadable or 100,000-character
URL, are 4xx with nothing saved."""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from agents.base import AgentError, WindowContext
from agents.llm import ChatClient
from agents.models import AgentPrediction, AgentRun, OnlineEndpoint
from agents.remote import UNREACHABLE, RemoteAgent
from agents.services import (
    agent_run_cancel,
    agent_run_resume,
    agent_run_start,
    endpoint_register,
    online_eval_start,
)
from oracle.backbones import http
from oracle.backbones.endpoints import Purpose, url_check
from oracle.models import Backbone
from tests.agents.helpers import endpoint_refused, online_eval_inline
from tests.oracle.address_forms import (  # noqa: F401 - fixtures
    NOT_PUBLIC,
    PRIVATE_ANSWER,
    PUBLIC_ANSWER,
    REFUSED_FOR_ALL,
    fake_dns,
    no_socket_opened,
)
from tests.oracle.slow_server import SlowServer


def a_window() -> WindowContext:
    start = datetime(2024, 1, 1, 10, tzinfo=UTC)
    return WindowContext(
        stay_id=1,
        window_id=1,
        window_index=0,
        start=start,
        end=start + timedelta(minutes=30),
        hours_since_admission=0.5,
        events=(),
        static={},
    )


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the table: at registering and at a run's start -------------------------------


@pytest.mark.django_db
def test_every_refused_form_is_refused_at_registering_and_at_a_runs_start(
    researcher, admin_user, tiny_release, fake_backbone, fake_dns, settings
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    fake_dns.answer("agent.example", PUBLIC_ANSWER)
    registered = endpoint_register(
        user=researcher,
        release=tiny_release,
        name="mine",
        url="http://agent.example/predict",
    )
    problems = []
    for form in REFUSED_FOR_ALL + NOT_PUBLIC:
        # At registering: the form's reason, nothing saved.
        try:
            endpoint_register(
                user=researcher, release=tiny_release, name=form.id, url=form.url
            )
            problems.append(f"{form.id}: registered")
        except ValidationError as error:
            if form.why not in " ".join(error.messages):
                problems.append(f"{form.id}: {error.messages}")
        # At a run's start: an endpoint saved before the rule (or under others).
        OnlineEndpoint.objects.filter(pk=registered.pk).update(url=form.url)
        registered.refresh_from_db()
        try:
            online_eval_start(user=researcher, endpoint=registered, enqueue=False)
            problems.append(f"{form.id}: endpoint run started")
        except ValidationError as error:
            if form.why not in " ".join(error.messages):
                problems.append(f"{form.id} at run: {error.messages}")
        try:
            RemoteAgent(url=form.url).predict(a_window(), {})
            problems.append(f"{form.id}: the agent sent")
        except AgentError as error:
            if "URL is refused" not in str(error):
                problems.append(f"{form.id} at the agent's start: {error}")
    # A reference agent's backbone saved before the rule.
    for form in REFUSED_FOR_ALL:
        Backbone.objects.filter(pk=fake_backbone.pk).update(base_url=form.url)
        fake_backbone.refresh_from_db()
        try:
            agent_run_start(
                user=admin_user,
                release=tiny_release,
                agent="local-window",
                backbone=fake_backbone,
                enqueue=False,
            )
            problems.append(f"{form.id}: agent run started")
        except ValidationError as error:
            if "cannot be used" not in " ".join(error.messages):
                problems.append(f"{form.id} agent run: {error.messages}")
    assert not problems, "\n".join(problems)
    assert OnlineEndpoint.objects.count() == 1
    assert not AgentRun.objects.exists()


# --- the table: on every connection --------------------------------------------


@pytest.mark.parametrize("form", REFUSED_FOR_ALL + NOT_PUBLIC, ids=lambda f: f.id)
def test_every_refused_form_is_refused_on_the_connection_also_after_rebinding(
    fake_dns, no_socket_opened, settings, form
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    client = http.guarded_client(purpose=Purpose.ENDPOINT, timeout_seconds=5)
    with pytest.raises((http.AddressRefused, httpx.InvalidURL)):
        http.request(client, "POST", form.url, deadline_seconds=5, max_bytes=1000)
    # Public when registered and when the run started; the form's address by
    # the connection.
    rebound = f"http://rebind.example:{form.port}/predict"
    fake_dns.answer("rebind.example", PUBLIC_ANSWER, PUBLIC_ANSWER, form.answer)
    url_check(rebound, purpose=Purpose.ENDPOINT)
    url_check(rebound, purpose=Purpose.ENDPOINT)
    with pytest.raises(http.AddressRefused):
        http.request(client, "POST", rebound, deadline_seconds=5, max_bytes=1000)
    client.close()
    assert no_socket_opened == []


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_endpoint_rebinds_to_loopback_sends_nothing(
    researcher, tiny_release, endpoint, fake_dns, settings
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    url = f"http://agent.example:{endpoint.port}/predict"
    # Public at registering, at the run's start and at the agent's start; then
    # the name points at this machine, where the endpoint server listens.
    fake_dns.answer("agent.example", *[PUBLIC_ANSWER] * 3, "127.0.0.1")
    run = online_eval_inline(
        user=researcher, release=tiny_release, name="rebinding", url=url
    )
    # The first stay's agent checked a public answer, then its connections met
    # loopback: refused, in the researcher's one sentence. The later stays'
    # agents are refused already at their own start.
    predictions = list(AgentPrediction.objects.filter(run=run).order_by("pk"))
    assert len(predictions) == 4 and predictions[0].error == UNREACHABLE
    assert "not a public address" in predictions[0].error_detail
    for prediction in predictions:
        assert prediction.error == UNREACHABLE or prediction.error.startswith(
            "The endpoint's URL is refused"
        )
    assert endpoint.received == []


@pytest.mark.django_db
def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    endpoint, fake_dns
):
    port = endpoint.port
    fake_dns.answer("agent.example", "127.0.0.1")  # loopback allowed (conftest)
    agent = RemoteAgent(url=f"http://agent.example:{port}/predict")
    prediction, _ = agent.predict(a_window(), {})
    agent.close()
    assert prediction["status"] == "stable"
    (received,) = endpoint.received
    assert received["headers"]["Host"] == f"agent.example:{port}"


@pytest.mark.django_db
def test_one_refused_answer_among_public_ones_refuses_the_endpoint(
    researcher, tiny_release, fake_dns, settings
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []
    fake_dns.answer("agent.example", [PUBLIC_ANSWER, "127.0.0.1"])
    endpoint_refused(
        "not a public address",
        user=researcher,
        release=tiny_release,
        name="mixed",
        url="http://agent.example/predict",
    )


@pytest.mark.django_db
def test_an_allowed_network_opens_to_endpoints_but_never_the_platform(
    researcher, tiny_release, fake_dns, settings
):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = ["10.0.0.0/8", "127.0.0.0/8"]
    endpoint_register(
        user=researcher,
        release=tiny_release,
        name="lab",
        url="http://10.0.0.5:8000/predict",
    )
    for url in (
        "http://127.0.0.1:8000/predict",
        "http://127.0.0.1:5432/",
        "http://169.254.169.254/",
    ):
        with pytest.raises(ValidationError, match="own address|metadata"):
            endpoint_register(user=researcher, release=tiny_release, name="x", url=url)
    assert OnlineEndpoint.objects.count() == 1


@pytest.mark.django_db
def test_an_agents_backbone_rebinding_to_metadata_sends_nothing(
    fake_llm, fake_dns, no_socket_opened
):
    fake_dns.answer("llm.example", "127.0.0.1", "169.254.169.254")
    chat = ChatClient(
        base_url=f"http://llm.example:{fake_llm.port}/v1", model="m", max_retries=0
    )
    chat._open()  # the run's check: the LLM server on loopback
    with pytest.raises(AgentError, match="refused when connecting.*metadata"):
        chat.chat([{"role": "user", "content": "hello"}])
    assert fake_llm.requests == [] and no_socket_opened == []


# --- one sentence for every failure to reach an endpoint ---------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Resetter:
    """Accepts a connection and resets it at once."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        import struct

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            conn.close()

    def stop(self):
        self.sock.close()


@pytest.mark.django_db
def test_every_failure_to_reach_an_endpoint_reads_the_same(endpoint):
    silent = SlowServer(mode="late", interval=3.0).start()
    huge = SlowServer(mode="huge", size=5_000_000).start()
    resetter = _Resetter()
    port = endpoint.port
    endpoint.replies += [
        (404, {"detail": "not found"}, {}),
        (500, {"detail": "boom"}, {}),
        (302, {}, {"Location": "http://127.0.0.1:5432/"}),
    ]
    urls = {
        "closed port": f"http://127.0.0.1:{_closed_port()}/predict",
        "reset": f"http://127.0.0.1:{resetter.port}/predict",
        "timeout": silent.url,
        "404": f"http://127.0.0.1:{port}/predict",
        "500": f"http://127.0.0.1:{port}/predict",
        "redirect": f"http://127.0.0.1:{port}/predict",
        "too long": huge.url,
    }
    errors, details = {}, {}
    try:
        for what, url in urls.items():
            agent = RemoteAgent(url=url, timeout_seconds=1.0, max_retries=0)
            with pytest.raises(AgentError) as error:
                agent.predict(a_window(), {})
            agent.close()
            errors[what], details[what] = str(error.value), error.value.detail
    finally:
        silent.stop()
        huge.stop()
        resetter.stop()
    assert set(errors.values()) == {UNREACHABLE}, errors
    assert all(details.values()), details
    assert "HTTP 404" in details["404"] and "HTTP 500" in details["500"]
    assert "within 1 s" in details["timeout"]
    assert "5,000,000" in details["too long"]


class _Filtered:
    """A port that answers no connection, as behind a firewall that drops
    them: a listener whose one-place queue is full, so the kernel drops the
    SYNs of later connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.queued = socket.create_connection(("127.0.0.1", self.port), timeout=2)

    def stop(self):
        self.queued.close()
        self.sock.close()


@pytest.mark.django_db
def test_a_closed_and_a_filtered_port_end_alike_in_text_and_time(monkeypatch):
    """A closed port refuses at once, a filtered one never answers: both are
    reported when the connection's time is up (1 s here), in the same
    sentence, so a run's pace does not tell them apart."""
    monkeypatch.setattr(http, "ENDPOINT_CONNECT_SECONDS", 1.0)
    filtered = _Filtered()
    urls = {
        "closed": f"http://127.0.0.1:{_closed_port()}/predict",
        "filtered": f"http://127.0.0.1:{filtered.port}/predict",
    }
    took, said = {}, {}
    try:
        for what, url in urls.items():
            agent = RemoteAgent(url=url, timeout_seconds=30.0, max_retries=0)
            started = time.monotonic()
            with pytest.raises(AgentError) as error:
                agent.predict(a_window(), {})
            took[what] = time.monotonic() - started
            said[what] = str(error.value)
            agent.close()
    finally:
        filtered.stop()
    assert said == {"closed": UNREACHABLE, "filtered": UNREACHABLE}
    # Not sooner than the connection's second (the closed port's refusal came
    # at once), and not the request's 30 s: the connection has its own bound.
    assert all(0.95 <= seconds < 25 for seconds in took.values()), took


@pytest.mark.django_db(transaction=True)
def test_the_researcher_reads_one_sentence_the_admin_reads_what_happened(
    researcher, admin_user, tiny_release, endpoint
):
    endpoint.replies += [(404, {"detail": "port 5432 is open"}, {})] * 4
    run = online_eval_inline(
        user=researcher,
        release=tiny_release,
        name="missing",
        url=endpoint.url,
        max_retries=0,
    )
    mine = client_for(researcher).get(f"/agents/runs/{run.pk}/").content.decode()
    assert "no usable reply" in mine and "HTTP 404" not in mine
    assert "5432" not in mine
    theirs = client_for(admin_user).get(f"/agents/runs/{run.pk}/").content.decode()
    assert "HTTP 404 (application/json)" in theirs
    assert "5432" not in theirs  # the body is never shown


# --- the 500s of the issue ------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("posted", ["abc", "-1", "1.5", "9" * 30, "١"])
def test_a_backbone_that_is_not_an_id_is_a_form_error(admin_user, tiny_release, posted):
    response = client_for(admin_user).post(
        "/agents/runs/start/",
        {"agent": "rag", "release": tiny_release.pk, "backbone": posted},
    )
    assert response.status_code == 400
    assert "Choose a backbone from the list." in response.content.decode()
    assert not AgentRun.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, said",
    [
        ("http://[::1/", "cannot be read"),
        ("http://[::1]:99999/", "cannot be read"),
        ("http://" + "a" * 99_984 + ".example/", "100,000 characters long"),
        ("http://agent.example/\x00", "control characters"),
    ],
    ids=["open-bracket", "port-range", "100k-characters", "nul"],
)
def test_an_unreadable_or_overlong_endpoint_url_is_a_form_error(
    researcher, tiny_release, url, said
):
    response = client_for(researcher).post(
        "/agents/endpoints/start/",
        {"release": tiny_release.pk, "name": "mine", "url": url},
    )
    assert response.status_code == 400
    # A NUL in any form field is refused before the view runs
    # (realicu_web.middleware.RequestHygieneMiddleware); the service says its
    # own sentence below.
    page_says = "NUL character" if "\x00" in url else said
    assert page_says in response.content.decode()
    assert not OnlineEndpoint.objects.exists() and not AgentRun.objects.exists()
    with pytest.raises(ValidationError, match=said):
        endpoint_register(user=researcher, release=tiny_release, name="x", url=url)


@pytest.mark.django_db
def test_an_endpoint_name_with_a_nul_byte_is_a_form_error(researcher, tiny_release):
    response = client_for(researcher).post(
        "/agents/endpoints/start/",
        {"release": tiny_release.pk, "name": "a\x00b", "url": "https://a.example/"},
    )
    assert response.status_code == 400
    # Refused before the view (RequestHygieneMiddleware), and by the service.
    assert "NUL character" in response.content.decode()
    endpoint_refused(
        "control characters",
        user=researcher,
        release=tiny_release,
        name="a\x00b",
        url="https://a.example/",
    )


# --- an endpoint's reply within its timeout and size (item 5) ----------------------


@pytest.mark.parametrize(
    "mode, detail",
    [("drip", "no complete reply within 1.5 s"), ("huge", "announced 50,000,000")],
)
def test_an_endpoint_dripping_or_flooding_its_reply_is_cut_off(mode, detail):
    server = SlowServer(mode=mode, interval=0.25).start()
    agent = RemoteAgent(url=server.url, timeout_seconds=1.5, max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(AgentError) as error:
            agent.predict(a_window(), {})
    finally:
        agent.close()
        server.stop()
    # Before: a byte every 5 s was accepted after 121 s, and 50 MB were read
    # whole before being refused.
    assert time.monotonic() - started < 2.5
    assert str(error.value) == UNREACHABLE and detail in error.value.detail
    assert server.sent < 20_000_000


@pytest.mark.django_db
def test_a_run_whose_endpoint_became_refused_is_not_resumed(
    researcher, tiny_release, endpoint, settings
):
    registered = endpoint_register(
        user=researcher, release=tiny_release, name="mine", url=endpoint.url
    )
    run = online_eval_start(user=researcher, endpoint=registered, enqueue=False)
    agent_run_cancel(user=researcher, run=run)
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = []  # the operator closed it
    with pytest.raises(ValidationError, match="not a public address"):
        agent_run_resume(user=researcher, run=run)
    run.refresh_from_db()
    assert run.state == "cancelled"
