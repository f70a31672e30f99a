"""Agreement between the physicians of a window (spec section 4): each label's
items per set task, grouped by meaning across labels, with the status agreement
and pairwise semantic F1; for one window or a whole campaign, each followed by
its consensus (annotation.services.consensus). And the hooks of label_submit /
label_reopen: the last submit of a window queues its agreement through the
outbox, a reopen forgets it."""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    ActionRating,
    AdjudicationDecision,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignWindow,
    ConsensusLabel,
    ConsensusTask,
    Label,
    WindowAgreement,
)
from annotation.selectors.agreement import windows_due_agreement
from annotation.services.consensus import (
    CONSENSUS_FIELDS,
    SET_TASKS,
    consensus_build,
    consensus_fields,
)
from evaluation.setmatch import match_matrix, match_sets, pairwise_semantic_f1
from jobs.outbox import outbox_send
from windows.actions import action_text_of
from windows.models import Event, Window

# Ratings that put a recorded action into the Recommended Actions set (spec 3).
RECOMMENDING_RATINGS = (ActionRating.BEST_PRACTICE, ActionRating.ACCEPTABLE)
# Similarity given to two ratings of the same recorded event: above any cosine,
# so they are matched with each other first.
SAME_EVENT_SIMILARITY = 2.0


# Label items ------------------------------------------------------------------


def _item_ref(label_id: int, field: str, index: int) -> str:
    return f"{label_id}/{field}/{index}"


def label_items(label: Label, event_names: dict[int, str]) -> dict[str, list[dict]]:
    """The label's items per set task, each with where it comes from."""
    payload = label.payload or {}
    annotator_id = label.assignment.annotator_id

    def item(field, index, text, evidence, event_id=None):
        return {
            "ref": _item_ref(label.pk, field, index),
            "label_id": label.pk,
            "annotator_id": annotator_id,
            "field": field,
            "index": index,
            "text": text,
            "evidence": list(evidence or []),
            "event_id": event_id,
        }

    actions = [
        item(
            "action_ratings",
            n,
            event_names.get(rating["event_id"], f"event {rating['event_id']}"),
            [rating["event_id"], *rating.get("evidence", [])],
            rating["event_id"],
        )
        for n, rating in enumerate(payload.get("action_ratings", []))
        if rating.get("rating") in RECOMMENDING_RATINGS
    ]
    actions += [
        item("added_actions", n, entry["text"], entry.get("evidence"))
        for n, entry in enumerate(payload.get("added_actions", []))
    ]
    return {
        ConsensusTask.ACUTE_PROBLEMS: [
            item("acute_problems", n, entry["text"], entry.get("evidence"))
            for n, entry in enumerate(payload.get("acute_problems", []))
        ],
        ConsensusTask.RECOMMENDED_ACTIONS: actions,
        ConsensusTask.RED_FLAGS: [
            item("red_flags", n, entry["text"], entry.get("evidence"))
            for n, entry in enumerate(payload.get("red_flags", []))
        ],
    }


def _similarity(matcher, a: list[str], b: list[str]) -> np.ndarray:
    if hasattr(matcher, "similarity"):
        return np.asarray(matcher.similarity(a, b), dtype=float)
    return match_matrix(a, b, matcher).astype(float)


def _clusters(items_by_label: list[list[dict]], matcher) -> list[dict]:
    """Group the items of several labels by meaning.

    Labels are taken in order; each label's items are matched one to one
    (``match_sets``, most similar first) with the clusters built so far, an item
    being as similar to a cluster as to its closest member; an unmatched item
    starts a new cluster. A cluster holds at most one item per label.
    """
    tau = getattr(matcher, "tau", 0.5)
    clusters: list[dict] = []
    for items in items_by_label:
        if not items:
            continue
        if clusters:
            members = [(c, m) for c, cluster in enumerate(clusters) for m in cluster]
            sim = _similarity(
                matcher, [i["text"] for i in items], [m["text"] for _, m in members]
            )
            per_cluster = np.full((len(items), len(clusters)), -np.inf)
            for col, (c, member) in enumerate(members):
                column = sim[:, col].copy()
                for row, entry in enumerate(items):
                    if entry["event_id"] and entry["event_id"] == member["event_id"]:
                        column[row] = SAME_EVENT_SIMILARITY
                per_cluster[:, c] = np.maximum(per_cluster[:, c], column)
            pairs = match_sets(
                [i["text"] for i in items],
                [str(c) for c in range(len(clusters))],
                similarity=per_cluster,
                tau=tau,
            )
        else:
            pairs = []
        matched = dict(pairs)
        for row, entry in enumerate(items):
            if row in matched:
                clusters[matched[row]].append(entry)
            else:
                clusters.append([entry])
    result = []
    for members in clusters:
        annotators = list(dict.fromkeys(m["annotator_id"] for m in members))
        result.append(
            {
                "id": members[0]["ref"],
                "kept": len(annotators) >= 2,
                "annotators": annotators,
                "items": members,
            }
        )
    return result


# Agreement --------------------------------------------------------------------


def _window_labels(
    *, campaign: Campaign, window: Window, lock: bool = False
) -> list[Label]:
    """The submitted labels of the window's active assignments, or a
    ValidationError saying how many are still missing. ``lock`` (inside a
    transaction) holds the assignments until it ends, so a reopen waits."""
    assignments = Assignment.objects.filter(
        campaign=campaign, window=window, active=True
    )
    if lock:
        assignments = assignments.select_for_update(of=("self",))
    assignments = list(assignments.select_related("label").order_by("pk"))
    submitted = [a for a in assignments if a.state == AssignmentState.SUBMITTED]
    if len(submitted) < len(assignments) or len(submitted) < 2:
        raise ValidationError(
            f"Agreement on {window} needs every assigned label submitted "
            f"(at least two): {len(submitted)} of {len(assignments)} are."
        )
    labels = [a.label for a in submitted]
    for label, assignment in zip(labels, submitted):
        label.assignment = assignment
    return sorted(labels, key=lambda label: label.pk)


def _agreement_fields(*, labels: list[Label], items: list[dict], matcher) -> dict:
    """The fields of a WindowAgreement from the window's labels (annotator on
    ``label.assignment``) and their items per set task: no query."""
    statuses = [label.status for label in labels]
    agreed = len(set(statuses)) == 1
    clusters = {}
    pairwise = {}
    for task in SET_TASKS:
        clusters[task] = _clusters([i[task] for i in items], matcher)
        pairs = []
        for (la, ia), (lb, ib) in combinations(zip(labels, items), 2):
            f1 = pairwise_semantic_f1(
                [x["text"] for x in ia[task]], [x["text"] for x in ib[task]], matcher
            ).f1
            pairs.append(
                {
                    "labels": [la.pk, lb.pk],
                    "annotators": [
                        la.assignment.annotator_id,
                        lb.assignment.annotator_id,
                    ],
                    "f1": f1,
                }
            )
        pairwise[task] = {
            "mean": float(np.mean([p["f1"] for p in pairs])),
            "pairs": pairs,
        }
    return {
        "computed_at": timezone.now(),
        "labels": [
            {
                "label_id": label.pk,
                "version": label.version,
                "annotator_id": label.assignment.annotator_id,
                "status": label.status,
                "status_evidence": list(
                    (label.payload or {}).get("status_evidence") or []
                ),
            }
            for label in labels
        ],
        "statuses": {str(label.pk): label.status for label in labels},
        "status_agreed": agreed,
        "status_value": statuses[0] if agreed else "",
        "pairwise_f1": pairwise,
        "clusters": clusters,
        "matcher_model": getattr(matcher, "model_name", type(matcher).__name__),
        "tau": float(getattr(matcher, "tau", math.nan)),
    }


def rated_event_names(labels: list[Label]) -> dict[int, str]:
    """The recorded actions the labels rate, as clinicians read them
    (``windows.actions.action_text``), in one query."""
    event_ids = {
        rating["event_id"]
        for label in labels
        for rating in (label.payload or {}).get("action_ratings", [])
    }
    if not event_ids:
        return {}
    return {e.pk: action_text_of(e) for e in Event.objects.filter(pk__in=event_ids)}


def _item_texts(items: list[dict]) -> list[str]:
    """The distinct item texts of a window's labels (``label_items`` of each)."""
    return list(
        dict.fromkeys(
            entry["text"]
            for per_label in items
            for task_items in per_label.values()
            for entry in task_items
        )
    )


def _matched_fields(*, labels: list[Label], matcher) -> dict:
    """The WindowAgreement fields of ``labels``: every item text embedded in one
    call first (the only step that may load the model), then the matching,
    which reads the matcher's memory."""
    event_names = rated_event_names(labels)
    items = [label_items(label, event_names) for label in labels]
    texts = _item_texts(items)
    if texts and hasattr(matcher, "embed"):
        matcher.embed(texts)
    return _agreement_fields(labels=labels, items=items, matcher=matcher)


def _label_versions(labels: list[Label]) -> list[tuple[int, int]]:
    return [(label.pk, label.version) for label in labels]


# Attempts at matching a window whose labels change while it is matched.
MATCH_ATTEMPTS = 3


def _agreement_write(*, campaign: Campaign, window: Window, matcher, then=None):
    """Match the window's labels, then write their agreement (and whatever
    ``then()`` writes) in one short transaction; returns (agreement, what
    ``then`` returned).

    The matching (embedding model included, which the first call of a process
    may have to load) runs before the transaction, so no write lock is held
    meanwhile (SQLite has one for the whole database). The transaction reads
    the labels again, locked against a reopen, and writes only when they are
    still the ones matched; otherwise the new ones are matched.
    """
    for _ in range(MATCH_ATTEMPTS):
        labels = _window_labels(campaign=campaign, window=window)
        fields = _matched_fields(labels=labels, matcher=matcher)
        with transaction.atomic():
            current = _window_labels(campaign=campaign, window=window, lock=True)
            if _label_versions(current) != _label_versions(labels):
                continue
            agreement, _ = WindowAgreement.objects.update_or_create(
                campaign=campaign, window=window, defaults=fields
            )
            return agreement, (then() if then is not None else None)
    raise ValidationError(
        f"The labels of {window} kept changing while their agreement was "
        f"computed ({MATCH_ATTEMPTS} attempts); it is computed after the next "
        "submit."
    )


def window_agreement_compute(
    *, campaign: Campaign, window: Window, matcher
) -> WindowAgreement:
    """Compute (or recompute) how the window's submitted labels agree: status,
    the set tasks' items grouped by meaning, and pairwise semantic F1 (matched
    outside the write transaction: ``_agreement_write``)."""
    agreement, _ = _agreement_write(campaign=campaign, window=window, matcher=matcher)
    return agreement


# Agreement then consensus ---------------------------------------------------


def window_consensus_refresh(
    *, campaign: Campaign, window: Window, matcher
) -> ConsensusLabel:
    """Agreement then consensus, what the task runs: the labels matched first,
    outside any transaction, then the agreement and the consensus written
    together in one short transaction (``_agreement_write``)."""
    _, consensus = _agreement_write(
        campaign=campaign,
        window=window,
        matcher=matcher,
        then=lambda: consensus_build(campaign=campaign, window=window),
    )
    return consensus


# Windows whose agreement is due that one agreement task computes besides its
# own. Each submit queues its window's task, but the embedded default's
# filesystem broker gives a worker about two messages every 2 s under load
# (Celery's loop without an event hub acknowledges a message only between its
# 2 s waits, and a worker takes no more than it has acknowledged room for), so
# the task that runs catches up with the windows whose tasks still wait; those
# then find nothing to do.
AGREEMENT_CATCH_UP = 200


def campaign_agreement_catch_up(
    *, campaign: Campaign, matcher, limit: int = AGREEMENT_CATCH_UP
) -> int:
    """Agreement and consensus of up to ``limit`` windows of the campaign whose
    agreement is due (``windows_due_agreement``), each as
    ``window_consensus_refresh`` does it (matched first, then written in its
    own short transaction with its labels checked); every text embedded in
    one call first. A window whose labels change meanwhile is left to its own
    task. Returns how many were written."""
    due = windows_due_agreement(campaign=campaign)[:limit]
    if not due:
        return 0
    complete = _complete_windows(campaign=campaign, window_ids=due)
    event_names = rated_event_names(
        [label for labels in complete.values() for label in labels]
    )
    texts = list(
        dict.fromkeys(
            text
            for labels in complete.values()
            for text in _item_texts([label_items(lb, event_names) for lb in labels])
        )
    )
    if texts and hasattr(matcher, "embed"):
        matcher.embed(texts)
    written = 0
    for window in Window.objects.filter(pk__in=list(complete)).order_by("pk"):
        try:
            window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
        except ValidationError:
            continue
        written += 1
    return written


# Windows per chunk of a campaign-wide recompute: one transaction and two bulk
# upserts each, and a progress report between chunks.
AGREEMENT_CHUNK = 250
_AGREEMENT_FIELDS = (
    "computed_at",
    "labels",
    "statuses",
    "status_agreed",
    "status_value",
    "pairwise_f1",
    "clusters",
    "matcher_model",
    "tau",
)


def _complete_windows(*, campaign: Campaign, window_ids=None) -> dict[int, list[Label]]:
    """The campaign's windows whose active assignments (two or more) are all
    submitted, each with its labels in id order (annotator on
    ``label.assignment``), in one query."""
    assignments = (
        Assignment.objects.filter(campaign=campaign, active=True)
        .select_related("label")
        .order_by("window_id", "pk")
    )
    if window_ids is not None:
        assignments = assignments.filter(window_id__in=list(window_ids))
    by_window: dict[int, list[Assignment]] = defaultdict(list)
    for assignment in assignments:
        by_window[assignment.window_id].append(assignment)
    complete = {}
    for window_id, group in by_window.items():
        if len(group) < 2 or any(a.state != AssignmentState.SUBMITTED for a in group):
            continue
        labels = []
        for assignment in group:
            label = assignment.label
            label.assignment = assignment
            labels.append(label)
        complete[window_id] = sorted(labels, key=lambda label: label.pk)
    return complete


def campaign_agreement_refresh(
    *,
    campaign: Campaign,
    matcher,
    window_ids=None,
    on_progress=None,
    chunk_size: int = AGREEMENT_CHUNK,
) -> dict:
    """Agreement and consensus of every window of the campaign (or of
    ``window_ids``) whose assigned labels are all submitted: what
    ``window_consensus_refresh`` does for one window, for all of them at once.

    Labels, event names and decisions are read in a few queries, every distinct
    item text is embedded once (the matcher remembers the vectors, so the
    per-window matching reads no cache row), and the rows are upserted in bulk
    per chunk of windows, each chunk in its own transaction. Windows still
    waiting for a label are left as they are and counted as ``skipped``.
    ``on_progress(done, total)`` is called after each chunk.
    """
    complete = _complete_windows(campaign=campaign, window_ids=window_ids)
    total_windows = CampaignWindow.objects.filter(campaign=campaign)
    if window_ids is not None:
        total_windows = total_windows.filter(window_id__in=list(window_ids))
    total = total_windows.count()
    all_labels = [label for labels in complete.values() for label in labels]
    event_names = rated_event_names(all_labels)
    items = {
        window_id: [label_items(label, event_names) for label in labels]
        for window_id, labels in complete.items()
    }
    texts = list(
        dict.fromkeys(
            entry["text"]
            for per_label in items.values()
            for per_task in per_label
            for task_items in per_task.values()
            for entry in task_items
        )
    )
    if texts and hasattr(matcher, "embed"):
        matcher.embed(texts)
    decisions: dict[int, list[AdjudicationDecision]] = defaultdict(list)
    for decision in AdjudicationDecision.objects.filter(
        campaign=campaign, window_id__in=list(complete)
    ).order_by("created_at", "pk"):
        decisions[decision.window_id].append(decision)

    window_order = sorted(complete)
    done = 0
    for start in range(0, len(window_order), chunk_size):
        chunk = window_order[start : start + chunk_size]
        with transaction.atomic():
            agreements = WindowAgreement.objects.bulk_create(
                [
                    WindowAgreement(
                        campaign=campaign,
                        window_id=window_id,
                        **_agreement_fields(
                            labels=complete[window_id],
                            items=items[window_id],
                            matcher=matcher,
                        ),
                    )
                    for window_id in chunk
                ],
                update_conflicts=True,
                unique_fields=["campaign", "window"],
                update_fields=list(_AGREEMENT_FIELDS),
            )
            consensus_rows = [
                ConsensusLabel(
                    campaign=campaign,
                    window_id=agreement.window_id,
                    **consensus_fields(agreement, decisions[agreement.window_id]),
                )
                for agreement in agreements
            ]
            ConsensusLabel.objects.bulk_create(
                consensus_rows,
                update_conflicts=True,
                unique_fields=["campaign", "window"],
                update_fields=list(CONSENSUS_FIELDS),
            )
            settled = [
                row.window_id
                for row in consensus_rows
                if decisions[row.window_id] and not row.open_disputes
            ]
            if settled:
                CampaignWindow.objects.filter(
                    campaign=campaign,
                    window_id__in=settled,
                    adjudicated_at__isnull=True,
                ).update(adjudicated_at=timezone.now())
            # Closed for good (annotation.blindness): labels final, raters
            # unblinded.
            agreed = [row.window_id for row in consensus_rows if not row.open_disputes]
            CampaignWindow.objects.filter(
                campaign=campaign, window_id__in=agreed, closed_at__isnull=True
            ).update(closed_at=timezone.now())
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(window_order))
    if on_progress is not None and not window_order:
        on_progress(0, 0)
    return {
        "windows": total,
        "computed": len(window_order),
        "skipped": total - len(window_order),
        "texts": len(texts),
    }


def window_derived_reset(*, campaign: Campaign, window: Window) -> None:
    """Forget the window's agreement and consensus (derived data) until its
    labels are all submitted again. Decisions stay."""
    ConsensusLabel.objects.filter(campaign=campaign, window=window).delete()
    WindowAgreement.objects.filter(campaign=campaign, window=window).delete()


# Hooks for label_submit / label_reopen ---------------------------------------


def _all_submitted(*, campaign_id: int, window_id: int) -> bool:
    states = list(
        Assignment.objects.filter(
            campaign_id=campaign_id, window_id=window_id, active=True
        ).values_list("state", flat=True)
    )
    return len(states) >= 2 and all(s == AssignmentState.SUBMITTED for s in states)


def on_label_submitted(label: Label) -> bool:
    """Call inside ``label_submit``'s transaction: when this was the window's
    last assigned label, record the agreement task in the outbox
    (jobs.outbox), sent once the transaction commits. A broker that cannot be
    reached leaves the message for the reaper, so the physician's submit
    succeeds and the agreement follows when the broker is back. Returns
    whether it was recorded."""
    assignment = label.assignment
    campaign_id, window_id = assignment.campaign_id, assignment.window_id
    if not _all_submitted(campaign_id=campaign_id, window_id=window_id):
        return False
    outbox_send(
        task="annotation.tasks.window_agreement_task",
        args=[campaign_id, window_id],
        key=f"agreement:{campaign_id}:{window_id}",
    )
    return True


def on_label_reopened(label: Label) -> None:
    """Call inside ``label_reopen``'s transaction: the window's agreement no
    longer reflects its labels, so it is forgotten until the next submit."""
    assignment = label.assignment
    window_derived_reset(campaign=assignment.campaign, window=assignment.window)


__all__ = [
    "RECOMMENDING_RATINGS",
    "campaign_agreement_catch_up",
    "campaign_agreement_refresh",
    "label_items",
    "on_label_reopened",
    "on_label_submitted",
    "rated_event_names",
    "window_agreement_compute",
    "window_consensus_refresh",
    "window_derived_reset",
]
