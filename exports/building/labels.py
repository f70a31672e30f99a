"""The labels a release is made of: its rows (a campaign's Gold consensus or an
Oracle run's labels, by stay then window) and each window's labels as released,
with pseudonymous raters and no trace of hindsight records (codes assigned after
discharge, outcomes, discharge summaries: annotation.evidence)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings

from annotation.evidence import hindsight_record_q
from annotation.models import ConsensusLabel, ConsensusStatusSource
from annotation.services.agreement import RECOMMENDING_RATINGS
from exports.models import Release, ReleaseKind
from oracle.models import OracleLabel, OracleLabelState
from windows.models import Event, EventKind

SET_TASKS = ("acute_problems", "recommended_actions", "red_flags")


def rater_pseudonym(*, release: Release, user_id: int) -> str:
    """A rater id that is stable within one release and says nothing of the
    account: a keyed hash of the release and the user id."""
    return _pseudonym(
        settings.SECRET_KEY, f"{release.kind}:{release.version}:{user_id}"
    )


@lru_cache(maxsize=1024)
def _pseudonym(key: str, message: str) -> str:
    # Cached: a release names the same few raters on every item of every
    # window (a keyed hash each time was a tenth of a Gold build, issue 35).
    digest = hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()
    return f"rater-{digest[:10]}"


def _gold_labels(consensus: ConsensusLabel, release: Release) -> dict:
    """The consensus of one window as released: kept items with their evidence,
    provenance and pseudonymous raters; no label ids, no decisions."""
    adjudicated = consensus.status_source == ConsensusStatusSource.SETTLED
    labels: dict[str, Any] = {
        "status": {
            "value": consensus.status or None,
            "evidence": list(consensus.status_evidence or []),
            "provenance": {
                "source": "adjudicated" if adjudicated else "consensus",
                "status_source": consensus.status_source,
            },
        }
    }
    for task in SET_TASKS:
        labels[task] = [
            {
                "text": item["text"],
                "evidence": list(item.get("evidence", [])),
                "provenance": {
                    "source": item.get("source", "consensus"),
                    "raters": [
                        rater_pseudonym(release=release, user_id=a)
                        for a in item.get("annotators", [])
                    ],
                    # The phrasings are kept (the reference's paraphrases) but
                    # sorted, so their order does not pair them with the raters
                    # (README "Threat model").
                    "texts": sorted(set(item.get("texts", [item["text"]]))),
                },
            }
            for item in (consensus.items or {}).get(task, [])
        ]
    return labels


def _oracle_labels(
    label: OracleLabel, action_names: dict[int, str], coded_ids: frozenset = frozenset()
) -> dict:
    """An Oracle label as released: the payload's items made into the three set
    tasks as for physicians (spec section 3: recommended actions are the
    recorded actions rated best practice or acceptable, plus additions).
    Ratings of coded records (``coded_ids``) are not actions and are left out."""
    payload = label.payload or {}
    provenance = {
        "source": "oracle",
        "oracle_run_id": label.run_id,
        "backbone_kind": label.backbone_kind,
        "model": label.model,
        "prompt_version": label.prompt_version,
    }

    def item(text: str, evidence) -> dict:
        return {
            "text": text,
            "evidence": list(evidence or []),
            "provenance": provenance,
        }

    actions = [
        item(
            action_names.get(rating.get("event_id"), f"event {rating.get('event_id')}"),
            [rating.get("event_id"), *rating.get("evidence", [])],
        )
        for rating in payload.get("action_ratings", [])
        if rating.get("rating") in RECOMMENDING_RATINGS
        and rating.get("event_id") not in coded_ids
    ]
    actions += [
        item(entry["text"], entry.get("evidence"))
        for entry in payload.get("added_actions", [])
    ]
    return {
        "status": {
            "value": label.status or None,
            "evidence": list(payload.get("status_evidence", [])),
            "provenance": provenance,
        },
        "acute_problems": [
            item(entry["text"], entry.get("evidence"))
            for entry in payload.get("acute_problems", [])
        ],
        "recommended_actions": actions,
        "red_flags": [
            item(entry["text"], entry.get("evidence"))
            for entry in payload.get("red_flags", [])
        ],
    }


@dataclass(frozen=True)
class CodedRecords:
    """A stay's hindsight records (annotation.evidence.hindsight_record_q:
    codes assigned after discharge, outcomes, discharge summaries): their ids,
    and the names of the coded ones (``"ICD10PCS 5A1955Z"``). Labels made
    before such records were refused as evidence may cite them, or have rated
    coded records as actions: a release keeps neither."""

    ids: frozenset[int] = frozenset()
    names: frozenset[str] = frozenset()

    @classmethod
    def of_admission(cls, admission_id: int) -> CodedRecords:
        return cls.of_admissions([admission_id]).get(admission_id, cls())

    @classmethod
    def of_admissions(cls, admission_ids) -> dict[int, CodedRecords]:
        """Each admission's records, in one query; an admission without any
        is left out (``CodedRecords()``)."""
        rows = Event.objects.filter(
            hindsight_record_q(), admission_id__in=list(admission_ids)
        ).values_list("admission_id", "id", "kind", "name")
        found: dict[int, tuple[set, set]] = {}
        for admission_id, pk, kind, name in rows:
            ids, names = found.setdefault(admission_id, (set(), set()))
            ids.add(pk)
            if kind == EventKind.CODED:
                names.add(name)
        return {
            admission_id: cls(frozenset(ids), frozenset(names))
            for admission_id, (ids, names) in found.items()
        }


def labels_without_coded(labels: dict, coded: CodedRecords) -> dict:
    """``labels`` with no trace of a hindsight record: their evidence ids
    dropped, and items that stand for a coded record (a rating of it as an
    action, named by its code) left out."""
    if not coded.ids:
        return labels
    status = labels["status"]
    out = {
        "status": {
            **status,
            "evidence": [e for e in status["evidence"] if e not in coded.ids],
        }
    }
    for task in SET_TASKS:
        out[task] = []
        for item in labels[task]:
            if item["text"] in coded.names:
                continue
            evidence = [e for e in item["evidence"] if e not in coded.ids]
            item = {**item, "evidence": evidence}
            texts = item["provenance"].get("texts")
            if texts:
                item["provenance"] = {
                    **item["provenance"],
                    "texts": [t for t in texts if t not in coded.names],
                }
            out[task].append(item)
    return out


def release_label_rows(release: Release):
    """The rows a release is made of, by stay then window, streamed."""
    if release.kind == ReleaseKind.GOLD:
        qs = ConsensusLabel.objects.filter(
            campaign_id=release.campaign_id, dropped=False, dispute_count=0
        ).defer("open_disputes")
    else:
        # The raw replies can be long and are not released.
        qs = OracleLabel.objects.filter(
            run_id=release.oracle_run_id, state=OracleLabelState.OK
        ).defer("raw_response", "error", "parameters")
    # Every row brings its window's stay, admission and patient: their JSON
    # columns that a release does not use (the admission's diagnoses, the
    # stay's source ids) would be decoded once per window (issue 35).
    return (
        qs.select_related("window__stay__admission__patient")
        .defer("window__stay__admission__diagnoses", "window__stay__source_ids")
        .order_by("window__stay_id", "window__index")
    )
