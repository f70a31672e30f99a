"""Admins' adjudication of what the physicians' agreement leaves open (spec
section 4): a decision on an item of a set task (accept, rewrite, drop), on
several items that mean the same thing (merge them into one wording), on the
status (settle), or on the whole window (ask a third physician, drop it). Each
decision is a new record; the physicians' labels are never changed."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.roles import require_admin
from annotation.blindness import adjudication_require_not_withheld
from annotation.evidence import evidence_refused, refused_named
from annotation.models import (
    AdjudicationAction,
    AdjudicationDecision,
    Assignment,
    Campaign,
    CampaignPhysician,
    CampaignWindow,
    ConsensusLabel,
    ConsensusTask,
    PatientStatus,
)
from annotation.services.agreement import window_derived_reset
from annotation.services.campaigns import (
    assignment_add,
    campaign_window_adjudication_start,
)
from annotation.services.consensus import (
    SET_TASKS,
    consensus_build,
    consensus_status_evidence,
)
from evaluation.labelschema import MAX_ITEM_CHARS
from windows.models import Window

# Decisions on the whole window rather than on one of its items.
WINDOW_ACTIONS = (
    AdjudicationAction.REQUEST_THIRD_RATER,
    AdjudicationAction.DROP_WINDOW,
)


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
    physicians' labels are never changed. An admin from whom the window is
    withheld (they rate it, or a co-rater of theirs does: annotation.blindness)
    is refused.
    """
    _adjudicator_check(admin=admin, campaign=campaign, window=window)
    decision = _Decision(
        task=task,
        item_ref=(item_ref or "").strip(),
        action=action,
        reason=(reason or "").strip(),
        new_text=(new_text or "").strip(),
        new_status=(new_status or "").strip(),
    )
    _decision_check(decision)
    with transaction.atomic():
        consensus = _consensus_locked(campaign=campaign, window=window)
        if not consensus.dispute_count:
            raise ValidationError(
                f"{window} has no open dispute; its consensus needs no decision."
            )
        return _decision_record(
            admin=admin,
            campaign=campaign,
            window=window,
            consensus=consensus,
            dispute=_dispute_decided(
                consensus=consensus, campaign=campaign, window=window, decision=decision
            ),
            physician=physician,
            fields=dataclasses.asdict(decision),
        )


@dataclasses.dataclass(frozen=True)
class _Decision:
    """What an admin decided, as given (stripped), before it is checked."""

    task: str
    item_ref: str
    action: str
    reason: str
    new_text: str
    new_status: str


def _adjudicator_check(*, admin, campaign: Campaign, window: Window) -> None:
    """Only an admin from whom the window is not withheld adjudicates it."""
    require_admin(admin, "adjudicate")
    adjudication_require_not_withheld(
        user=admin, campaign_id=campaign.pk, window_id=window.pk
    )


def _decision_check(decision: _Decision) -> None:
    """What any decision needs, before anything is read: a known task and
    action, a reason, and a new text or status only with the action they go
    with."""
    task, action = decision.task, decision.action
    if task not in ConsensusTask.values:
        raise ValidationError(
            f"Unknown task {task!r}: choose one of {', '.join(ConsensusTask.values)}."
        )
    if action not in AdjudicationAction.values:
        raise ValidationError(
            f"Unknown decision {action!r}: choose one of "
            f"{', '.join(AdjudicationAction.values)}."
        )
    if not decision.reason:
        raise ValidationError("Give a reason for the decision; it is kept with it.")
    if action == AdjudicationAction.MERGE:
        raise ValidationError(
            "A merge names the items it merges: choose them in the merge form."
        )
    if decision.new_text and action != AdjudicationAction.REWRITE:
        raise ValidationError("A new text only goes with a rewrite.")
    if decision.new_status and action != AdjudicationAction.SETTLE_STATUS:
        raise ValidationError("A new status only goes with settling the status.")


def _consensus_locked(
    *, campaign: Campaign, window: Window, what: str = "decide"
) -> ConsensusLabel:
    """The window's consensus, with its campaign window locked (one decision at
    a time), or a ValidationError when there is none or it was dropped (nothing
    left to ``what``)."""
    campaign_window = (
        CampaignWindow.objects.select_for_update()
        .filter(campaign=campaign, window=window)
        .first()
    )
    if campaign_window is None:
        raise ValidationError(f"{window} is not part of the campaign {campaign}.")
    consensus = (
        ConsensusLabel.objects.filter(campaign=campaign, window=window)
        .select_related("agreement")
        .first()
    )
    if consensus is None or consensus.agreement is None:
        raise ValidationError(
            f"{window} has no consensus yet: its agreement is computed once "
            "every assigned label is submitted."
        )
    if consensus.dropped:
        raise ValidationError(f"{window} was dropped; nothing is left to {what}.")
    return consensus


def _dispute_decided(
    *,
    consensus: ConsensusLabel,
    campaign: Campaign,
    window: Window,
    decision: _Decision,
) -> dict | None:
    """The open dispute the decision settles, checked for the action (None for
    a decision on the whole window)."""
    if decision.action in WINDOW_ACTIONS:
        _window_decision_check(task=decision.task, item_ref=decision.item_ref)
        return None
    if decision.action == AdjudicationAction.SETTLE_STATUS:
        return _status_dispute(
            consensus=consensus,
            window=window,
            task=decision.task,
            new_status=decision.new_status,
        )
    return _item_dispute(
        consensus=consensus, campaign=campaign, window=window, decision=decision
    )


def _window_decision_check(*, task: str, item_ref: str) -> None:
    """A third rater or dropping the window: a decision on the whole window."""
    if task not in (ConsensusTask.WINDOW, ConsensusTask.STATUS):
        raise ValidationError(
            "Asking a third physician or dropping the window is a decision "
            "on the whole window (task 'window' or 'status')."
        )
    if item_ref:
        raise ValidationError("A decision on the whole window names no item.")


def _status_dispute(
    *, consensus: ConsensusLabel, window: Window, task: str, new_status: str
) -> dict:
    """The open status dispute that settling the status decides, checked."""
    if task != ConsensusTask.STATUS:
        raise ValidationError("Settling the status is a decision on 'status'.")
    dispute = next((d for d in consensus.open_disputes if d["task"] == "status"), None)
    if dispute is None:
        raise ValidationError(
            f"The status of {window} is not in dispute "
            f"(it is {consensus.status or 'not set'})."
        )
    if new_status not in PatientStatus.values:
        raise ValidationError(
            "Settle the status as improving, stable or deteriorating."
        )
    _evidence_check(
        window=window,
        ids=consensus_status_evidence(consensus.agreement, new_status),
        what=f"The status {new_status}, by the labels that gave it,",
        way_out="Settle another status, ask a third physician or drop the window.",
    )
    return dispute


def _item_dispute(
    *,
    consensus: ConsensusLabel,
    campaign: Campaign,
    window: Window,
    decision: _Decision,
) -> dict:
    """The open dispute on an item of a set task that accept, rewrite or drop
    decides, checked (a rewrite needs its new text, within the limit)."""
    task, item_ref, action = decision.task, decision.item_ref, decision.action
    new_text = decision.new_text
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
        earlier = (
            AdjudicationDecision.objects.filter(
                campaign=campaign, window=window, task=task
            )
            .filter(
                Q(item_ref=item_ref)
                | Q(
                    action=AdjudicationAction.MERGE,
                    context__merged__contains=[item_ref],
                )
            )
            .first()
        )
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
        _new_text_check(
            new_text, missing="A rewrite needs the new text.", what="The new text"
        )
    if action in (AdjudicationAction.ACCEPT, AdjudicationAction.REWRITE):
        cluster = next(
            c for c in consensus.agreement.clusters.get(task, []) if c["id"] == item_ref
        )
        _evidence_check(
            window=window,
            ids=[e for item in cluster["items"] for e in item.get("evidence") or []],
            what=f"“{cluster['items'][0]['text']}”",
            way_out="Drop the item instead.",
        )
    return dispute


def _new_text_check(new_text: str, *, missing: str, what: str) -> None:
    """A ValidationError (``missing``) without a new text, or naming ``what``
    when it is longer than an item may be."""
    if not new_text:
        raise ValidationError(missing)
    if len(new_text) > MAX_ITEM_CHARS:
        raise ValidationError(
            f"{what} is {len(new_text)} characters long; the limit is {MAX_ITEM_CHARS}."
        )


def _evidence_check(*, window: Window, ids, what: str, way_out: str) -> None:
    """A ValidationError when the evidence a decision would carry into the
    consensus cites what no label may (annotation.evidence: a hindsight
    record, an event outside the window's stay): labels saved before that
    rule, or written around the services. ``what`` names what cites it."""
    refused = evidence_refused(window=window, ids=ids)
    if refused:
        raise ValidationError(
            f"{what} cites {refused_named(sorted(refused), refused)}: evidence "
            "must be what the bedside of this stay showed (hindsight records are "
            f"never evidence), so no decision carries it into the consensus. "
            f"{way_out}"
        )


def _decision_record(
    *,
    admin,
    campaign: Campaign,
    window: Window,
    consensus: ConsensusLabel,
    dispute: dict | None,
    physician,
    fields: dict,
) -> AdjudicationDecision:
    """Save the checked decision (``fields``: task, item, action, new text or
    status, reason) with its context, assigning the third physician it asks
    for, then forget the window's agreement (a third rater) or rebuild its
    consensus (anything else)."""
    context: dict = {
        "labels": [entry["label_id"] for entry in consensus.agreement.labels],
        "dispute": dispute,
    }
    third_rater = fields["action"] == AdjudicationAction.REQUEST_THIRD_RATER
    if third_rater:
        context |= _third_rater_add(
            admin=admin, campaign=campaign, window=window, physician=physician
        )
    campaign_window_adjudication_start(admin=admin, campaign=campaign, window=window)
    decision = AdjudicationDecision.objects.create(
        campaign=campaign,
        window=window,
        **fields,
        author=admin,
        created_at=timezone.now(),
        context=context,
    )
    if third_rater:
        window_derived_reset(campaign=campaign, window=window)
    else:
        consensus_build(campaign=campaign, window=window)
    return decision


def _third_rater_add(*, admin, campaign: Campaign, window: Window, physician) -> dict:
    """Assign the window to ``physician`` (default: the one the campaign can
    best spare); what the decision's context records of it."""
    if physician is not None and physician.pk == admin.pk:
        raise ValidationError(
            "You adjudicate this window: ask another physician for the third label."
        )
    user = physician or _third_rater_choose(
        campaign=campaign, window=window, admin=admin
    )
    added = assignment_add(
        admin=admin, window=window, campaign=campaign, physician=user
    )
    return {"assignment_id": added.pk, "physician_id": added.annotator_id}


def _third_rater_choose(*, campaign: Campaign, window: Window, admin):
    """The campaign physician not yet on the window, other than the
    adjudicator, with the fewest active assignments (ties by id), or a
    ValidationError."""
    taken = set(
        Assignment.objects.filter(campaign=campaign, window=window).values_list(
            "annotator_id", flat=True
        )
    ) | {admin.pk}
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


# Merge ------------------------------------------------------------------------


def adjudication_merge(
    *,
    admin,
    campaign: Campaign,
    window: Window,
    task: str,
    item_refs: list[str],
    new_text: str,
    reason: str,
) -> AdjudicationDecision:
    """Merge items of one set task of the window that mean the same thing into
    one item worded ``new_text``, and rebuild the consensus.

    ``item_refs`` names the items' clusters (their ids): the items of one
    matched cluster (several physicians' wordings of one item), or several
    clusters the matcher kept apart ("Hyperlactatemia" and "Elevated lactate"),
    two items at least. The consensus then holds one item with that wording and
    the union of their evidence, in place of the clusters, whatever was decided
    on them before (a dropped or already merged cluster is refused). The
    decision records the wording, the merged clusters and their texts, its
    author, time and reason.
    """
    _adjudicator_check(admin=admin, campaign=campaign, window=window)
    reason = (reason or "").strip()
    new_text = (new_text or "").strip()
    refs = list(dict.fromkeys((r or "").strip() for r in item_refs or []))
    refs = [r for r in refs if r]
    if task not in SET_TASKS:
        raise ValidationError(
            "Merging applies to items of acute problems, recommended actions or "
            f"red flags, not {task!r}."
        )
    if not refs:
        raise ValidationError("Choose the items to merge: two at least.")
    _new_text_check(
        new_text, missing="Give the wording the merged item keeps.", what="The wording"
    )
    if not reason:
        raise ValidationError("Give a reason for the merge; it is kept with it.")
    with transaction.atomic():
        consensus = _consensus_locked(campaign=campaign, window=window, what="merge")
        clusters = _clusters_to_merge(
            consensus=consensus, campaign=campaign, window=window, task=task, refs=refs
        )
        items = [item for cluster in clusters for item in cluster["items"]]
        if len(items) < 2:
            raise ValidationError(
                f"“{items[0]['text']}” is a single item: a merge needs two items "
                "at least (choose another one that means the same thing)."
            )
        for item in items:
            _evidence_check(
                window=window,
                ids=item.get("evidence") or [],
                what=f"“{item['text']}”",
                way_out="Leave it out of the merge, and drop it.",
            )
        campaign_window_adjudication_start(
            admin=admin, campaign=campaign, window=window
        )
        decision = AdjudicationDecision.objects.create(
            campaign=campaign,
            window=window,
            task=task,
            item_ref=refs[0],
            action=AdjudicationAction.MERGE,
            new_text=new_text,
            reason=reason,
            author=admin,
            created_at=timezone.now(),
            context={
                "labels": [e["label_id"] for e in consensus.agreement.labels],
                "merged": refs,
                "items": [item["ref"] for item in items],
                "texts": list(dict.fromkeys(item["text"] for item in items)),
            },
        )
        consensus_build(campaign=campaign, window=window)
        return decision


def _clusters_to_merge(
    *,
    consensus: ConsensusLabel,
    campaign: Campaign,
    window: Window,
    task: str,
    refs: list[str],
) -> list[dict]:
    """The clusters ``refs`` name, all of ``task`` in this window's agreement,
    none dropped or already merged; else a ValidationError naming the first
    that is not."""
    clusters = consensus.agreement.clusters or {}
    of_task = {c["id"]: c for c in clusters.get(task, [])}
    task_name = ConsensusTask(task).label.lower()
    decisions = list(
        AdjudicationDecision.objects.filter(campaign=campaign, window=window)
        .select_related("author")
        .order_by("created_at", "pk")
    )
    settled: dict[str, AdjudicationDecision] = {}
    for decision in decisions:
        if decision.task != task:
            continue
        if decision.action == AdjudicationAction.DROP:
            settled[decision.item_ref] = decision
        elif decision.action == AdjudicationAction.MERGE:
            for ref in decision.context.get("merged", []):
                settled[ref] = decision
    chosen = []
    for ref in refs:
        cluster = of_task.get(ref)
        if cluster is None:
            other = next(
                (
                    ConsensusTask(t).label.lower()
                    for t, rows in clusters.items()
                    if t != task and any(c["id"] == ref for c in rows)
                ),
                None,
            )
            if other:
                raise ValidationError(
                    f"{ref} is an item of {other}, not of {task_name}: merge "
                    "items of one task."
                )
            raise ValidationError(
                f"{ref} is not an item of {task_name} in {window}: merge items of "
                "this window only."
            )
        earlier = settled.get(ref)
        if earlier is not None:
            done = "dropped" if earlier.action == AdjudicationAction.DROP else "merged"
            raise ValidationError(
                f"“{cluster['items'][0]['text']}” was already {done} by "
                f"{earlier.author} at {earlier.created_at:%Y-%m-%d %H:%M}; "
                "decisions are final."
            )
        chosen.append(cluster)
    return chosen


__all__ = ["WINDOW_ACTIONS", "adjudication_decide", "adjudication_merge"]
