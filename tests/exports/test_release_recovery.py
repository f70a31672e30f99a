"""A release build whose folder cannot be removed or written (issue 29): the build
fails with the real reason on its row, the reaper's round goes on for every
other job, and no page answers 500.

The folders are made unremovable for real where the machine allows it (the
immutable attribute, which binds root too: tests run as root, whom file modes
do not stop); elsewhere the removal is made to raise the PermissionError the
OS would give."""

import shutil
import subprocess
from pathlib import Path

import pytest

from exports.building import build as building_job
from exports.building import release_build
from exports.models import Release, ReleaseKind, ReleaseState
from exports.services import release_create
from jobs.models import OutboxMessage
from jobs.reaper import job_check, jobs_reap
from tests.exports.helpers import heartbeat_stale, release_building
from tests.factories import make_silent_import
from windows.models import ImportStatus

REFUSED = ("operation not permitted", "permission denied")


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def unremovable(monkeypatch):
    """``unremovable(path)``: from now on ``path`` cannot be removed."""
    locked: list[Path] = []
    patched: set[Path] = set()
    real_remove = building_job._remove_tree

    def remove(path):
        if Path(path) in patched:
            raise PermissionError(13, "Permission denied", str(path))
        real_remove(path)

    def lock(path: Path) -> None:
        if _chattr("+i", path):
            locked.append(path)
            return
        patched.add(Path(path))
        monkeypatch.setattr(building_job, "_remove_tree", remove)

    yield lock
    for path in locked:
        _chattr("-i", path)


@pytest.fixture
def stuck_build(
    admin_user, tiny_run, release_dirs, settings, unremovable
) -> tuple[Release, Path]:
    """A release whose worker died while writing its unfinished folder, a folder
    that cannot be removed: (release, folder)."""
    release = release_building(admin=admin_user, oracle_run=tiny_run)
    partial = release_dirs / f".{release.name}.partial"
    partial.mkdir(parents=True)
    (partial / "windows.jsonl").write_text("half\n")
    heartbeat_stale(release, settings)
    unremovable(partial)
    return release, partial


@pytest.mark.django_db
def test_an_unremovable_folder_fails_its_build_and_the_round_goes_on(
    stuck_build, admin_user, client
):
    release, partial = stuck_build
    other = make_silent_import()
    OutboxMessage.objects.all().delete()

    counts = jobs_reap()

    release.refresh_from_db()
    other.refresh_from_db()
    assert release.state == ReleaseState.FAILED and release.lease == ""
    assert release.finished_at is not None
    assert any(reason in release.error for reason in REFUSED), release.error
    assert str(partial) in release.error and "worker stopped" in release.error
    # The other kind's job in the same round was queued again.
    assert other.status == ImportStatus.QUEUED and other.lease == ""
    assert OutboxMessage.objects.filter(
        task="windows.tasks.import_run_execute_task", args=[other.pk]
    ).exists()
    assert counts["failed"] == 1 and counts["requeued"] == 1
    # The next round leaves the failed build alone, and raises nothing.
    assert jobs_reap().get("failed") is None

    client.force_login(admin_user)
    response = client.get(f"/releases/{release.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Failed" in html and str(partial) in html
    assert client.get(f"/releases/{release.pk}/progress/").status_code == 200


@pytest.mark.django_db
def test_the_release_page_of_a_build_it_cannot_recover_answers_with_the_reason(
    stuck_build, admin_user, client
):
    release, partial = stuck_build
    client.force_login(admin_user)

    response = client.get(f"/releases/{release.pk}/")

    assert response.status_code == 200
    release.refresh_from_db()
    assert release.state == ReleaseState.FAILED
    assert any(reason in release.error for reason in REFUSED), release.error
    assert job_check(release) == "finished"


@pytest.mark.django_db
def test_a_failing_build_records_its_own_error_when_its_folder_cannot_be_removed(
    admin_user, tiny_run, release_dirs, unremovable, monkeypatch
):
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )
    partial = release_dirs / f".{release.name}.partial"

    def broken(**kwargs):
        unremovable(partial)  # the folder goes bad while the build writes it
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(building_job, "datacard_write", broken)
    with pytest.raises(RuntimeError, match="the disk is full"):
        release_build(release=release)

    release.refresh_from_db()
    assert release.state == ReleaseState.FAILED and release.lease == ""
    assert release.error.startswith("RuntimeError: the disk is full")
    assert "its unfinished folder could not be removed" in release.error
    assert any(reason in release.error for reason in REFUSED), release.error


@pytest.mark.django_db
def test_a_releases_folder_that_is_a_file_fails_the_build_with_the_reason(
    admin_user, tiny_run, release_dirs, client
):
    release_dirs.parent.mkdir(parents=True, exist_ok=True)
    release_dirs.write_text("not a folder\n")  # refused to root as to anyone
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )

    with pytest.raises(FileExistsError):
        release_build(release=release)

    release.refresh_from_db()
    assert release.state == ReleaseState.FAILED and release.lease == ""
    assert "File exists" in release.error and str(release_dirs) in release.error
    client.force_login(admin_user)
    assert client.get(f"/releases/{release.pk}/").status_code == 200
