"""Reads of the admin's adjudication workspace (spec section 4): one window of
the campaign's queue with each physician's label side by side, the set tasks'
items grouped by meaning, the open disputes and the decisions so far."""

from __future__ import annotations

from annotation.models import (
    AdjudicationAction,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    ConsensusTask,
    PatientStatus,
)
from annotation.selectors import adjudication_queue, window_adjudication_get
from annotation.services.consensus import SET_TASKS
from evaluation.labelschema import STATUS_KEYS

TASK_NAMES = dict(ConsensusTask.choices)


def adjudication_workspace(*, admin, campaign: Campaign, window_id) -> dict:
    """What the window's adjudication workspace shows: status, the set tasks'
    items grouped by meaning per physician column, the open disputes with their
    forms, the decisions so far and the next window of the queue. Http404 for a
    window outside the campaign, PermissionDenied for anyone but an admin."""
    data = window_adjudication_get(admin=admin, campaign=campaign, window_id=window_id)
    window = data["window"]
    agreement = data["agreement"]
    consensus = data["consensus"]
    columns = _columns(agreement, data["labels"])
    open_disputes = {
        (d["task"], d["item_ref"]): d
        for d in (consensus.open_disputes if consensus else [])
    }
    decisions = data["decisions"]
    queue = adjudication_queue(admin=admin, campaign=campaign)
    return {
        "campaign": campaign,
        "window": window,
        "campaign_window": data["campaign_window"],
        "agreement": agreement,
        "consensus": consensus,
        "columns": columns,
        "status_open": (ConsensusTask.STATUS, "") in open_disputes,
        "status_choices": [
            (value, name, STATUS_KEYS[value]) for value, name in PatientStatus.choices
        ],
        "tasks": _tasks(agreement, columns, open_disputes, decisions),
        "decisions": list(reversed(decisions)),
        "open_count": consensus.dispute_count if consensus else 0,
        "queue_count": len(queue),
        "position": next(
            (n for n, c in enumerate(queue, start=1) if c.window_id == window.pk),
            None,
        ),
        "next_window": _next_in_queue(queue, window),
        "third_candidates": _third_candidates(campaign=campaign, window=window),
        "pending": _pending(campaign=campaign, window=window),
        "action_names": dict(AdjudicationAction.choices),
    }


def _columns(agreement, labels) -> list[dict]:
    """One column per label the agreement was computed from: its letter, its
    physician, status and time on task."""
    if agreement is None:
        return []
    by_id = {label.pk: label for label in labels}
    columns = []
    for n, entry in enumerate(agreement.labels):
        label = by_id.get(entry["label_id"])
        columns.append(
            {
                "label_id": entry["label_id"],
                "letter": chr(ord("A") + n),
                "username": label.assignment.annotator.get_username()
                if label
                else f"user {entry['annotator_id']}",
                "status": entry["status"],
                "status_display": PatientStatus(entry["status"]).label
                if entry["status"] in PatientStatus.values
                else entry["status"],
                "time_on_task": label.time_on_task_seconds if label else None,
            }
        )
    return columns


def _tasks(agreement, columns, open_disputes, decisions) -> list[dict]:
    """Per set task, its clusters as rows: the texts, each column's item, who
    gave it, whether it is kept, open or decided."""
    if agreement is None:
        return []
    decided = {(d.task, d.item_ref): d for d in decisions if d.item_ref}
    column_of = {c["label_id"]: c for c in columns}
    tasks = []
    for task in SET_TASKS:
        rows = []
        for number, cluster in enumerate(agreement.clusters.get(task, []), start=1):
            by_label = {item["label_id"]: item for item in cluster["items"]}
            key = (task, cluster["id"])
            rows.append(
                {
                    "number": number,
                    # Eight colours tell neighbouring clusters apart.
                    "colour": (number - 1) % 8,
                    "id": cluster["id"],
                    "kept": cluster["kept"],
                    "open": key in open_disputes,
                    "decision": decided.get(key),
                    "texts": list(dict.fromkeys(i["text"] for i in cluster["items"])),
                    "cells": [by_label.get(c["label_id"]) for c in columns],
                    "who": [
                        column_of[i["label_id"]]["letter"]
                        for i in cluster["items"]
                        if i["label_id"] in column_of
                    ],
                }
            )
        tasks.append(
            {
                "task": task,
                "name": TASK_NAMES[task],
                "rows": rows,
                "open": sum(1 for r in rows if r["open"]),
            }
        )
    return tasks


def _next_in_queue(queue: list, window) -> object | None:
    """The queue's window after this one (in stay order), else its first other
    one: where "next window" leads."""
    key = (window.stay_id, window.index)
    others = [c.window for c in queue if c.window_id != window.pk]
    later = [w for w in others if (w.stay_id, w.index) > key]
    return (later or others or [None])[0]


def _third_candidates(*, campaign: Campaign, window) -> list:
    """The campaign's physicians not yet assigned the window, by username: who
    can be asked for a third label."""
    taken = Assignment.objects.filter(campaign=campaign, window=window).values_list(
        "annotator_id", flat=True
    )
    return [
        member.user
        for member in CampaignPhysician.objects.filter(campaign=campaign)
        .exclude(user_id__in=set(taken))
        .select_related("user")
        .order_by("user__username")
    ]


def _pending(*, campaign: Campaign, window) -> list[Assignment]:
    """The window's active assignments whose label is not submitted yet."""
    assignments = (
        Assignment.objects.filter(campaign=campaign, window=window, active=True)
        .select_related("annotator")
        .order_by("pk")
    )
    return [a for a in assignments if a.state != AssignmentState.SUBMITTED]


__all__ = ["TASK_NAMES", "adjudication_workspace"]
