"""Release files and submissions in an S3-compatible object store (issue 36),
against a real S3 server on loopback (moto's server mode, started once for the
session): a release is published only when every file is in the store, its
keys are never rewritten, downloads are checked against the recorded sha256
and streamed (or redirected to a presigned address), and two worker
"machines" with separate local folders share the one store with the web."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request

import pytest
from rest_framework.test import APIClient

from evaluation.metrics import DEFAULT_K
from exports.models import Release, ReleaseFile, ReleaseState, Submission
from exports.services import release_create, token_create
from tests.exports.helpers import (
    prediction_upload,
    release_built,
    submission_finished,
)

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).key}")
    return client


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_a_release_is_published_into_the_store_with_every_file_checked(
    s3, tiny_release, researcher, release_dirs
):
    assert tiny_release.state == ReleaseState.READY, tiny_release.error
    entries = {e.path: e for e in ReleaseFile.objects.filter(release=tiny_release)}
    prefix = f"releases/{tiny_release.name}/"
    assert s3.keys(prefix) == sorted(prefix + path for path in entries)
    assert {"manifest.json", "DATACARD.md", "windows.jsonl"} <= set(entries)
    for path, entry in entries.items():
        data = s3.read(prefix + path)
        assert hashlib.sha256(data).hexdigest() == entry.sha256, path
    # Nothing is left in the worker's local folder: not the release, not its
    # unfinished copy.
    assert not release_dirs.exists() or not list(release_dirs.iterdir())

    client = _client(researcher)
    url = f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl"
    whole = s3.read(prefix + "windows.jsonl")
    response = client.get(url)
    assert response.status_code == 200
    assert response.streaming
    assert _body(response) == whole
    assert response["Content-Length"] == str(len(whole))
    assert response["ETag"] == f'"{entries["windows.jsonl"].sha256}"'
    part = client.get(url, HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 10-19/{len(whole)}"
    assert _body(part) == whole[10:20]
    card = client.get(f"/api/v1/releases/{tiny_release.pk}/files/DATACARD.md")
    assert _body(card) == s3.read(prefix + "DATACARD.md")


def test_a_file_changed_in_the_store_is_not_served(s3, tiny_release, researcher):
    client = _client(researcher)
    url = f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl"
    assert client.get(url).status_code == 200
    key = f"releases/{tiny_release.name}/windows.jsonl"
    s3.write(key, s3.read(key).replace(b"stable", b"stabld"))
    response = client.get(url)
    assert response.status_code == 409
    assert "checksum" in response.json()["detail"]


def test_a_download_can_redirect_to_a_presigned_address(
    s3, tiny_release, researcher, settings
):
    settings.REALICU_OBJECT_STORAGE_REDIRECT = True
    response = _client(researcher).get(
        f"/api/v1/releases/{tiny_release.pk}/files/windows.jsonl"
    )
    assert response.status_code == 302
    location = response["Location"]
    assert "X-Amz-Signature=" in location and "X-Amz-Expires=300" in location
    with urllib.request.urlopen(location) as fetched:
        data = fetched.read()
    entry = ReleaseFile.objects.get(release=tiny_release, path="windows.jsonl")
    assert hashlib.sha256(data).hexdigest() == entry.sha256


def test_a_release_whose_keys_exist_in_the_store_is_never_rewritten(
    s3, admin_user, tiny_run
):
    from django.core.exceptions import ValidationError

    from exports.building import release_build

    release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
    planted = f"releases/{release.name}/manifest.json"
    s3.write(planted, b"left by someone else\n")
    with pytest.raises(ValidationError, match="already exists"):
        release_build(release=release)
    release.refresh_from_db()
    assert release.state == ReleaseState.FAILED
    assert "never rewritten" in release.error
    assert s3.keys("releases/") == [planted]
    assert s3.read(planted) == b"left by someone else\n"
    assert not ReleaseFile.objects.filter(release=release).exists()


def test_keys_of_a_copy_that_died_before_its_manifest_are_replaced(
    s3, admin_user, tiny_run
):
    """A worker killed while copying leaves keys but no manifest (copied
    last): the next attempt removes them and publishes the release."""
    from exports.building import release_build

    release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
    prefix = f"releases/{release.name}/"
    s3.write(prefix + "windows.jsonl", b"half a copy\n")
    s3.write(prefix + "stale/only-in-the-dead-copy.jsonl", b"x\n")
    release = release_build(release=release)
    assert release.state == ReleaseState.READY, release.error
    entries = {e.path: e.sha256 for e in ReleaseFile.objects.filter(release=release)}
    assert s3.keys(prefix) == sorted(prefix + path for path in entries)
    data = s3.read(prefix + "windows.jsonl")
    assert hashlib.sha256(data).hexdigest() == entries["windows.jsonl"]


def test_a_stopped_build_leaves_no_keys_in_the_store(
    s3, admin_user, tiny_run, monkeypatch
):
    """A build whose lease is lost while its files go to the store removes
    the keys it wrote; the release is not published."""
    from exports.building import build, release_build
    from jobs.leases import JobLeaseLost

    real_put = build.store_put_new
    calls = []

    def put_then_lose_lease(store, key, source):
        real_put(store, key, source)
        calls.append(key)
        if len(calls) == 2:
            raise JobLeaseLost("taken over")

    monkeypatch.setattr(build, "store_put_new", put_then_lose_lease)
    release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
    release_build(release=release)
    assert len(calls) == 2
    assert s3.keys("releases/") == []
    assert Release.objects.get(pk=release.pk).state != ReleaseState.READY


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_worker_machines_share_the_store_with_the_web(
    s3, admin_user, researcher, tiny_run, tiny_stays, tmp_path, release_dirs, client
):
    """Worker A (its own var folder) builds a release that the web serves
    from the store; a submission uploaded through the web is scored by
    worker B (another var folder), whose plots the web serves."""
    from tests.workers import start_worker, worker_stop

    def machine(name):
        var = tmp_path / name
        return {
            "REALICU_VAR_DIR": str(var),
            "REALICU_RELEASES_DIR": str(var / "releases"),
            "REALICU_SUBMISSIONS_DIR": str(var / "submissions"),
            "HF_HUB_OFFLINE": "1",
            **s3.environment,
        }

    a_env, b_env = machine("machine-a"), machine("machine-b")
    worker_a = start_worker(tmp_path / "a.log", **a_env)
    try:
        release = release_create(user=admin_user, kind="scale", oracle_run=tiny_run)
        release = release_built(release, 180)
    finally:
        worker_stop(worker_a)
    assert release.state == ReleaseState.READY, release.error
    built_by = release.worker
    # Published to the store, nothing left on machine A nor written by the web.
    assert s3.keys(f"releases/{release.name}/manifest.json")
    assert not list((tmp_path / "machine-a" / "releases").glob("*"))
    assert not release_dirs.exists() or not list(release_dirs.iterdir())

    api = _client(researcher)
    served = api.get(f"/api/v1/releases/{release.pk}/files/manifest.json")
    assert served.status_code == 200
    manifest = json.loads(_body(served))
    assert manifest["name"] == release.name

    worker_b = start_worker(tmp_path / "b.log", **b_env)
    try:
        upload = prediction_upload(tiny_stays)
        client.force_login(researcher)
        response = client.post(
            f"/releases/{release.pk}/submit/",
            {"file": upload, "model_name": "m", "k": DEFAULT_K},
        )
        assert response.status_code == 302, response.content[:500]
        submission = Submission.objects.get(release=release)
        submission = submission_finished(submission.pk, 180)
    finally:
        worker_stop(worker_b)
    assert submission.state == "scored", submission.error
    assert submission.scores["overall"]["status_accuracy"] == pytest.approx(1 / 4)
    # The upload went to the store, not to the web's folder, and machine B
    # read it from there: its own folder holds nothing.
    key = f"submissions/{submission.file_path}"
    assert hashlib.sha256(s3.read(key)).hexdigest() == submission.sha256
    assert not list((tmp_path / "machine-b" / "submissions").rglob("*.jsonl"))
    # Built and scored by the two worker processes, neither of them the web's.
    pids = {built_by.rsplit(":", 1)[1], submission.worker.rsplit(":", 1)[1]}
    assert pids == {str(worker_a.pid), str(worker_b.pid)}
    assert str(os.getpid()) not in pids
    plot = client.get(
        f"/releases/submissions/{submission.pk}/plots/by_disease_group.png"
    )
    assert plot.status_code == 200
    assert b"".join(plot.streaming_content).startswith(b"\x89PNG")


@pytest.fixture
def stored_submission(s3, tiny_release, tiny_stays, researcher):
    """A researcher's predictions on the tiny release, uploaded to the store:
    (submission, its key in the store)."""
    from exports.services import submission_create

    submission = submission_create(
        user=researcher,
        release=tiny_release,
        upload=prediction_upload(tiny_stays),
        model_name="m",
    )
    return submission, f"submissions/{submission.file_path}"


def test_a_submission_is_stored_and_scored_from_the_store(
    s3, stored_submission, tiny_release, settings
):
    from exports.services import submission_score

    from .helpers import ExactMatcher

    submission, key = stored_submission
    assert hashlib.sha256(s3.read(key)).hexdigest() == submission.sha256
    local = settings.REALICU_SUBMISSIONS_DIR
    assert not local.exists() or not list(local.rglob("*.jsonl"))
    scored = submission_score(submission=submission, matcher=ExactMatcher())
    assert scored.state == "scored", scored.error
    assert scored.scores["overall"]["status_accuracy"] == pytest.approx(1 / 4)
    plots = s3.keys(f"submissions/{tiny_release.name}/{submission.pk}-plots/")
    assert [k.rsplit("/", 1)[1] for k in plots] == [
        "by_disease_group.png",
        "by_hours_since_admit.png",
    ]


def test_a_submission_changed_in_the_store_is_not_scored(s3, stored_submission):
    from django.core.exceptions import ValidationError

    from exports.services import submission_score

    from .helpers import ExactMatcher

    submission, key = stored_submission
    s3.write(key, s3.read(key).replace(b"deteriorating", b"stable"))
    with pytest.raises(ValidationError, match="checksum"):
        submission_score(submission=submission, matcher=ExactMatcher())
    submission.refresh_from_db()
    assert submission.state == "failed"
    assert "not the file uploaded" in submission.error
    assert submission.scores == {}


def test_a_rewritten_object_is_replaced_in_one_write(s3, tmp_path):
    # A submission's plots are derived again by a rerun: the S3 store writes
    # the new object over the old in one PutObject, asking nothing first, so
    # a reader meanwhile never finds the key empty.
    from realicu_web.storage import object_store, store_keys, store_put

    store = object_store()
    old, new = tmp_path / "old.svg", tmp_path / "new.svg"
    old.write_bytes(b"<svg>old</svg>")
    new.write_bytes(b"<svg>new</svg>")
    store_put(store, "submissions/1/plot.svg", old)
    operations = []
    store.connection.meta.client.meta.events.register(
        "before-call.s3", lambda model, **_: operations.append(model.name)
    )
    store_put(store, "submissions/1/plot.svg", new)
    assert operations == ["PutObject"]
    with store.open("submissions/1/plot.svg") as handle:
        assert handle.read() == b"<svg>new</svg>"
    assert store_keys(store, "submissions/1/") == ["submissions/1/plot.svg"]


def test_a_store_that_renames_has_the_old_object_deleted_first(tmp_path):
    from django.core.files.storage import FileSystemStorage

    from realicu_web.storage import store_put

    store = FileSystemStorage(location=tmp_path / "store")
    for text in (b"first", b"second"):
        source = tmp_path / "source"
        source.write_bytes(text)
        store_put(store, "plots/a.svg", source)
    assert (tmp_path / "store" / "plots" / "a.svg").read_bytes() == b"second"
    assert sorted(p.name for p in (tmp_path / "store" / "plots").iterdir()) == ["a.svg"]


def test_a_save_the_store_renamed_is_deleted_and_refused(tmp_path):
    # Someone wrote the key between the check and the save: the store puts the
    # new file under another name. It is not kept, and the write says why.
    from django.core.files.storage import FileSystemStorage

    from realicu_web.storage import KeyTaken, store_put

    store = FileSystemStorage(location=tmp_path / "store")
    real_save = store.save
    store.save = lambda key, content: real_save(f"{key}.other", content)
    source = tmp_path / "source"
    source.write_bytes(b"plot")
    with pytest.raises(KeyTaken, match="renamed plots/a.svg to plots/a.svg.other"):
        store_put(store, "plots/a.svg", source)
    assert list((tmp_path / "store" / "plots").iterdir()) == []
