"""The stages of tests/test_full_flow.py's end-to-end run, each through the
real pages and API: the CLIF demo slice it imports, the campaign and its labels,
the agreement dashboard, adjudication, the Oracle and the releases, the
researcher's downloads and a prediction file built to known scores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Campaign, ConsensusLabel
from annotation.selectors import recorded_critical_actions
from exports.models import Release, ReleaseKind, ReleaseState
from oracle.models import OracleLabel, OracleRun, RunState, ValidationJob
from tests.workers import wait_for
from windows.models import Event, EventKind, Stay, Window
from windows.selectors_context import OUTCOME_REVEALING_CATEGORIES, bedside_events

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


def clif_demo_slice(source: Path, folder: Path) -> Path:
    """A copy in ``folder`` of the CLIF demo in ``source``, holding only
    HOSPITALIZATIONS and their patients (benchmarks/oracle_smollm2_bench.py
    imports the same four stays)."""
    hosp = pd.read_parquet(source / "clif_hospitalization.parquet")
    chosen = hosp[hosp["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)]
    patients = set(chosen["patient_id"].astype(str))
    assert len(chosen) == len(patients) == len(HOSPITALIZATIONS)
    for path in sorted(source.glob("clif_*.parquet")):
        table = pd.read_parquet(path)
        if "hospitalization_id" in table.columns:
            keep = table["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)
        else:
            keep = table["patient_id"].astype(str).isin(patients)
        table[keep].to_parquet(folder / path.name)
    return folder


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
