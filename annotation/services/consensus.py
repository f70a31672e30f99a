"""The consensus label of a window (spec section 4): built from the window's
agreement (annotation.services.agreement) and the admins' adjudication
decisions. An agreed status and the items several physicians gave are kept
automatically, decided disputes as decided, and everything else is an open
dispute."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    AdjudicationAction,
    AdjudicationDecision,
    Campaign,
    CampaignWindow,
    ConsensusLabel,
    ConsensusStatusSource,
    ConsensusTask,
    WindowAgreement,
)
from windows.models import Window

# The set tasks, in the order pages show them.
SET_TASKS = (
    ConsensusTask.ACUTE_PROBLEMS,
    ConsensusTask.RECOMMENDED_ACTIONS,
    ConsensusTask.RED_FLAGS,
)
# What an admin decides on one item of a set task.
ITEM_ACTIONS = (
    AdjudicationAction.ACCEPT,
    AdjudicationAction.REWRITE,
    AdjudicationAction.DROP,
)


def _merged(cluster: dict) -> dict:
    texts = list(dict.fromkeys(m["text"] for m in cluster["items"]))
    evidence = sorted({e for m in cluster["items"] for e in m["evidence"]})
    return {
        "text": texts[0],
        "texts": texts,
        "evidence": evidence,
        "cluster_id": cluster["id"],
        "label_ids": [m["label_id"] for m in cluster["items"]],
        "annotators": cluster["annotators"],
    }


def _merges(task: str, clusters: list[dict], decisions: list) -> dict[str, dict]:
    """The merge decisions on ``task``'s clusters (annotation.services.
    adjudication.adjudication_merge), by merged cluster id: ``{"first": the
    first merged cluster present, "item": the one consensus item}``, worded as
    decided, with the texts, evidence, labels and annotators of every merged
    cluster. Clusters a recompute no longer has are left out."""
    by_id = {c["id"]: c for c in clusters}
    result: dict[str, dict] = {}
    for decision in decisions:
        if decision.action != AdjudicationAction.MERGE or decision.task != task:
            continue
        present = [
            by_id[ref]
            for ref in (decision.context or {}).get("merged", [])
            if ref in by_id and ref not in result
        ]
        if not present:
            continue
        members = [m for c in present for m in c["items"]]
        item = {
            "text": decision.new_text,
            "texts": list(dict.fromkeys(m["text"] for m in members)),
            "evidence": sorted({e for m in members for e in m["evidence"]}),
            "cluster_id": present[0]["id"],
            "cluster_ids": [c["id"] for c in present],
            "label_ids": [m["label_id"] for m in members],
            "annotators": list(
                dict.fromkeys(a for c in present for a in c["annotators"])
            ),
            "source": "adjudicated",
            "decision_id": decision.pk,
        }
        # ``clusters`` is in order, so the first present is the first shown.
        first = next(c["id"] for c in clusters if c in present)
        for cluster in present:
            result[cluster["id"]] = {"first": first, "item": item}
    return result


def majority_status(statuses: list[str]) -> str:
    """The status of a strict majority of three or more raters, else ''."""
    if len(statuses) < 3:
        return ""
    value, count = max(
        ((s, statuses.count(s)) for s in dict.fromkeys(statuses)),
        key=lambda pair: pair[1],
    )
    return value if count * 2 > len(statuses) else ""


def consensus_status_evidence(agreement: WindowAgreement, status: str) -> list[int]:
    """The consensus status's evidence (spec section 3: every label cites its
    evidence): the union of the evidence of the labels whose status is the
    consensus one, i.e. all of them when agreed, the majority's, or, for a
    settled status, the labels that gave the settled value (none, if the admin
    chose a status nobody gave)."""
    if not status:
        return []
    return sorted(
        {
            int(event_id)
            for entry in agreement.labels
            if entry["status"] == status
            for event_id in entry.get("status_evidence") or []
        }
    )


def consensus_fields(
    agreement: WindowAgreement, decisions: list[AdjudicationDecision]
) -> dict:
    """The fields of the window's ConsensusLabel from its agreement and its
    adjudication decisions (in order): no query."""
    dropped = any(d.action == AdjudicationAction.DROP_WINDOW for d in decisions)
    by_item = {(d.task, d.item_ref): d for d in decisions if d.action in ITEM_ACTIONS}
    disputes: list[dict] = []

    statuses = [entry["status"] for entry in agreement.labels]
    status, source, status_decision = "", "", None
    if agreement.status_agreed:
        status, source = agreement.status_value, ConsensusStatusSource.AGREED
    elif majority := majority_status(statuses):
        status, source = majority, ConsensusStatusSource.MAJORITY
    else:
        settled = [d for d in decisions if d.action == AdjudicationAction.SETTLE_STATUS]
        if settled:
            status_decision = settled[-1]
            status = status_decision.new_status
            source = ConsensusStatusSource.SETTLED
        else:
            disputes.append(
                {
                    "task": ConsensusTask.STATUS,
                    "item_ref": "",
                    "kind": "status_disagreement",
                    "texts": statuses,
                }
            )

    items: dict[str, list[dict]] = {}
    for task in SET_TASKS:
        kept = []
        clusters = agreement.clusters.get(task, [])
        merges = _merges(task, clusters, decisions)
        for cluster in clusters:
            merge = merges.get(cluster["id"])
            if merge is not None:
                # The merged item stands where its first cluster stood.
                if merge["first"] == cluster["id"]:
                    kept.append(merge["item"])
                continue
            merged = _merged(cluster)
            if cluster["kept"]:
                kept.append({**merged, "source": "consensus", "decision_id": None})
                continue
            decision = by_item.get((task, cluster["id"]))
            if decision is None:
                disputes.append(
                    {
                        "task": task,
                        "item_ref": cluster["id"],
                        "kind": "unmatched_item",
                        "texts": merged["texts"],
                        "annotators": cluster["annotators"],
                    }
                )
            elif decision.action != AdjudicationAction.DROP:
                text = (
                    decision.new_text
                    if decision.action == AdjudicationAction.REWRITE
                    else merged["text"]
                )
                kept.append(
                    {
                        **merged,
                        "text": text,
                        "source": "adjudicated",
                        "decision_id": decision.pk,
                    }
                )
        items[task] = kept

    if dropped:
        disputes = []
    return {
        "agreement": agreement,
        "built_at": timezone.now(),
        "status": status,
        "status_source": source,
        "status_decision": status_decision,
        "status_evidence": consensus_status_evidence(agreement, status),
        "dropped": dropped,
        "items": items,
        "open_disputes": disputes,
        "dispute_count": len(disputes),
    }


@transaction.atomic
def consensus_build(*, campaign: Campaign, window: Window) -> ConsensusLabel:
    """(Re)build the window's consensus from its agreement and the adjudication
    decisions: agreed status and matched items are kept automatically, decided
    disputes as decided, and everything else is an open dispute."""
    agreement = WindowAgreement.objects.filter(campaign=campaign, window=window).first()
    if agreement is None:
        raise ValidationError(
            f"Agreement on {window} is not computed yet; it is computed once every "
            "assigned label is submitted."
        )
    decisions = list(
        AdjudicationDecision.objects.filter(campaign=campaign, window=window)
    )
    fields = consensus_fields(agreement, decisions)
    consensus, _ = ConsensusLabel.objects.update_or_create(
        campaign=campaign, window=window, defaults=fields
    )
    if decisions and not fields["open_disputes"]:
        CampaignWindow.objects.filter(
            campaign=campaign, window=window, adjudicated_at__isnull=True
        ).update(adjudicated_at=fields["built_at"])
    if not fields["open_disputes"]:
        # Closed for good (annotation.blindness): labels final, raters unblinded.
        CampaignWindow.objects.filter(
            campaign=campaign, window=window, closed_at__isnull=True
        ).update(closed_at=fields["built_at"])
    return consensus


# The fields ``consensus_fields`` returns: what a bulk upsert of consensus rows
# updates (annotation.services.agreement.campaign_agreement_refresh).
CONSENSUS_FIELDS = (
    "agreement",
    "built_at",
    "status",
    "status_source",
    "status_decision",
    "status_evidence",
    "dropped",
    "items",
    "open_disputes",
    "dispute_count",
)


__all__ = [
    "CONSENSUS_FIELDS",
    "ITEM_ACTIONS",
    "SET_TASKS",
    "consensus_build",
    "consensus_fields",
    "consensus_status_evidence",
    "majority_status",
]
