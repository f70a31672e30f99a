"""A surveillance release built from a cohort (spec section 10): its records and
files, the leak check (no context event at or after a checkpoint is behind it,
nothing after the last checkpoint is released), checksums, the data card's
finding frequencies; predictions validated line by line and scored by hand
through the API; the leaderboard."""

import hashlib
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from accounts.roles import Role
from exports.building import release_build
from exports.models import ReleaseKind, ReleaseState, Submission, SubmissionState
from exports.scoring_surveillance import surveillance_scores
from exports.services import (
    release_create,
    submission_publish,
    submission_score,
    token_create,
)
from tests.annotation.conftest import make_role_user
from tests.exports.conftest import release_dirs  # noqa: F401 - autouse fixture
from tests.factories import lab, make_admission, make_event, make_stay
from windows.models import Cohort, CohortStay

pytestmark = pytest.mark.django_db


@pytest.fixture
def cohort(db):
    """Stay A, 10 h: lactate 4.5 at 1.5 h, INR 2.5 at 5.5 h, lactate 1.0
    exactly at 8 h and 9 h (at and after checkpoint 8, the last);
    stay B, 6 h: nothing abnormal."""
    adm_a = make_admission()
    a = make_stay(admission=adm_a, hours=10)
    lab(a, "lactate", 4.5, 1.5)
    lab(a, "inr", 2.5, 5.5)
    at_8 = lab(a, "lactate", 1.0, 8.0)
    after = lab(a, "lactate", 1.0, 9.0)
    adm_b = make_admission()
    b = make_stay(admission=adm_b, hours=6)
    make_event(admission=adm_b, time=b.intime + timedelta(hours=1))
    group = Cohort.objects.create(name="c", seed=1, target_size=2)
    for stay in (a, b):
        CohortStay.objects.create(cohort=group, stay=stay, stratum="survived_short")
    return {"cohort": group, "a": a, "b": b, "at_8": at_8, "after": after}


@pytest.fixture
def release(cohort, admin_user):
    created = release_create(
        user=admin_user, kind=ReleaseKind.SURVEILLANCE, cohort=cohort["cohort"]
    )
    return release_build(release=created)


def _folder(release, settings) -> Path:
    return Path(settings.REALICU_RELEASES_DIR) / release.directory


def _records(folder: Path) -> list[dict]:
    lines = (folder / "checkpoints.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_surveillance_release_needs_a_cohort(admin_user):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="cohort"):
        release_create(user=admin_user, kind=ReleaseKind.SURVEILLANCE)


def test_release_holds_one_record_per_checkpoint_with_its_decision(
    release, cohort, settings
):
    assert release.state == ReleaseState.READY and release.window_count == 5
    records = _records(_folder(release, settings))
    a, b = cohort["a"].pk, cohort["b"].pk
    assert [(r["stay_id"], r["hours_since_admit"]) for r in records] == [
        (a, 0),
        (a, 4),
        (a, 8),
        (b, 0),
        (b, 4),
    ]
    by = {(r["stay_id"], r["hours_since_admit"]): r["labels"] for r in records}
    assert by[(a, 0)]["global_action"] == "continue_monitoring"
    assert by[(a, 4)]["alerts"] == ["severe_hyperlactatemia"]
    assert by[(a, 4)]["priority"] == "high"
    # The lactate of 1.0 at exactly 8 h is not yet known at checkpoint 8.
    assert by[(a, 8)]["alerts"] == ["severe_coagulopathy", "severe_hyperlactatemia"]
    evidence = {f["name"]: f["evidence"] for f in by[(a, 8)]["findings"]}
    assert evidence["severe_hyperlactatemia"] == [
        {"track": "lactate", "hour": 8.0, "value": 4.5}
    ]
    assert by[(b, 4)] == {
        "hours_since_admit": 4,
        "suspected_conditions": [],
        "alerts": [],
        "global_action": "continue_monitoring",
        "priority": "low",
        "findings": [],
    }


def test_context_is_leak_free(release, cohort, settings):
    folder = _folder(release, settings)
    records = _records(folder)
    for record in records:
        lines = (folder / record["context_file"]).read_text().splitlines()
        events = [json.loads(line) for line in lines]
        last = max(
            r["hours_since_admit"] for r in records if r["stay_id"] == record["stay_id"]
        )
        # The file holds nothing at or after the stay's last checkpoint.
        assert all(e["hours_since_admit"] < last for e in events)
    ids = {
        json.loads(line)["event_id"]
        for line in (folder / f"context/{cohort['a'].pk}.jsonl").read_text().split()
    }
    assert cohort["at_8"].pk not in ids and cohort["after"].pk not in ids
    assert len(ids) == 2  # the lactate at 1.5 h and the INR at 5.5 h


def test_manifest_checksums_and_data_card(release, settings):
    folder = _folder(release, settings)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "surveillance"
    for entry in manifest["files"]:
        data = (folder / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    counts = manifest["counts"]
    assert counts["checkpoints"] == 5 and counts["stays"] == 2
    assert counts["finding_checkpoints"]["severe_hyperlactatemia"] == 2
    assert counts["finding_checkpoints"]["severe_coagulopathy"] == 1
    assert counts["finding_stays"]["severe_hyperlactatemia"] == 1
    assert counts["global_action"] == {"continue_monitoring": 3, "escalate": 2}
    card = (folder / "DATACARD.md").read_text()
    assert (
        "| severe_hyperlactatemia | metabolic | alert | current | 2 | 40.0 | 1 |"
        in (card)
    )


def test_scores_by_hand():
    def rec(cid, stay, action, priority, alerts=(), suspected=()):
        return {
            "checkpoint_id": cid,
            "stay_id": stay,
            "hours_since_admit": cid % 1000,
            "labels": {
                "global_action": action,
                "priority": priority,
                "alerts": list(alerts),
                "suspected_conditions": list(suspected),
            },
        }

    gold = [
        rec(1000, 1, "continue_monitoring", "low"),
        rec(1004, 1, "escalate", "high", ["shock"], ["hypotension"]),
        rec(2000, 2, "escalate", "high", ["crrt"]),
    ]
    predictions = {
        1000: {"global_action": "continue_monitoring", "priority": "low"},
        1004: {"global_action": "escalate", "priority": "medium",
               "alerts": ["shock", "crrt"], "suspected_conditions": []},
    }  # fmt: skip
    overall = surveillance_scores(gold=gold, predictions=predictions)["overall"]
    assert overall["action_accuracy"] == pytest.approx(2 / 3)
    assert overall["trajectory_accuracy"] == pytest.approx(1 / 2)
    assert overall["priority_accuracy"] == pytest.approx(1 / 3)
    # shock: F1 1; crrt: one false positive, one miss: F1 0.
    assert overall["alerts_f1"] == pytest.approx(0.5)
    # hypotension missed: F1 0.
    assert overall["suspected_f1"] == pytest.approx(0.0)
    assert overall["predicted"] == 2 and overall["stays"] == 2


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).key}")
    return client


def _upload(lines: list) -> io.BytesIO:
    body = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    handle = io.BytesIO(body.encode())
    handle.name = "p.jsonl"
    return handle


def test_download_submit_and_score_through_the_api(release, cohort):
    researcher = make_role_user(Role.RESEARCHER)
    client = _client(researcher)
    listed = client.get("/api/v1/releases/").json()
    assert release.pk in [r["id"] for r in listed["results"]]
    body = client.get(f"/api/v1/releases/{release.pk}/files/checkpoints.jsonl")
    assert body.status_code == 200
    records = [
        json.loads(line) for line in b"".join(body.streaming_content).splitlines()
    ]
    url = f"/api/v1/releases/{release.pk}/submissions/"
    first = records[0]["checkpoint_id"]
    bad = _upload(
        [
            {"checkpoint_id": first, "global_action": "panic", "priority": "low",
             "suspected_conditions": [], "alerts": ["sepsis", "fever"]},
            {"checkpoint_id": 7, "global_action": "escalate", "priority": "high",
             "suspected_conditions": [], "alerts": []},
            {"checkpoint_id": first, "global_action": "escalate",
             "priority": "urgent", "suspected_conditions": "aki", "alerts": []},
            "not json",
        ]
    )  # fmt: skip
    response = client.post(url, {"file": bad, "model_name": "m"}, format="multipart")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert any("line 1: global_action 'panic'" in m for m in detail)
    assert any("line 1: alerts has unknown finding(s) 'fever'" in m for m in detail)
    assert any("line 2: checkpoint 7 is not in" in m for m in detail)
    assert any("line 3: priority 'urgent'" in m for m in detail)
    assert any("line 3: suspected_conditions must be a list" in m for m in detail)
    assert any("line 4: not valid JSON" in m for m in detail)
    assert not Submission.objects.exists()

    # The labels themselves as predictions, the second stay's last one left out.
    lines = [
        {"checkpoint_id": r["checkpoint_id"], **{k: r["labels"][k] for k in (
            "global_action", "priority", "suspected_conditions", "alerts")}}
        for r in records[:-1]
    ]  # fmt: skip
    response = client.post(
        url, {"file": _upload(lines), "model_name": "oracle"}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    submission = submission_score(submission=Submission.objects.get())
    assert submission.state == SubmissionState.SCORED
    overall = client.get(f"/api/v1/submissions/{submission.pk}/").json()["scores"][
        "overall"
    ]
    # The missing checkpoint (continue_monitoring, low) is wrong: 4 of 5.
    assert overall["action_accuracy"] == pytest.approx(4 / 5)
    assert overall["trajectory_accuracy"] == pytest.approx(1 / 2)
    assert overall["priority_accuracy"] == pytest.approx(4 / 5)
    assert overall["alerts_f1"] == pytest.approx(1.0)

    submission_publish(user=researcher, submission=submission, public=True)
    client.force_login(researcher)
    page = client.get(f"/releases/{release.pk}/leaderboard/")
    assert page.status_code == 200
    assert b"oracle" in page.content and b"0.800" in page.content
    detail_page = client.get(f"/releases/submissions/{submission.pk}/")
    assert detail_page.status_code == 200 and b"Trajectory acc" in detail_page.content


def test_admin_queues_one_from_the_releases_page_and_rebuilds_it(
    release, cohort, admin_user
):
    from django.test import Client

    from exports.models import Release
    from exports.services import release_rebuild

    client = Client()
    client.force_login(admin_user)
    page = client.get("/releases/")
    assert b'name="cohort"' in page.content and b"CodeClinic surveillance" in (
        page.content
    )
    refused = client.post("/releases/build/", {"kind": "surveillance"})
    assert refused.status_code == 400
    assert b"Choose the cohort whose stays to checkpoint." in refused.content
    assert Release.objects.count() == 1
    queued = client.post(
        "/releases/build/", {"kind": "surveillance", "cohort": cohort["cohort"].pk}
    )
    assert queued.status_code == 302
    assert Release.objects.filter(kind="surveillance", version=2).exists()
    again = release_rebuild(user=admin_user, release=release)
    assert again.version == 3 and again.cohort_id == cohort["cohort"].pk
    detail = client.get(f"/releases/{release.pk}/")
    assert detail.status_code == 200 and b"5 checkpoints" in detail.content


def test_client_gives_each_checkpoint_the_events_before_it(release, cohort, settings):
    import sys

    client_dir = str(Path(__file__).resolve().parents[2] / "client")
    if client_dir not in sys.path:  # the client is pip-installed by researchers
        sys.path.insert(0, client_dir)
    from realicu_client import parse_time
    from realicu_client.surveillance import iterate_checkpoints, prediction

    points = list(iterate_checkpoints(_folder(release, settings)))
    assert len(points) == 5
    a = [p for p in points if p.record["stay_id"] == cohort["a"].pk]
    assert [p.hours_since_admit for p in a] == [0, 4, 8]
    assert [len(p.context) for p in a] == [0, 1, 2]
    for point in points:
        moment = parse_time(point.record["time"])
        assert all(parse_time(e["time"]) < moment for e in point.context)
    line = prediction(a[1].record, global_action="escalate", priority="high",
                      alerts=["severe_hyperlactatemia"])  # fmt: skip
    assert line["checkpoint_id"] == a[1].checkpoint_id
    assert line["alerts"] == a[1].labels["alerts"]
