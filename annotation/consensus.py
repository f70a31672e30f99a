"""Agreement between the physicians of a window, the consensus label built from
it, and admins' adjudication of what is left (spec sections 4-5); with the
campaign's inter-rater reliability and per-physician figures."""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from itertools import combinations

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    ActionRating,
    AdjudicationAction,
    AdjudicationDecision,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    CampaignWindow,
    ConsensusLabel,
    ConsensusStatusSource,
    ConsensusTask,
    Label,
    PatientStatus,
    WindowAgreement,
)
from annotation.services import (
    MAX_ITEM_CHARS,
    assignment_add,
    campaign_window_adjudication_start,
)
from evaluation.agreement import (
    bootstrap_ci,
    cohens_kappa,
    match_matrix,
    match_sets,
    pairwise_semantic_f1,
    status_agreement,
)
from jobs.outbox import outbox_send
from accounts.roles import require_admin
from windows.actions import action_text_of
from windows.models import Event, Window

logger = logging.getLogger(__name__)

# The set tasks, in the order pages show them.
SET_TASKS = (
    ConsensusTask.ACUTE_PROBLEMS,
    ConsensusTask.RECOMMENDED_ACTIONS,
    ConsensusTask.RED_FLAGS,
)
# Ratings that put a recorded action into the Recommended Actions set (spec 3).
RECOMMENDING_RATINGS = (ActionRating.BEST_PRACTICE, ActionRating.ACCEPTABLE)
# Similarity given to two ratings of the same recorded event: above any cosine,
# so they are matched with each other first.
SAME_EVENT_SIMILARITY = 2.0
ITEM_ACTIONS = (
    AdjudicationAction.ACCEPT,
    AdjudicationAction.REWRITE,
    AdjudicationAction.DROP,
)
WINDOW_ACTIONS = (
    AdjudicationAction.REQUEST_THIRD_RATER,
    AdjudicationAction.DROP_WINDOW,
)


# Label items ------------------------------------------------------------------


def _item_ref(label_id: int, field: str, index: int) -> str:
    return f"{label_id}/{field}/{index}"


def _label_items(label: Label, event_names: dict[int, str]) -> dict[str, list[dict]]:
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


def _window_labels(*, campaign: Campaign, window: Window) -> list[Label]:
    """The submitted labels of the window's active assignments, or a
    ValidationError saying how many are still missing."""
    assignments = list(
        Assignment.objects.filter(campaign=campaign, window=window, active=True)
        .select_related("label")
        .order_by("pk")
    )
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


def _event_names(labels: list[Label]) -> dict[int, str]:
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


def window_agreement_compute(
    *, campaign: Campaign, window: Window, matcher
) -> WindowAgreement:
    """Compute (or recompute) how the window's submitted labels agree: status,
    the set tasks' items grouped by meaning, and pairwise semantic F1."""
    labels = _window_labels(campaign=campaign, window=window)
    event_names = _event_names(labels)
    items = [_label_items(label, event_names) for label in labels]
    agreement, _ = WindowAgreement.objects.update_or_create(
        campaign=campaign,
        window=window,
        defaults=_agreement_fields(labels=labels, items=items, matcher=matcher),
    )
    return agreement


# Consensus --------------------------------------------------------------------


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


def _majority_status(statuses: list[str]) -> str:
    """The status of a strict majority of three or more raters, else ''."""
    if len(statuses) < 3:
        return ""
    value, count = max(
        ((s, statuses.count(s)) for s in dict.fromkeys(statuses)),
        key=lambda pair: pair[1],
    )
    return value if count * 2 > len(statuses) else ""


def _status_evidence(agreement: WindowAgreement, status: str) -> list[int]:
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


def _consensus_fields(
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
    elif majority := _majority_status(statuses):
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
        for cluster in agreement.clusters.get(task, []):
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
        "status_evidence": _status_evidence(agreement, status),
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
    fields = _consensus_fields(agreement, decisions)
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


def window_consensus_refresh(
    *, campaign: Campaign, window: Window, matcher
) -> ConsensusLabel:
    """Agreement then consensus, in one transaction: what the task runs."""
    with transaction.atomic():
        window_agreement_compute(campaign=campaign, window=window, matcher=matcher)
        return consensus_build(campaign=campaign, window=window)


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
_CONSENSUS_FIELDS = (
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
    event_names = _event_names(all_labels)
    items = {
        window_id: [_label_items(label, event_names) for label in labels]
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
                    **_consensus_fields(agreement, decisions[agreement.window_id]),
                )
                for agreement in agreements
            ]
            ConsensusLabel.objects.bulk_create(
                consensus_rows,
                update_conflicts=True,
                unique_fields=["campaign", "window"],
                update_fields=list(_CONSENSUS_FIELDS),
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


def _window_derived_reset(*, campaign: Campaign, window: Window) -> None:
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
    _window_derived_reset(campaign=assignment.campaign, window=assignment.window)


# Adjudication -----------------------------------------------------------------


def _third_rater_choose(*, campaign: Campaign, window: Window):
    """The campaign physician not yet on the window with the fewest active
    assignments (ties by id), or a ValidationError."""
    taken = set(
        Assignment.objects.filter(campaign=campaign, window=window).values_list(
            "annotator_id", flat=True
        )
    )
    members = list(
        CampaignPhysician.objects.filter(campaign=campaign)
        .exclude(user_id__in=taken)
        .select_related("user")
        .order_by("user_id")
    )
    if not members:
        raise ValidationError(
            "Every physician of the campaign has already been assigned this "
            "window; choose a physician to add to the campaign."
        )
    loads = defaultdict(int)
    for user_id in Assignment.objects.filter(
        campaign=campaign, active=True, annotator_id__in=[m.user_id for m in members]
    ).values_list("annotator_id", flat=True):
        loads[user_id] += 1
    return min(members, key=lambda m: (loads[m.user_id], m.user_id)).user


def adjudication_decide(
    *,
    admin,
    campaign: Campaign,
    window: Window,
    task: str,
    item_ref: str,
    action: str,
    reason: str,
    new_text: str | None = None,
    new_status: str | None = None,
    physician=None,
) -> AdjudicationDecision:
    """Record an admin's decision on an open dispute of the window and rebuild
    its consensus.

    - ``accept`` / ``rewrite`` (with ``new_text``) / ``drop``: an unmatched item
      of a set task, named by its cluster id (``item_ref``).
    - ``settle_status`` (with ``new_status``): the status, when the annotators
      disagree.
    - ``request_third_rater``: assigns ``physician`` (default: the campaign
      physician not on the window with the fewest assignments); the window's
      agreement is forgotten until the third label is submitted.
    - ``drop_window``: the window leaves the Gold set.

    Every decision is a new record with its author, time and reason; the
    physicians' labels are never changed.
    """
    require_admin(admin, "adjudicate")
    reason = (reason or "").strip()
    new_text = (new_text or "").strip()
    new_status = (new_status or "").strip()
    item_ref = (item_ref or "").strip()
    if task not in ConsensusTask.values:
        raise ValidationError(
            f"Unknown task {task!r}: choose one of {', '.join(ConsensusTask.values)}."
        )
    if action not in AdjudicationAction.values:
        raise ValidationError(
            f"Unknown decision {action!r}: choose one of "
            f"{', '.join(AdjudicationAction.values)}."
        )
    if not reason:
        raise ValidationError("Give a reason for the decision; it is kept with it.")
    if new_text and action != AdjudicationAction.REWRITE:
        raise ValidationError("A new text only goes with a rewrite.")
    if new_status and action != AdjudicationAction.SETTLE_STATUS:
        raise ValidationError("A new status only goes with settling the status.")

    with transaction.atomic():
        campaign_window = (
            CampaignWindow.objects.select_for_update()
            .filter(campaign=campaign, window=window)
            .first()
        )
        if campaign_window is None:
            raise ValidationError(f"{window} is not part of the campaign {campaign}.")
        consensus = ConsensusLabel.objects.filter(
            campaign=campaign, window=window
        ).first()
        if consensus is None:
            raise ValidationError(
                f"{window} has no consensus yet: its agreement is computed once "
                "every assigned label is submitted."
            )
        if consensus.dropped:
            raise ValidationError(f"{window} was dropped; nothing is left to decide.")
        if not consensus.dispute_count:
            raise ValidationError(
                f"{window} has no open dispute; its consensus needs no decision."
            )
        dispute = None
        if action in WINDOW_ACTIONS:
            if task not in (ConsensusTask.WINDOW, ConsensusTask.STATUS):
                raise ValidationError(
                    "Asking a third physician or dropping the window is a decision "
                    "on the whole window (task 'window' or 'status')."
                )
            if item_ref:
                raise ValidationError("A decision on the whole window names no item.")
        elif action == AdjudicationAction.SETTLE_STATUS:
            if task != ConsensusTask.STATUS:
                raise ValidationError("Settling the status is a decision on 'status'.")
            dispute = next(
                (d for d in consensus.open_disputes if d["task"] == "status"), None
            )
            if dispute is None:
                raise ValidationError(
                    f"The status of {window} is not in dispute "
                    f"(it is {consensus.status or 'not set'})."
                )
            if new_status not in PatientStatus.values:
                raise ValidationError(
                    "Settle the status as improving, stable or deteriorating."
                )
        else:
            if task not in SET_TASKS:
                raise ValidationError(
                    f"Accept, rewrite and drop apply to an item of acute problems, "
                    f"recommended actions or red flags, not {task!r}."
                )
            dispute = next(
                (
                    d
                    for d in consensus.open_disputes
                    if d["task"] == task and d["item_ref"] == item_ref
                ),
                None,
            )
            if dispute is None:
                earlier = AdjudicationDecision.objects.filter(
                    campaign=campaign, window=window, task=task, item_ref=item_ref
                ).first()
                if earlier is not None:
                    raise ValidationError(
                        f"This item was already decided ({earlier.action}) by "
                        f"{earlier.author} at {earlier.created_at:%Y-%m-%d %H:%M}; "
                        "decisions are final."
                    )
                raise ValidationError(
                    f"{item_ref or 'No item'} is not an open dispute of "
                    f"{ConsensusTask(task).label.lower()} in {window}."
                )
            if action == AdjudicationAction.REWRITE:
                if not new_text:
                    raise ValidationError("A rewrite needs the new text.")
                if len(new_text) > MAX_ITEM_CHARS:
                    raise ValidationError(
                        f"The new text is {len(new_text)} characters long; the "
                        f"limit is {MAX_ITEM_CHARS}."
                    )

        context: dict = {
            "labels": [entry["label_id"] for entry in consensus.agreement.labels],
            "dispute": dispute,
        }
        if action == AdjudicationAction.REQUEST_THIRD_RATER:
            user = physician or _third_rater_choose(campaign=campaign, window=window)
            added = assignment_add(
                admin=admin, window=window, campaign=campaign, physician=user
            )
            context["assignment_id"] = added.pk
            context["physician_id"] = added.annotator_id
        campaign_window_adjudication_start(
            admin=admin, campaign=campaign, window=window
        )
        decision = AdjudicationDecision.objects.create(
            campaign=campaign,
            window=window,
            task=task,
            item_ref=item_ref,
            action=action,
            new_text=new_text,
            new_status=new_status,
            reason=reason,
            author=admin,
            created_at=timezone.now(),
            context=context,
        )
        if action == AdjudicationAction.REQUEST_THIRD_RATER:
            _window_derived_reset(campaign=campaign, window=window)
        else:
            consensus_build(campaign=campaign, window=window)
    return decision


# Campaign figures -------------------------------------------------------------


def _ci(ci) -> dict:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def _nanmean(values) -> float:
    array = np.asarray(list(values), dtype=float)
    array = array[~np.isnan(array)]
    return float(array.mean()) if array.size else math.nan


def campaign_irr(*, campaign: Campaign, n_boot: int = 1000, seed: int = 0) -> dict:
    """The campaign's inter-rater reliability over its windows with computed
    agreement (spec section 4).

    - ``status``: percent agreement, Cohen's kappa (two raters on every window)
      or Fleiss' kappa, ordinal Krippendorff alpha, each with a bootstrap 95 %
      CI over windows.
    - ``set_tasks``: per task, mean over windows of the window's mean pairwise
      semantic F1, with its bootstrap CI.
    - ``pairs``: per physician pair sharing windows, their status agreement,
      Cohen's kappa and mean F1 per set task.
    - ``keep_rates``: per task, raw items (all labels) against kept items, as in
      the paper's Table 11. For status: windows, windows whose status was agreed
      (or had a majority), and windows with a status in the consensus. For a set
      task: raw items, items in matched clusters (``keep_rate`` = their share),
      clusters, matched clusters, and items of the final consensus.
    """
    agreements = list(
        WindowAgreement.objects.filter(campaign=campaign).order_by("window_id")
    )
    consensus = {
        c.window_id: c for c in ConsensusLabel.objects.filter(campaign=campaign)
    }
    ratings = [[entry["status"] for entry in a.labels] for a in agreements]
    result: dict = {"windows": len(agreements), "n_boot": n_boot, "seed": seed}
    if ratings:
        status = status_agreement(ratings, n_boot=n_boot, seed=seed)
        result["status"] = {
            "percent_agreement": _ci(status.percent_agreement),
            "kappa": _ci(status.kappa),
            "kappa_name": status.kappa_name,
            "alpha_ordinal": _ci(status.alpha_ordinal),
            "n_raters": status.n_raters,
        }
    else:
        result["status"] = None

    result["set_tasks"] = {}
    for task in SET_TASKS:
        values = np.array(
            [a.pairwise_f1[task]["mean"] for a in agreements], dtype=float
        )
        if values.size:
            ci = bootstrap_ci(_nanmean, values, n_boot=n_boot, seed=seed)
            result["set_tasks"][task] = {"mean_pairwise_f1": _ci(ci)}
        else:
            result["set_tasks"][task] = {"mean_pairwise_f1": None}

    result["pairs"] = _pair_figures(agreements)

    keep = {}
    agreed = sum(
        1
        for a in agreements
        if a.status_agreed or _majority_status([entry["status"] for entry in a.labels])
    )
    kept_status = sum(
        1
        for a in agreements
        if (c := consensus.get(a.window_id)) and c.status and not c.dropped
    )
    keep[ConsensusTask.STATUS] = {
        "raw": len(agreements),
        "kept_auto": agreed,
        "keep_rate": agreed / len(agreements) if agreements else math.nan,
        "kept_final": kept_status,
        "dropped_windows": sum(1 for c in consensus.values() if c.dropped),
    }
    for task in SET_TASKS:
        clusters = [c for a in agreements for c in a.clusters.get(task, [])]
        raw = sum(len(c["items"]) for c in clusters)
        kept_items = sum(len(c["items"]) for c in clusters if c["kept"])
        keep[task] = {
            "raw": raw,
            "kept_auto": kept_items,
            "keep_rate": kept_items / raw if raw else math.nan,
            "clusters": len(clusters),
            "clusters_kept_auto": sum(1 for c in clusters if c["kept"]),
            "kept_final": sum(
                len(c.items.get(task, [])) for c in consensus.values() if not c.dropped
            ),
        }
    result["keep_rates"] = keep
    return result


def _pair_figures(agreements: list[WindowAgreement]) -> list[dict]:
    shared: dict[tuple[int, int], dict] = {}
    for agreement in agreements:
        status_of = {e["annotator_id"]: e["status"] for e in agreement.labels}
        for a, b in combinations(sorted(status_of), 2):
            entry = shared.setdefault(
                (a, b),
                {"a": [], "b": [], "f1": {task: [] for task in SET_TASKS}},
            )
            entry["a"].append(status_of[a])
            entry["b"].append(status_of[b])
        for task in SET_TASKS:
            for pair in agreement.pairwise_f1[task]["pairs"]:
                key = tuple(sorted(pair["annotators"]))
                shared[key]["f1"][task].append(pair["f1"])
    rows = []
    for (a, b), entry in sorted(shared.items()):
        n = len(entry["a"])
        rows.append(
            {
                "physicians": [a, b],
                "windows": n,
                "status_percent_agreement": sum(
                    x == y for x, y in zip(entry["a"], entry["b"])
                )
                / n,
                "status_cohens_kappa": cohens_kappa(
                    entry["a"], entry["b"], categories=PatientStatus.values
                ),
                "mean_pairwise_f1": {
                    task: _nanmean(values) for task, values in entry["f1"].items()
                },
            }
        )
    return rows


def physician_stats(*, admin, campaign: Campaign) -> list[dict]:
    """Per physician of the campaign: windows assigned and labelled, median time
    on task of a submitted label, and agreement with the other physicians
    (status agreement over shared windows, mean pairwise F1 per set task), to
    find a rater who needs calibration."""
    require_admin(admin, "see physicians' figures")
    members = list(
        CampaignPhysician.objects.filter(campaign=campaign)
        .select_related("user")
        .order_by("user__username")
    )
    assignments = list(
        Assignment.objects.filter(campaign=campaign, active=True).values_list(
            "annotator_id", "state"
        )
    )
    times: dict[int, list[int]] = defaultdict(list)
    for user_id, seconds in Label.objects.filter(
        assignment__campaign=campaign,
        assignment__active=True,
        assignment__state=AssignmentState.SUBMITTED,
    ).values_list("assignment__annotator_id", "time_on_task_seconds"):
        times[user_id].append(seconds)
    pairs = _pair_figures(list(WindowAgreement.objects.filter(campaign=campaign)))
    rows = []
    for member in members:
        user_id = member.user_id
        own_pairs = [p for p in pairs if user_id in p["physicians"]]
        compared = sum(p["windows"] for p in own_pairs)
        rows.append(
            {
                "user_id": user_id,
                "username": member.user.get_username(),
                "assigned": sum(1 for u, _ in assignments if u == user_id),
                "labels_done": sum(
                    1
                    for u, s in assignments
                    if u == user_id and s == AssignmentState.SUBMITTED
                ),
                "median_seconds": (
                    statistics.median(times[user_id]) if times[user_id] else None
                ),
                "windows_compared": compared,
                "status_agreement": (
                    sum(p["status_percent_agreement"] * p["windows"] for p in own_pairs)
                    / compared
                    if compared
                    else math.nan
                ),
                "mean_pairwise_f1": {
                    task: _nanmean(p["mean_pairwise_f1"][task] for p in own_pairs)
                    for task in SET_TASKS
                },
            }
        )
    return rows


__all__ = [
    "adjudication_decide",
    "campaign_agreement_refresh",
    "campaign_irr",
    "consensus_build",
    "on_label_reopened",
    "on_label_submitted",
    "physician_stats",
    "window_agreement_compute",
    "window_consensus_refresh",
]
