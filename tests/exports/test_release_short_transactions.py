"""Release builds hold no long write transaction (issue 29, item 3): the files
are written outside any transaction, the rows committed in batches while the
build holds its lease, and the release published by one short transaction at
the end. Rows committed before then are never served, a worker that lost its
lease commits nothing more, and an attempt stopped mid-way is redone by the
next with no duplicate rows."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from exports.building import release_build
from exports.building.batches import ReleaseRows, release_rows_discard
from exports.models import (
    Release,
    ReleaseFile,
    ReleaseKind,
    ReleaseState,
    ReleaseWindow,
)
from exports.services import release_create, token_create
from jobs.leases import JobLeaseLost, job_claim
from jobs.progress import Progress
from jobs.reaper import jobs_reap
from windows.models import Cohort, CohortStay


def _claim(release) -> str:
    lease = job_claim(model=Release, pk=release.pk)
    assert lease
    return lease


def _row(window_id: int, stay_id: int) -> tuple:
    return (window_id, stay_id, "sepsis", 0.0, f'{{"window_id": {window_id}}}')


def _seen_from_another_connection(release) -> tuple[int, str]:
    """The release's committed window rows and its state, as another
    connection (a page, the reaper) sees them."""
    seen = []

    def look():
        try:
            seen.append(
                (
                    ReleaseWindow.objects.filter(release=release).count(),
                    Release.objects.get(pk=release.pk).state,
                )
            )
        finally:
            connection.close()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", [ReleaseKind.SCALE, ReleaseKind.SURVEILLANCE])
def test_a_build_writes_outside_any_transaction_and_commits_its_rows_as_it_goes(
    admin_user, tiny_run, tiny_stays, kind, monkeypatch
):
    monkeypatch.setattr("exports.building.batches.ROWS_PER_COMMIT", 1)
    if kind == ReleaseKind.SCALE:
        release = release_create(user=admin_user, kind=kind, oracle_run=tiny_run)
    else:
        cohort = Cohort.objects.create(name="three", seed=1, target_size=3)
        for stay in tiny_stays["stays"]:
            CohortStay.objects.create(cohort=cohort, stay=stay, stratum="s")
        release = release_create(user=admin_user, kind=kind, cohort=cohort)
    reports = []

    def watch(done, total, label):
        # Each stay is reported once its files are written and its rows handed
        # over: no transaction is open in the build meanwhile, and what it
        # committed is visible to others while the release is still building.
        if label.startswith("stay"):
            reports.append(
                (connection.in_atomic_block, *_seen_from_another_connection(release))
            )

    built = release_build(release=release, progress=Progress(sinks=[watch]))
    assert built.state == ReleaseState.READY, built.error
    assert len(reports) == 3
    assert not any(in_atomic for in_atomic, _, _ in reports)
    assert all(state == ReleaseState.BUILDING for _, _, state in reports)
    committed = [count for _, count, _ in reports]
    assert committed[0] > 0 and committed == sorted(committed)
    assert ReleaseWindow.objects.filter(release=release).count() == built.window_count


def test_the_rows_of_a_release_being_built_are_not_served(admin_user, tiny_run):
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )
    rows = ReleaseRows(release=release, lease=_claim(release))
    rows.windows([_row(1, 1), _row(2, 1)])
    rows.flush()
    rows.files([{"path": "windows.jsonl", "bytes": 10, "sha256": "0" * 64}])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=admin_user).key}")
    windows = api.get(f"/api/v1/releases/{release.pk}/windows/")
    assert windows.status_code == 200 and windows.json()["count"] == 0
    detail = api.get(f"/api/v1/releases/{release.pk}/")
    assert detail.status_code == 200 and detail.json()["files"] == []


def test_a_worker_that_lost_its_lease_commits_no_more_rows(
    admin_user, tiny_run, settings
):
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )
    stale = ReleaseRows(release=release, lease=_claim(release), size=2)
    stale.windows([_row(1, 1), _row(2, 1)])
    # Its worker went silent: the reaper queues the release again and another
    # worker takes it.
    Release.objects.filter(pk=release.pk).update(
        heartbeat_at=timezone.now()
        - timedelta(seconds=settings.REALICU_JOB_STALE_SECONDS + 5)
    )
    jobs_reap()
    fresh = ReleaseRows(release=release, lease=_claim(release))
    fresh.clear()
    with pytest.raises(JobLeaseLost):
        stale.windows([_row(3, 1), _row(4, 1)])
    with pytest.raises(JobLeaseLost):
        stale.files([{"path": "x", "bytes": 1, "sha256": "0" * 64}])
    assert not ReleaseWindow.objects.filter(release=release).exists()
    assert not ReleaseFile.objects.filter(release=release).exists()
    # Nor does its clean-up touch rows of the release while a worker holds it.
    fresh.windows([_row(1, 1)])
    fresh.flush()
    assert release_rows_discard(release) is False
    assert ReleaseWindow.objects.filter(release=release).count() == 1


def test_a_build_stopped_mid_way_is_redone_by_the_next_attempt_without_duplicates(
    admin_user, tiny_run, release_dirs, settings
):
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )
    # The first worker committed some rows, wrote part of its folder and died.
    window_ids = sorted(tiny_run.labels.values_list("window_id", flat=True))
    first = ReleaseRows(release=release, lease=_claim(release), size=2)
    first.windows([_row(window_ids[0], 1), _row(window_ids[1], 1)])
    first.files([{"path": "windows.jsonl", "bytes": 1, "sha256": "0" * 64}])
    partial = release_dirs / f".{release.name}.partial"
    (partial / "context").mkdir(parents=True)
    (partial / "windows.jsonl").write_text("half\n")
    Release.objects.filter(pk=release.pk).update(
        heartbeat_at=timezone.now()
        - timedelta(seconds=settings.REALICU_JOB_STALE_SECONDS + 5)
    )
    jobs_reap()
    release.refresh_from_db()
    assert release.state == ReleaseState.QUEUED and not partial.exists()

    built = release_build(release=release)
    assert built.state == ReleaseState.READY and built.attempts == 2
    windows = ReleaseWindow.objects.filter(release=release)
    assert windows.count() == built.window_count == len(window_ids)
    assert windows.values("window_id").distinct().count() == len(window_ids)
    assert {w.record["window_id"] for w in windows} == set(window_ids)
    files = ReleaseFile.objects.filter(release=release)
    assert set(files.values_list("path", flat=True)) == {
        "manifest.json",
        *(f["path"] for f in built.manifest["files"]),
    }
    assert files.count() == len(built.manifest["files"]) + 1
