"""The issue's "done when", in the system Chromium with a real Celery worker: an
admin starts a run of the rules Oracle (no LLM) over every candidate window of a
cohort from the new-run form, watches its progress bar reach 100 %, then
validates it against a Gold campaign with consensus and reads the report when
the worker has computed it."""

import os

import pytest

from accounts.roles import Role
from annotation.models import Campaign
from annotation.services import campaign_create, window_consensus_refresh
from oracle.models import OracleLabel, OracleRun, ValidationJob, ValidationReport
from tests.annotation.conftest import (  # noqa: F401 - fixtures
    clinical,
    make_gold_windows,
    make_role_user,
    stay,
)
from tests.annotation.consensus_data import submit
from tests.browser import browser_after, sign_in
from windows.models import Cohort, CohortStay, CohortStratum, Window

# The worker inherits this: the matcher's model ships with its package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

SCREENSHOT = "/tmp/oracle_validation.png"


@pytest.fixture
def gold_campaign(stay, clinical):
    """A cohort of one 12-h stay, and a Gold campaign of its first three windows
    with two physicians' consensus."""
    from evaluation.matcher import matcher_for_settings

    admin = make_role_user(Role.ADMIN)
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    windows = make_gold_windows(stay=stay, count=3)
    campaign = campaign_create(
        admin=admin, name="Gold B", windows=windows, physicians=physicians
    )
    # The labels' items cite nothing: the validation, not the labelling, is
    # what this test follows.
    Campaign.objects.filter(pk=campaign.pk).update(evidence_required=False)
    for physician in physicians:
        submit(
            physician, campaign, windows[0], "deteriorating", problems=["Septic shock"]
        )
        submit(physician, campaign, windows[1], "stable", problems=["Septic shock"])
        submit(physician, campaign, windows[2], "stable")
    matcher = matcher_for_settings(tau=0.5)
    for window in windows:
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    cohort = Cohort.objects.create(name="Browser cohort", seed=0, target_size=1)
    CohortStay.objects.create(
        cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_SHORT
    )
    return {"admin": admin, "campaign": campaign, "cohort": cohort}


browser = browser_after("gold_campaign")


def test_admin_runs_the_rules_oracle_and_reads_its_validation(
    live_server, celery_worker_process, browser, gold_campaign, stay
):
    admin, campaign, cohort = (
        gold_campaign["admin"],
        gold_campaign["campaign"],
        gold_campaign["cohort"],
    )
    errors = []
    page = sign_in(browser, live_server, admin, errors=errors)

    page.goto(f"{live_server.url}/oracle/")
    page.click("a[href='/oracle/runs/new/']")
    page.wait_for_url(f"{live_server.url}/oracle/runs/new/")
    backbone = page.locator("select[name=backbone] option:checked").inner_text()
    assert "rules" in backbone.lower() and "no llm" in backbone.lower()
    page.select_option("select[name=cohort]", str(cohort.pk))
    page.click(".run-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/oracle/runs/*/")

    run = OracleRun.objects.get()
    windows = Window.objects.filter(stay=stay).count()
    assert run.total_windows == windows and run.cohort == cohort
    # The bar, polled by htmx, reaches 100 % as the worker labels the windows.
    page.wait_for_selector(
        "#run-progress[data-percent='100'][data-state='completed']", timeout=120_000
    )
    assert f"{windows} of {windows} windows" in page.inner_text("[data-progress]")
    assert OracleLabel.objects.filter(run=run, state="ok").count() == windows

    page.click("[data-validation-link]")
    page.wait_for_selector("[data-no-report]")
    page.select_option("select[name=campaign]", str(campaign.pk))
    page.click("[data-validate]")
    # Queued on the worker: a progress bar until the report is made, then the
    # page opens it.
    page.wait_for_selector("#validation-job")
    page.wait_for_selector(".validation-report", timeout=180_000)
    report = ValidationReport.objects.get()
    assert ValidationJob.objects.get().report == report
    assert page.url.endswith(f"?report={report.pk}")
    assert page.inner_text(".validation-report [data-n-windows]") == "3"
    status_f1 = page.inner_text('.table1 tr[data-task="status"] [data-f1]')
    assert status_f1 == f"{report.report['status_macro_f1']:.3f}"
    assert page.locator(".confusion tbody tr").count() == 3
    # Table 1's F1 per task, drawn by uPlot from the page's JSON, and as text.
    page.locator('[data-chart="task-f1-chart"] [data-chart-canvas] canvas').wait_for()
    assert f"Status macro-F1: {status_f1}" in page.inner_text(
        '[data-chart="task-f1-chart"] .chart-values'
    )
    page.screenshot(path=SCREENSHOT, full_page=True)
    assert errors == []
