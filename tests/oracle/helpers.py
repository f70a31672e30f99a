"""Constructed ICU stays for the Oracle tests, built with tests.factories (whose
builders put a stay's clinical events at hours since its admission), a cohort
of one stay, a backbone on the fake LLM server and a run on it, a rules run over
a campaign; and a loopback test server started for a block."""

from __future__ import annotations

from contextlib import contextmanager

from django.urls import reverse

from oracle import services
from oracle.backbones.openai_compat import OpenAICompatBackbone
from oracle.models import BackboneKind, OracleLabel
from oracle.prompts import prompt_default_get_or_create
from oracle.selectors import backbone_rules_default
from tests.factories import (
    drip,
    lab,
    make_admission,
    make_events,
    make_stay,
    vitals,
)
from windows.models import Cohort, CohortStay, CohortStratum, Window
from windows.windowing import windows_build


def make_cohort_with_stay(hours: float = 12.0):
    """A cohort of one stay with vitals every hour, a rising creatinine and a
    norepinephrine start; its candidate windows built."""
    stay = make_stay(admission=make_admission(), hours=hours)
    admission = stay.admission
    make_events(admission=admission, count=int(hours), start=stay.intime)
    make_events(
        admission=admission,
        count=int(hours),
        start=stay.intime,
        category="map",
        name="MAP",
        value_num=60.0,
        unit="mmHg",
    )
    for n, value in enumerate((1.0, 1.6, 2.4)):
        lab(stay, "creatinine", value, 3 * n, unit="mg/dL", name="Creatinine")
    drip(stay, "norepinephrine", 0.1, 10 / 60, text="")
    windows = windows_build(stay=stay)
    cohort = Cohort.objects.create(
        name=f"cohort of stay {stay.pk}", seed=0, target_size=1
    )
    CohortStay.objects.create(
        cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_SHORT
    )
    return cohort, stay, windows


def stable_stay(hours: float = 24.0):
    """Normal, unchanging vitals every 30 minutes from an hour before admission."""
    stay = make_stay(hours=hours)
    vitals(stay, "heart_rate", 80, start_h=-1, end_h=hours, unit="bpm")
    vitals(stay, "map", 80, start_h=-1, end_h=hours, unit="mmHg")
    vitals(stay, "spo2", 97, start_h=-1, end_h=hours, unit="%")
    return stay


def windows_of(stay) -> list[Window]:
    windows_build(stay=stay)
    return list(Window.objects.filter(stay=stay).order_by("index"))


@contextmanager
def started(server):
    """``server`` (a loopback test server: FakeLLM and its kind) started, and
    stopped when the block ends, however it ends."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


def run_unqueued(admin, backbone, name="v", **scope):
    """An Oracle run of ``backbone`` over ``scope`` (its campaign= or cohort=,
    and a prompt= if not the default), not queued: the test drives it."""
    return services.oracle_run_create(
        admin=admin, name=name, backbone=backbone, enqueue=False, **scope
    )


def rules_run(admin, campaign=None, name="v", *, cohort=None):
    """An Oracle run of the rules backbone over the campaign (or the cohort),
    not queued."""
    return run_unqueued(
        admin, backbone_rules_default(), name, campaign=campaign, cohort=cohort
    )


def openai_backbone(admin, url, name="fake", **fields):
    """An OpenAI-compatible backbone at ``url``, made by ``admin`` through the
    service; model "fake-model" and the service's defaults unless ``fields``
    say otherwise."""
    fields.setdefault("model", "fake-model")
    return services.backbone_create(
        admin=admin, name=name, kind=BackboneKind.OPENAI, base_url=url, **fields
    )


def fake_backbone(admin, fake_llm):
    """A backbone on the fake LLM server: one request at a time, no retry."""
    return openai_backbone(
        admin,
        fake_llm.base_url,
        "fake",
        concurrency=1,
        requests_per_minute=6000,
        max_retries=0,
    )


def llm_run(admin, fake_llm):
    """A run over one 2-hour stay on the fake LLM, which reports 1,000 prompt
    tokens for every request, against a context window of 4,096 tokens."""
    cohort, _, windows = make_cohort_with_stay(hours=2.0)
    backbone = openai_backbone(
        admin,
        fake_llm.base_url,
        "fake",
        context_tokens=4096,
        max_completion_tokens=512,
        concurrency=1,
        requests_per_minute=6000,
    )
    run = services.oracle_run_create(
        admin=admin, name="tokens", backbone=backbone, cohort=cohort, enqueue=False
    )
    services.oracle_run_execute_inline(run_id=run.pk)
    return run, windows


def backbone_form_post(client, admin, **fields):
    """The new-backbone page posted by ``admin``: an OpenAI backbone of model
    "m" at no price, one request at a time, ``fields`` added or replacing."""
    client.force_login(admin)
    form = {
        "kind": "openai",
        "model": "m",
        "timeout_seconds": 60,
        "max_retries": 0,
        "concurrency": 1,
        "requests_per_minute": 60,
        "price_per_million_input": 0,
        "price_per_million_output": 0,
    }
    return client.post(reverse("oracle:backbone_new"), form | fields)


def backbone(fake, template, **options) -> OpenAICompatBackbone:
    """The OpenAI-compatible backbone on ``fake`` (a FakeLLM) with short
    backoffs, ``options`` added or replacing."""
    settings = {
        "base_url": fake.base_url,
        "model": "fake-model",
        "template": template,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
    }
    settings.update(options)
    return OpenAICompatBackbone(**settings)


def labeller(url: str, timeout: float = 5) -> OpenAICompatBackbone:
    """The OpenAI-compatible backbone at ``url`` with the default template, no
    retry, and a ``timeout`` in seconds."""
    return OpenAICompatBackbone(
        base_url=url,
        model="fake-model",
        template=prompt_default_get_or_create(),
        max_retries=0,
        timeout_seconds=timeout,
    )


def oracle_label(run, window, status, problems=(), ratings=()):
    """A rules label of ``run`` on ``window``: ``problems`` as texts, the events
    ``ratings`` (ids) rated acceptable, no evidence."""
    return OracleLabel.objects.create(
        run=run,
        window=window,
        state="ok",
        status=status,
        payload={
            "status_evidence": [],
            "acute_problems": [{"text": t, "evidence": []} for t in problems],
            "action_ratings": [
                {"event_id": e, "rating": "acceptable", "evidence": []} for e in ratings
            ],
            "added_actions": [],
            "red_flags": [],
        },
        backbone_kind=BackboneKind.RULES,
        model="rules-v1",
        prompt_version="t",
    )
