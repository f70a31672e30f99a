"""A window of a Gold campaign labelled by two physicians, its agreement built
by hand (no matcher: the test says which items mean the same thing), for the
adjudication workspace's tests: evidence to name, ratings that differ, and two
problems the matcher would keep apart ("Hyperlactatemia", "Elevated lactate")."""

from __future__ import annotations

from django.utils import timezone

from annotation.models import ConsensusTask, Label, WindowAgreement
from annotation.services import campaign_create, consensus_build
from annotation.services.agreement import label_items, rated_event_names
from annotation.services.consensus import SET_TASKS

from .conftest import make_gold_windows
from .consensus_data import submit

# Wordings the hand-built agreement matches with an earlier one.
SAME_AS = {
    "Shock due to sepsis": "Septic shock",
    "Avoid excessive fluids": "Avoid fluid overload",
}


def _clusters(items_by_label: list[list[dict]]) -> list[dict]:
    """Items grouped as SAME_AS says (ratings of one event together), in the
    shape annotation.services.agreement writes."""
    groups: dict = {}
    for items in items_by_label:
        for item in items:
            key = item["event_id"] or SAME_AS.get(item["text"], item["text"])
            groups.setdefault(key, []).append(item)
    clusters = []
    for members in groups.values():
        annotators = list(dict.fromkeys(m["annotator_id"] for m in members))
        clusters.append(
            {
                "id": members[0]["ref"],
                "kept": len(annotators) >= 2,
                "annotators": annotators,
                "items": members,
            }
        )
    return clusters


def _pairwise(labels, clusters: list[dict]) -> dict:
    """Semantic F1 of each pair of labels over the hand-made clusters: items
    of both labels in one cluster match (two empty lists agree fully)."""
    pairs = []
    for n, a in enumerate(labels):
        for b in labels[n + 1 :]:
            count = {
                pk: sum(1 for c in clusters for i in c["items"] if i["label_id"] == pk)
                for pk in (a.pk, b.pk)
            }
            matched = sum(
                1
                for c in clusters
                if {a.pk, b.pk} <= {i["label_id"] for i in c["items"]}
            )
            total = count[a.pk] + count[b.pk]
            pairs.append(
                {
                    "labels": [a.pk, b.pk],
                    "annotators": [
                        a.assignment.annotator_id,
                        b.assignment.annotator_id,
                    ],
                    "f1": 2 * matched / total if total else 1.0,
                }
            )
    return {"mean": sum(p["f1"] for p in pairs) / len(pairs), "pairs": pairs}


def agreement_by_hand(*, campaign, window) -> WindowAgreement:
    labels = list(
        Label.objects.filter(assignment__campaign=campaign, assignment__window=window)
        .select_related("assignment")
        .order_by("pk")
    )
    names = rated_event_names(labels)
    items = [label_items(label, names) for label in labels]
    statuses = [label.status for label in labels]
    agreed = len(set(statuses)) == 1
    clusters = {task: _clusters([i[task] for i in items]) for task in SET_TASKS}
    return WindowAgreement.objects.create(
        campaign=campaign,
        window=window,
        computed_at=timezone.now(),
        labels=[
            {
                "label_id": label.pk,
                "version": label.version,
                "annotator_id": label.assignment.annotator_id,
                "status": label.status,
                "status_evidence": list(label.payload.get("status_evidence", [])),
            }
            for label in labels
        ],
        statuses={str(label.pk): label.status for label in labels},
        status_agreed=agreed,
        status_value=statuses[0] if agreed else "",
        pairwise_f1={task: _pairwise(labels, clusters[task]) for task in SET_TASKS},
        clusters=clusters,
        matcher_model="hand-built",
        tau=0.5,
    )


def hand_built_window(*, admin, physicians, stay, clinical):
    """Window 0 of a two-physician campaign, both labels submitted, agreement
    by hand, consensus built. Returns (campaign, window)."""
    c = clinical
    window = make_gold_windows(stay=stay, count=1)[0]
    campaign = campaign_create(
        admin=admin, name="Workspace", windows=[window], physicians=physicians
    )
    a, b = physicians
    ne, vent, lactate = c["norepinephrine"].pk, c["intubation"].pk, c["lactate"].pk
    submit(
        a,
        campaign,
        window,
        "deteriorating",
        status_evidence=[lactate],
        problems=[("Septic shock", [lactate, ne]), ("Hyperlactatemia", [lactate])],
        flags=[("Avoid fluid overload", [ne])],
        ratings={ne: "best_practice", vent: "acceptable"},
    )
    submit(
        b,
        campaign,
        window,
        "deteriorating",
        status_evidence=[ne, c["heart_rate"].pk],
        problems=[
            ("Shock due to sepsis", [ne]),
            ("Elevated lactate", [lactate, c["heart_rate"].pk]),
        ],
        flags=[("Avoid excessive fluids", [lactate])],
        ratings={ne: "acceptable", vent: "potentially_harmful"},
    )
    agreement_by_hand(campaign=campaign, window=window)
    consensus_build(campaign=campaign, window=window)
    return campaign, window


def cluster_of(campaign, window, text: str, task=ConsensusTask.ACUTE_PROBLEMS):
    agreement = WindowAgreement.objects.get(campaign=campaign, window=window)
    return next(
        c
        for c in agreement.clusters[task]
        if any(i["text"] == text for i in c["items"])
    )
