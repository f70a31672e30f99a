"""The queue: a release built by the Celery task, and a submission uploaded
through the API scored by a real worker with the release's real matcher."""

import time

import pytest
from rest_framework.test import APIClient

from exports.models import Release, ReleaseState
from exports.services import release_create, token_create
from tests.exports.helpers import (
    prediction_upload,
    release_built,
    submission_finished,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_dirs(tmp_path, monkeypatch, settings):
    # The worker is another process: it reads the folders from its environment.
    monkeypatch.setenv("REALICU_RELEASES_DIR", str(settings.REALICU_RELEASES_DIR))
    monkeypatch.setenv("REALICU_SUBMISSIONS_DIR", str(settings.REALICU_SUBMISSIONS_DIR))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_release_is_built_and_predictions_scored_by_the_worker(
    worker_dirs, admin_user, researcher, tiny_run, tiny_stays, celery_worker_process
):
    # Creating the release records its build task (jobs.outbox), sent on commit.
    release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
    release = release_built(release)
    assert release.state == ReleaseState.READY, release.error

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=researcher).key}")
    upload = prediction_upload(tiny_stays)
    created = client.post(
        f"/api/v1/releases/{release.pk}/submissions/",
        {"file": upload, "model_name": "m"},
        format="multipart",
    ).json()
    submission_finished(created["id"])
    scores = client.get(f"/api/v1/submissions/{created['id']}/").json()
    assert scores["state"] == "scored", scores["error"]
    overall = scores["scores"]["overall"]
    # a0: exact texts match at any tau <= 1; the other three windows have no
    # prediction. Problems W' = a0, b0, c0: Hit 1/3; HRR: a0 [Fluid bolus] is
    # the red flag: 1.
    assert overall["problems_hit_at_k"] == pytest.approx(1 / 3)
    assert overall["actions_hrr_at_k"] == pytest.approx(1.0)
    assert overall["status_accuracy"] == pytest.approx(1 / 4)


def _many_stays_run(admin, stays: int, events_per_stay: int):
    """An Oracle run over ``stays`` stays of one window each, with enough
    bedside events that building the release takes seconds."""
    from datetime import timedelta

    from tests.factories import make_admission, make_events, make_stay
    from windows.windowing import windows_build

    from .helpers import make_oracle_run, oracle_payload

    labels = {}
    for _ in range(stays):
        stay = make_stay(admission=make_admission(), hours=2)
        make_events(
            admission=stay.admission,
            count=events_per_stay,
            start=stay.intime,
            every=timedelta(seconds=30),
        )
        for window in windows_build(stay=stay):
            labels[window] = ("stable", oracle_payload(problems=["Septic shock"]))
    return make_oracle_run(admin=admin, labels=labels, name="many")


def test_a_release_build_whose_worker_is_killed_is_finished_by_another_worker(
    worker_dirs, admin_user, settings, tmp_path, release_dirs
):
    """SIGKILL of the worker's process mid-build (issue 23): the reaper sees
    the heartbeat stop, removes the unfinished folder and queues the build
    again; a new worker builds the same release, whose files match the
    manifest's checksums, with no folder left behind and one row per window."""
    import hashlib

    from exports.models import ReleaseFile, ReleaseWindow
    from jobs.reaper import jobs_reap
    from tests.workers import killed_mid_job, start_worker, wait_for, worker_stop

    settings.REALICU_JOB_STALE_SECONDS = 4
    fast = {"REALICU_JOB_HEARTBEAT_SECONDS": 0.5, "REALICU_JOB_STALE_SECONDS": 4}
    run = _many_stays_run(admin_user, stays=400, events_per_stay=60)
    release, killed_at = killed_mid_job(
        tmp_path / "worker1.log",
        lambda: release_create(user=admin_user, kind="scale", oracle_run=run),
        lambda release: Release.objects.filter(
            pk=release.pk, state=ReleaseState.BUILDING, progress_done__gte=2
        ).exists(),
        "the build to be under way",
        **fast,
    )
    row = Release.objects.get(pk=release.pk)
    assert row.state == ReleaseState.BUILDING, row.state
    print(f"killed at {row.progress_label} ({row.progress_done}/{row.progress_total})")
    assert (release_dirs / f".{release.name}.partial").exists()

    second = start_worker(tmp_path / "worker2.log", **fast)
    try:

        def finished():
            jobs_reap()  # as beat would, every REALICU_JOB_REAP_SECONDS
            return Release.objects.filter(
                pk=release.pk, state__in=(ReleaseState.READY, ReleaseState.FAILED)
            ).exists()

        wait_for(finished, "the build to finish on the new worker", 180)
        recovery = time.monotonic() - killed_at
    finally:
        worker_stop(second)
    release.refresh_from_db()
    assert release.state == ReleaseState.READY, release.error
    print(f"RECOVERY release build after SIGKILL of its worker: {recovery:.1f} s")
    assert release.attempts == 2 and release.lease == ""
    folder = release_dirs / release.name
    assert not list(release_dirs.glob(".*.partial"))
    listed = {f["path"]: f["sha256"] for f in release.manifest["files"]}
    for entry in ReleaseFile.objects.filter(release=release):
        digest = hashlib.sha256((folder / entry.path).read_bytes()).hexdigest()
        assert digest == entry.sha256
        if entry.path != "manifest.json":
            assert listed[entry.path] == entry.sha256
    windows = ReleaseWindow.objects.filter(release=release)
    assert windows.count() == release.window_count == 400
    assert windows.values("window_id").distinct().count() == 400
