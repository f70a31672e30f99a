"""Constructed ICU stays for the Oracle tests, built with tests.factories (whose
builders put a stay's clinical events at hours since its admission), and a run
on the fake LLM server."""

from __future__ import annotations

from oracle import services
from tests.factories import make_stay, vitals
from tests.oracle.test_runs import make_cohort_with_stay
from windows.models import Window
from windows.windowing import windows_build


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


def llm_run(admin, fake_llm):
    """A run over one 2-hour stay on the fake LLM, which reports 1,000 prompt
    tokens for every request, against a context window of 4,096 tokens."""
    cohort, _, windows = make_cohort_with_stay(hours=2.0)
    backbone = services.backbone_create(
        admin=admin,
        name="fake",
        kind="openai",
        base_url=fake_llm.base_url,
        model="fake-model",
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
