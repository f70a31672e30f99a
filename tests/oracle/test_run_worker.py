"""Oracle runs on real Celery workers on Redis against the fake OpenAI-compatible
server: a run to the end within its concurrency limit; cancellation that stops
new requests; a worker killed mid-run (SIGKILL), a new worker, a resume, and
every window with exactly one label."""

import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import Count

from oracle import services
from oracle.models import OracleLabel, OracleRun, RunState
from tests.oracle.fake_llm import FakeLLM
from tests.oracle.helpers import make_cohort_with_stay, openai_backbone, started
from tests.workers import killed_mid_job, start_worker, wait_for, worker_stop

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def tasks_ended(log_path: Path) -> bool:
    """Every task the worker has received has ended (succeeded, raised, retried,
    ...), as its log says."""
    text = log_path.read_text()
    received = Counter(re.findall(r"Task [\w.]+\[([\w-]+)\] received", text))
    ended = Counter(re.findall(r"Task [\w.]+\[([\w-]+)\] (?!received)", text))
    return bool(received) and all(ended[id_] >= n for id_, n in received.items())


@pytest.fixture
def slow_llm():
    with started(FakeLLM(latency=0.3)) as fake:
        yield fake


def llm_backbone(admin, fake, concurrency=4):
    return openai_backbone(
        admin,
        fake.base_url,
        f"fake {fake.base_url}",
        concurrency=concurrency,
        requests_per_minute=60_000,
        max_retries=1,
    )


def one_label_per_window(run) -> None:
    counts = list(
        OracleLabel.objects.filter(run=run)
        .values("window_id")
        .annotate(n=Count("pk"))
        .values_list("n", flat=True)
    )
    assert len(counts) == run.total_windows
    assert set(counts) == {1}


def test_a_worker_runs_a_run_to_the_end_within_its_limits(
    admin_user, fake_llm, celery_worker_process
):
    cohort, _, _ = make_cohort_with_stay(hours=24)
    backbone = llm_backbone(admin_user, fake_llm, concurrency=2)
    run = services.oracle_run_create(
        admin=admin_user, name="worker run", backbone=backbone, cohort=cohort
    )
    wait_for(
        lambda: OracleRun.objects.get(pk=run.pk).state == RunState.COMPLETED,
        "the run to complete",
    )
    run.refresh_from_db()
    one_label_per_window(run)
    assert OracleLabel.objects.filter(run=run, state="ok").count() == run.total_windows
    assert fake_llm.max_in_flight <= 2
    label = OracleLabel.objects.filter(run=run).first()
    assert label.model == "fake-model" and label.tokens_in > 0 and label.raw_response


def test_cancel_stops_new_requests(admin_user, slow_llm, tmp_path):
    cohort, _, _ = make_cohort_with_stay(hours=48)
    backbone = llm_backbone(admin_user, slow_llm, concurrency=2)
    log = tmp_path / "w.log"
    worker = start_worker(log, REALICU_ORACLE_CHUNK_SIZE=50)
    try:
        run = services.oracle_run_create(
            admin=admin_user, name="to cancel", backbone=backbone, cohort=cohort
        )
        wait_for(lambda: OracleLabel.objects.filter(run=run).count() >= 3, "labels")
        services.oracle_run_cancel(admin=admin_user, run=run)
        # The chunk stops starting requests, saves the replies in flight and
        # releases its claim.
        wait_for(lambda: not run.claims.exists(), "the chunk to stop")
        sent = len(slow_llm.requests)
        labels = OracleLabel.objects.filter(run=run).count()
        # Every chunk the worker took (the cancelled one, and any queued behind
        # it) has ended: none of them sent a request after the cancel.
        wait_for(lambda: tasks_ended(log), "the worker's chunks to end")
        assert len(slow_llm.requests) == sent
        assert OracleLabel.objects.filter(run=run).count() == labels < run.total_windows
        run.refresh_from_db()
        assert run.state == RunState.CANCELLED
    finally:
        worker_stop(worker)


def run_killed_mid_way(admin, slow_llm, tmp_path, name: str, **env):
    """A run over a 48-hour stay on ``slow_llm`` (four requests at a time),
    whose worker (``env``) is killed once five windows are labelled: the run,
    and the monotonic time of the kill."""
    cohort, _, _ = make_cohort_with_stay(hours=48)
    backbone = llm_backbone(admin, slow_llm, concurrency=4)
    return killed_mid_job(
        tmp_path / "first.log",
        lambda: services.oracle_run_create(
            admin=admin, name=name, backbone=backbone, cohort=cohort
        ),
        lambda run: OracleLabel.objects.filter(run=run).count() >= 5,
        "labels",
        **env,
    )


def test_a_worker_killed_mid_run_then_resumed_leaves_one_label_per_window(
    admin_user, slow_llm, tmp_path
):
    env = {"REALICU_ORACLE_CHUNK_SIZE": 4, "REALICU_ORACLE_CLAIM_LEASE_SECONDS": 6}
    # SIGKILL: no cleanup, the claim stays until its lease ends.
    run, _ = run_killed_mid_way(admin_user, slow_llm, tmp_path, "killed", **env)
    labelled = OracleLabel.objects.filter(run=run).count()
    assert labelled < run.total_windows
    assert run.claims.exists()  # the dead worker's claim
    second = start_worker(tmp_path / "second.log", **env)
    try:
        services.oracle_run_resume(admin=admin_user, run=run)
        wait_for(
            lambda: OracleRun.objects.get(pk=run.pk).state == RunState.COMPLETED,
            "the resumed run to complete",
        )
    finally:
        worker_stop(second)
    run.refresh_from_db()
    one_label_per_window(run)
    assert not run.claims.exists()
    assert run.finished_at - run.started_at > timedelta(0)


def test_a_killed_worker_s_run_is_requeued_by_the_reaper_without_an_admin(
    admin_user, slow_llm, tmp_path, settings
):
    """Issue 23: SIGKILL the worker mid-run; a new worker with housekeeping (the reaper
    every second, a heartbeat stale after 4 s) finishes the run with nobody
    pressing Resume, one label per window."""
    env = {
        "REALICU_ORACLE_CHUNK_SIZE": 4,
        "REALICU_JOB_HEARTBEAT_SECONDS": 0.5,
        "REALICU_JOB_STALE_SECONDS": 4,
        "REALICU_JOB_REAP_SECONDS": 1,
    }
    run, killed_at = run_killed_mid_way(admin_user, slow_llm, tmp_path, "reaped", **env)
    run.refresh_from_db()
    assert run.state == RunState.RUNNING and run.claims.exists()
    assert OracleLabel.objects.filter(run=run).count() < run.total_windows
    second = start_worker(tmp_path / "second.log", beat=True, **env)
    try:
        wait_for(
            lambda: OracleRun.objects.get(pk=run.pk).state == RunState.COMPLETED,
            "the reaped run to complete",
            timeout=180,
        )
        recovered = time.monotonic() - killed_at
    finally:
        worker_stop(second)
    print(
        f"RECOVERY oracle run: {recovered:.1f} s from SIGKILL to completed "
        f"({run.total_windows} windows, stale after 4 s, reaper every 1 s)"
    )
    run.refresh_from_db()
    one_label_per_window(run)
    assert not run.claims.exists()
    assert "re-queued" in (tmp_path / "second.log").read_text()
