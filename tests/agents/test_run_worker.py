"""An agent run on real Celery workers (Redis): the first worker is killed
(SIGKILL) after the first prediction; a second worker with beat (the reaper)
takes the stays over, each restarting at its first window without a
prediction, and the run ends with exactly one prediction per window, its
baseline scored on the worker."""

import pytest

from agents.models import AgentPrediction, AgentRun, RunState
from agents.services import agent_run_start
from exports.models import SubmissionState
from tests.agents.helpers import fake_backbone_row
from tests.oracle.fake_llm import FakeLLM
from tests.oracle.helpers import started
from tests.workers import killed_mid_job, start_worker, wait_for, worker_stop

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slow_llm():
    with started(FakeLLM(latency=1.0)) as fake:
        yield fake


@pytest.fixture
def slow_backbone(slow_llm, settings, monkeypatch):
    """A backbone on the fake server answering after a second; the workers
    started later read the test's release folders."""
    monkeypatch.setenv("REALICU_RELEASES_DIR", str(settings.REALICU_RELEASES_DIR))
    monkeypatch.setenv("REALICU_SUBMISSIONS_DIR", str(settings.REALICU_SUBMISSIONS_DIR))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return fake_backbone_row(slow_llm.base_url, "fake-slow")


def test_a_killed_workers_run_resumes_per_stay_with_one_prediction_per_window(
    admin_user, tiny_release, slow_llm, slow_backbone, tmp_path
):
    backbone = slow_backbone
    env = {
        "REALICU_JOB_HEARTBEAT_SECONDS": 0.5,
        "REALICU_JOB_STALE_SECONDS": 3,
        "REALICU_JOB_REAP_SECONDS": 1,
        "REALICU_JOB_REDISPATCH_SECONDS": 2,
    }
    run, _ = killed_mid_job(
        tmp_path / "first.log",
        lambda: agent_run_start(
            user=admin_user,
            release=tiny_release,
            agent="local-window",
            backbone=backbone,
        ),
        lambda run: AgentPrediction.objects.filter(run=run).count() >= 1,
        "a first prediction",
        **env,
    )
    before = AgentPrediction.objects.filter(run=run).count()
    requests_before = len(slow_llm.requests)
    run.refresh_from_db()
    assert run.state == RunState.RUNNING
    assert before < run.windows_total
    second = start_worker(tmp_path / "second.log", beat=True, **env)
    try:
        wait_for(
            lambda: AgentRun.objects.get(pk=run.pk).state == RunState.DONE,
            "the run to finish",
            timeout=180,
        )
        wait_for(
            lambda: (
                AgentRun.objects.get(pk=run.pk).submission.state
                in (SubmissionState.SCORED, SubmissionState.FAILED)
            ),
            "the baseline to be scored",
            timeout=180,
        )
    finally:
        worker_stop(second)
    run.refresh_from_db()
    windows = list(
        AgentPrediction.objects.filter(run=run).values_list("window_id", flat=True)
    )
    assert len(windows) == len(set(windows)) == run.windows_total == 4
    assert run.windows_done == 4 and run.stays_done == 3
    # The windows predicted before the kill were not asked again: at most the
    # one in flight when the worker died was sent twice.
    assert len(slow_llm.requests) - requests_before <= run.windows_total - before + 1
    assert "re-queued" in (tmp_path / "second.log").read_text()
    assert run.submission.state == SubmissionState.SCORED, run.submission.error
    assert run.submission.baseline["agent"] == "local-window"


def test_agent_run_command_queues_and_follows_to_the_end(
    admin_user, tiny_release, slow_llm, slow_backbone, tmp_path
):
    import io

    from django.core.management import call_command

    backbone = slow_backbone
    worker = start_worker(tmp_path / "worker.log")
    try:
        out = io.StringIO()
        call_command(
            "agent_run",
            "--agent=full-context",
            f"--release={tiny_release.pk}",
            f"--backbone={backbone.name}",
            f"--user={admin_user.username}",
            stdout=out,
        )
    finally:
        worker_stop(worker)
    run = AgentRun.objects.get()
    assert run.state == RunState.DONE and run.windows_done == 4
    assert "4/4 windows (0 failed)" in out.getvalue()
    assert len(slow_llm.requests) == 4
