"""The researchers' Python client (client/realicu_client) against the live API
(pytest-django's live server) on the exports tests' tiny release: listing,
the API's messages in its errors, downloads checked against the manifest (a
corrupted one raises and leaves no file), windows whose context never holds an
event at or after their end (compared with the platform's own bedside rule),
and predictions submitted and scored to the hand-computed values."""

import hashlib
import json
import os
from pathlib import Path

import pytest
from django.http import HttpResponse

pytestmark = pytest.mark.django_db(transaction=True)


def _all_windows(tiny_stays):
    return [w for stay in "ABC" for w in tiny_stays["windows"][stay]]


def _files_under(folder: Path) -> set[str]:
    return {
        str(Path(root, name).relative_to(folder))
        for root, _, names in os.walk(folder)
        for name in names
    }


def test_lists_releases_and_reads_one(api, release, tiny_stays):
    releases = api.releases()
    assert [r["id"] for r in releases] == [release.pk]
    one = api.release(release.pk)
    assert one["name"] == release.name
    assert one["manifest"]["counts"]["windows"] == 4
    assert {"windows.jsonl", "manifest.json"} <= {f["path"] for f in one["files"]}
    records = list(api.windows(release.pk, disease_group="sepsis"))
    assert len(records) == 3 and {r["disease_group"] for r in records} == {"sepsis"}
    # Page by page (one record a page), every record once.
    paged = [r["window_id"] for r in api.windows(release.pk, page_size=1)]
    assert sorted(paged) == sorted(w.pk for w in _all_windows(tiny_stays))


def test_http_errors_carry_the_apis_message(live_server, api, release, physician):
    from realicu_client import APIError, Client

    from exports.tokens import token_store

    with pytest.raises(APIError) as caught:
        Client(live_server.url, "0" * 40).releases()
    assert caught.value.status == 401
    assert caught.value.message == "Invalid token."
    assert "HTTP 401" in str(caught.value) and "Invalid token." in str(caught.value)

    key = token_store(user=physician).key
    with pytest.raises(APIError) as caught:
        Client(live_server.url + "/api/v1/", key).releases()
    assert caught.value.status == 403
    assert (
        caught.value.message == "Only researchers and admins can use the release API."
    )

    with pytest.raises(APIError) as caught:
        api.release(release.pk + 1000)
    assert (caught.value.status, caught.value.message) == (404, "No such release.")

    with pytest.raises(APIError) as caught:
        list(api.windows(release.pk, hours_min="soon"))
    assert caught.value.status == 400 and caught.value.message.startswith("hours_min: ")


def test_an_unreachable_server_is_a_clear_error(release):
    import socket

    from realicu_client import Client, ConnectionFailed

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(
        ConnectionFailed, match=f"Could not reach http://127.0.0.1:{port}"
    ):
        Client(f"http://127.0.0.1:{port}", "0" * 40, timeout=5).releases()


def test_download_writes_every_file_as_built(api, release, release_dirs, tmp_path):
    folder = api.download(release.pk, tmp_path / "data")
    assert folder == tmp_path / "data" / release.name
    built = release_dirs / release.directory
    listed = {entry.path for entry in release.files.all()}
    assert _files_under(folder) == listed
    for path in listed:
        assert (folder / path).read_bytes() == (built / path).read_bytes(), path
    # A second download finds every file good and leaves them as they are.
    before = {path: (folder / path).stat().st_mtime_ns for path in listed}
    api.download(release.pk, tmp_path / "data")
    assert {path: (folder / path).stat().st_mtime_ns for path in listed} == before


@pytest.mark.parametrize("damage", ["flipped_byte", "truncated"])
def test_a_corrupted_download_raises_and_leaves_no_file(
    api, release, tmp_path, monkeypatch, damage
):
    from realicu_client import ChecksumMismatch

    import exports.downloads as server

    def corrupting(request, entry, path):
        body = path.read_bytes()
        if entry.path == "windows.jsonl":
            if damage == "flipped_byte":
                body = bytes([body[0] ^ 1]) + body[1:]
            else:
                body = body[: len(body) // 2]
        return HttpResponse(body, content_type="application/octet-stream")

    monkeypatch.setattr(server, "file_response", corrupting)
    target = tmp_path / "data" / release.name
    target.mkdir(parents=True)
    # A stale file under the name must not survive as if it were the good one.
    (target / "windows.jsonl").write_text("stale\n")
    with pytest.raises(ChecksumMismatch) as caught:
        api.download(release.pk, tmp_path / "data")
    assert caught.value.path == "windows.jsonl"
    entry = release.files.get(path="windows.jsonl")
    assert entry.sha256 in caught.value.expected
    assert "does not match the release manifest" in str(caught.value)
    files = _files_under(target)
    assert "windows.jsonl" not in files
    assert not [name for name in files if name.endswith(".part")]
    # iterate_windows downloads windows.jsonl first: it fails the same way.
    with pytest.raises(ChecksumMismatch):
        next(api.iterate_windows(release.pk, tmp_path / "data"))
    assert "windows.jsonl" not in _files_under(target)

    monkeypatch.undo()
    good = api.download(release.pk, tmp_path / "data", paths=["windows.jsonl"])
    digest = hashlib.sha256((good / "windows.jsonl").read_bytes()).hexdigest()
    assert digest == entry.sha256


def test_a_file_changed_on_the_server_is_refused_with_its_message(
    api, release, release_dirs, tmp_path
):
    from realicu_client import APIError

    built = release_dirs / release.directory / "windows.jsonl"
    built.write_bytes(built.read_bytes() + b"\n")
    with pytest.raises(APIError) as caught:
        api.download(release.pk, tmp_path, paths=["windows.jsonl"])
    assert caught.value.status == 409
    assert "changed after the release was built" in caught.value.message
    assert "windows.jsonl" not in _files_under(tmp_path / release.name)


def test_unknown_paths_are_refused_before_any_download(api, release, tmp_path):
    from realicu_client import RealICUError

    with pytest.raises(RealICUError, match="Not files of"):
        api.download(release.pk, tmp_path, paths=["../../etc/passwd"])
    assert _files_under(tmp_path / release.name) == set()


def test_iterate_windows_never_yields_an_event_at_or_after_the_end(
    api, release, tiny_stays, edge_events, tmp_path
):
    from realicu_client import parse_time

    from windows.models import Window
    from windows.selectors_context import bedside_events

    windows = list(api.iterate_windows(release.pk, tmp_path))
    assert sorted(w.window_id for w in windows) == sorted(
        w.pk for w in _all_windows(tiny_stays)
    )
    for window in windows:
        for event in window.context:
            assert parse_time(event["time"]) < window.end, (window.window_id, event)
        # The same events, in the same order, as the platform's bedside rule.
        expected = bedside_events(
            window=Window.objects.get(pk=window.window_id), exclude_window_actions=True
        )
        assert [e["event_id"] for e in window.context] == [e.pk for e in expected]

    a0, a1 = (
        next(w for w in windows if w.window_id == x.pk)
        for x in tiny_stays["windows"]["A"]
    )
    events, edge = tiny_stays["events"], edge_events
    in_file = {
        json.loads(line)["event_id"]
        for line in (tmp_path / release.name / a0.record["context_file"])
        .read_text()
        .splitlines()
    }
    # The file holds the stay's later events: the filter is what keeps them out.
    for name in ("at_end", "half_second_after"):
        assert edge[name].pk in in_file
    ids0 = {e["event_id"] for e in a0.context}
    assert edge["just_before"].pk in ids0 and events["before_icu"].pk in ids0
    assert edge["at_end"].pk not in ids0 and edge["half_second_after"].pk not in ids0
    assert events["between"].pk not in ids0
    # The window's own action is its Recommended Actions answer: left out of its
    # own context unless asked, and in the next window's context.
    assert events["norepinephrine"].pk not in ids0
    ids1 = {e["event_id"] for e in a1.context}
    assert {
        edge["at_end"].pk,
        events["norepinephrine"].pk,
        events["between"].pk,
    } <= ids1
    # Outcome-revealing events are not in the files at all.
    assert events["death_early"].pk not in in_file | ids1
    assert events["disposition"].pk not in in_file | ids1

    with_actions = {
        w.window_id: {e["event_id"] for e in w.context}
        for w in api.iterate_windows(release.pk, tmp_path, include_window_actions=True)
    }
    assert events["norepinephrine"].pk in with_actions[a0.window_id]
    assert edge["at_end"].pk not in with_actions[a0.window_id]


def test_iterate_windows_of_one_stay_reads_only_its_context(
    api, release, tiny_stays, tmp_path
):
    b = tiny_stays["stays"][1]
    windows = list(api.iterate_windows(release.pk, tmp_path, stay_ids=[b.pk]))
    assert [w.window_id for w in windows] == [tiny_stays["windows"]["B"][0].pk]
    contexts = {
        p for p in _files_under(tmp_path / release.name) if p.startswith("context/")
    }
    assert contexts == {f"context/{b.pk}.jsonl"}


def test_predictions_are_submitted_and_scored(api, release, tiny_stays, scorer):
    from exports.models import Submission
    from tests.exports.helpers import tiny_predictions

    submission = api.submit(
        release.pk, tiny_predictions(tiny_stays["windows"]), model_name="client", k=2
    )
    assert submission["state"] == "queued" and submission["prediction_count"] == 3
    scores = api.wait_for_scores(submission["id"], timeout=120, interval=0.2)
    # The hand computation of tests/exports/test_scoring.py at k = 2.
    o = scores["overall"]
    assert o["n_windows"] == 4 and o["n_missing_predictions"] == 1
    assert o["status_accuracy"] == pytest.approx(0.5)
    assert o["status_macro_f1"] == pytest.approx(5 / 9)
    assert o["problems_recall_at_k"] == pytest.approx(1 / 2)
    assert o["actions_hrr_at_k"] == pytest.approx(3 / 4)
    assert scores == Submission.objects.get(pk=submission["id"]).scores
    assert [s["id"] for s in api.submissions(release.pk)] == [submission["id"]]
    assert api.publish(submission["id"])["public"] is True


def test_a_predictions_file_is_submitted_from_its_path(
    api, release, tiny_stays, tmp_path, scorer
):
    path = tmp_path / "predictions.jsonl"
    w = tiny_stays["windows"]["C"][0]
    path.write_text(
        json.dumps(
            {
                "window_id": w.pk,
                "status": "stable",
                "acute_problems": ["Hypokalemia"],
                "recommended_actions": ["Potassium"],
            }
        )
        + "\n"
    )
    submission = api.submit(release.pk, path, model_name="from a file")
    scores = api.wait_for_scores(submission["id"], timeout=120, interval=0.2)
    # Right on the one window predicted; the three without a prediction count
    # as wrong.
    assert scores["overall"]["n_missing_predictions"] == 3
    assert scores["overall"]["status_accuracy"] == pytest.approx(1 / 4)
    assert scores["k"] == 5


def test_invalid_predictions_raise_every_message_and_store_nothing(
    api, release, tiny_stays
):
    from realicu_client import APIError

    from exports.models import Submission

    good = {
        "window_id": tiny_stays["windows"]["B"][0].pk,
        "status": "improving",
        "acute_problems": [],
        "recommended_actions": [],
    }
    with pytest.raises(APIError) as caught:
        api.submit(
            release.pk,
            [good, {**good, "status": "better"}, {**good, "window_id": 10**9}],
            model_name="bad",
        )
    assert caught.value.status == 400
    assert "line 2" in caught.value.message and "line 3" in caught.value.message
    assert not Submission.objects.exists()


def test_a_failed_scoring_and_a_wait_that_runs_out_are_clear(api, release, tiny_stays):
    from realicu_client import ScoringFailed, ScoringTimeout

    from exports.models import Submission

    prediction = {
        "window_id": tiny_stays["windows"]["B"][0].pk,
        "status": "improving",
        "acute_problems": [],
        "recommended_actions": [],
    }
    queued = api.submit(release.pk, [prediction], model_name="waits")
    with pytest.raises(ScoringTimeout, match="still queued"):
        api.wait_for_scores(queued["id"], timeout=0)
    Submission.objects.filter(pk=queued["id"]).update(
        state="failed", error="MatcherUnavailable: no model"
    )
    with pytest.raises(ScoringFailed, match="MatcherUnavailable: no model"):
        api.wait_for_scores(queued["id"], timeout=5, interval=0.1)


def _readme_example() -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Python client", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_runs_end_to_end(
    live_server, token, release, scorer, tmp_path, monkeypatch
):
    from exports.models import Submission

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REALICU_URL", live_server.url)
    monkeypatch.setenv("REALICU_TOKEN", token)
    namespace: dict = {}
    exec(compile(_readme_example(), "README.md", "exec"), namespace)
    submission = Submission.objects.get()
    assert submission.state == "scored" and submission.release_id == release.pk
    assert namespace["scores"] == submission.scores
    assert submission.prediction_count == 4


def test_a_throttled_request_waits_the_servers_retry_after(api, release, monkeypatch):
    from types import SimpleNamespace

    import realicu_client.api as client_api
    from django.core.cache import cache
    from realicu_client import APIError
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(
        ScopedRateThrottle,
        "THROTTLE_RATES",
        {**ScopedRateThrottle.THROTTLE_RATES, "releases": "1/min"},
    )
    cache.clear()
    waits = []

    def sleep(seconds):
        # The minute is over: the server's counter starts again.
        waits.append(seconds)
        cache.clear()

    monkeypatch.setattr(
        client_api, "time", SimpleNamespace(sleep=sleep, monotonic=lambda: 0.0)
    )
    assert api.release(release.pk)["id"] == release.pk
    assert api.release(release.pk)["id"] == release.pk
    assert len(waits) == 1 and 0 < waits[0] <= client_api.MAX_RETRY_WAIT

    monkeypatch.setattr(client_api, "THROTTLE_RETRIES", 0)
    with pytest.raises(APIError) as caught:
        api.release(release.pk)
    assert caught.value.status == 429
    assert "throttled" in caught.value.message
    cache.clear()
