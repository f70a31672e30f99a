"""Reads of the admin's adjudication workspace (spec section 4): one window of
the campaign's queue with each physician's label side by side, the set tasks'
items grouped by meaning with their evidence events named, each recorded
action's ratings per physician, the consensus status and its evidence, the open
disputes and the decisions so far."""

from __future__ import annotations

from django.utils import timezone

from annotation.models import (
    AdjudicationAction,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    ConsensusTask,
    PatientStatus,
)
from annotation.selectors.disputes import adjudication_queue, window_adjudication_get
from annotation.services.consensus import SET_TASKS
from evaluation.labelschema import RATING_VALUES, STATUS_KEYS
from windows.actions import action_text_of
from windows.models import Event
from windows.vocabulary import event_label

TASK_NAMES = dict(ConsensusTask.choices)
RATING_NAMES = {
    "best_practice": "Best practice",
    "acceptable": "Acceptable",
    "potentially_harmful": "Potentially harmful",
}
# Keys that toggle an item of the merge panel in focus (its row number).
MERGE_KEYS = "123456789"


def adjudication_workspace_page(*, admin, campaign_id, window_id) -> dict:
    """The workspace (``adjudication_workspace``) of the campaign the id names;
    Http404 for another id or a non-admin."""
    from annotation.selectors import campaign_get_for_admin

    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    return adjudication_workspace(admin=admin, campaign=campaign, window_id=window_id)


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
    events = _events_named(window, _cited_ids(agreement, consensus, columns))
    for column in columns:
        column["status_evidence"] = _named(events, column["status_evidence"])
    tasks = _tasks(agreement, columns, open_disputes, decisions, events)
    ratings = _ratings(columns, events)
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
        "tasks": tasks,
        "consensus_status_evidence": _named(
            events, consensus.status_evidence if consensus else []
        ),
        "ratings": ratings,
        "ratings_disagree": sum(1 for r in ratings if r["disagree"]),
        "decisions": list(reversed(decisions)),
        "open_count": consensus.dispute_count if consensus else 0,
        "queue_count": len(queue),
        "position": next(
            (n for n, c in enumerate(queue, start=1) if c.window_id == window.pk),
            None,
        ),
        "next_window": _next_in_queue(queue, window),
        "third_candidates": _third_candidates(
            campaign=campaign, window=window, admin=admin
        ),
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
        payload = (label.payload or {}) if label else {}
        columns.append(
            {
                "payload": payload,
                "status_evidence": list(
                    entry.get("status_evidence") or payload.get("status_evidence", [])
                ),
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


def _cited_ids(agreement, consensus, columns) -> set[int]:
    """Every event the page names: the items' evidence, the statuses' evidence
    (each label's and the consensus'), the rated actions and their evidence."""
    ids: set[int] = set()
    if agreement is not None:
        for clusters in (agreement.clusters or {}).values():
            for cluster in clusters:
                for item in cluster["items"]:
                    ids.update(item.get("evidence") or [])
    if consensus is not None:
        ids.update(consensus.status_evidence or [])
    for column in columns:
        ids.update(column["status_evidence"])
        for rating in column["payload"].get("action_ratings", []):
            ids.add(rating.get("event_id"))
            ids.update(rating.get("evidence") or [])
    return {i for i in ids if isinstance(i, int)}


def _events_named(window, ids: set[int]) -> dict[int, dict]:
    """The cited events of the window's stay (its admission: what labels may
    cite), in one query, each with its name, time and value as the trajectory
    names them; an id of another stay is not looked up."""
    if not ids:
        return {}
    events = Event.objects.filter(admission_id=window.stay.admission_id, pk__in=ids)
    named = {}
    for event in events:
        label = event_label(
            domain=event.domain,
            category=event.category,
            name=event.name,
            unit=event.unit,
        )
        if event.value_num is not None:
            value = f"{event.value_num:.6g} {label.unit}".strip()
        else:
            value = event.value_text
        local = timezone.localtime(event.time)
        named[event.pk] = {
            "id": event.pk,
            "name": label.text,
            "action": action_text_of(event),
            "time": local.strftime("%H:%M"),
            "datetime": local.strftime("%Y-%m-%d %H:%M"),
            "hours": f"{window.stay.hours_since_admit(event.time):+.1f} h",
            "value": value,
            "in_window": window.start <= event.time < window.end,
        }
    return named


def _named(events: dict[int, dict], ids) -> list[dict]:
    """``ids`` as named events, in order; an id not found in the stay stays
    visible as such rather than vanishing."""
    return [
        events.get(i)
        or {"id": i, "name": f"event {i} (not in this stay)", "missing": True}
        for i in dict.fromkeys(ids or [])
    ]


def _ratings(columns, events) -> list[dict]:
    """Each recorded action any label rates, as a row: its name and time, each
    column's rating with its evidence (None where the physician did not rate
    it), and whether the ratings differ."""
    order: list[int] = []
    by_column = []
    for column in columns:
        ratings = {}
        for rating in column["payload"].get("action_ratings", []):
            event_id = rating.get("event_id")
            ratings[event_id] = rating
            if event_id not in order:
                order.append(event_id)
        by_column.append(ratings)
    rows = []
    for event_id in order:
        event = events.get(event_id) or {"id": event_id, "action": f"event {event_id}"}
        cells = []
        for ratings in by_column:
            rating = ratings.get(event_id)
            cells.append(
                None
                if rating is None
                else {
                    "value": rating.get("rating", ""),
                    "name": RATING_NAMES.get(rating.get("rating"), "not rated"),
                    "rank": RATING_VALUES.index(rating["rating"])
                    if rating.get("rating") in RATING_VALUES
                    else None,
                    "evidence": _named(events, rating.get("evidence")),
                }
            )
        values = {c["value"] if c else "" for c in cells}
        rows.append({"event": event, "cells": cells, "disagree": len(values) > 1})
    rows.sort(key=lambda r: (r["event"].get("datetime", ""), r["event"]["id"]))
    return rows


def _tasks(agreement, columns, open_disputes, decisions, events) -> list[dict]:
    """Per set task, its clusters as rows: the texts, each column's item with
    its evidence named, who gave it, whether it is kept, open, decided or
    merged; and the rows that may still be merged."""
    if agreement is None:
        return []
    decided = {(d.task, d.item_ref): d for d in decisions if d.item_ref}
    for d in decisions:
        if d.action == AdjudicationAction.MERGE:
            for ref in d.context.get("merged", []):
                decided[(d.task, ref)] = d
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
                    "cells": [
                        _cell(by_label.get(c["label_id"]), c, cluster, events)
                        for c in columns
                    ],
                    "who": [
                        column_of[i["label_id"]]["letter"]
                        for i in cluster["items"]
                        if i["label_id"] in column_of
                    ],
                }
            )
        for row in rows:
            decision = row["decision"]
            row["merged"] = bool(decision and decision.action == "merge")
            row["mergeable"] = decision is None or decision.action in (
                AdjudicationAction.ACCEPT,
                AdjudicationAction.REWRITE,
            )
        mergeable = [r for r in rows if r["mergeable"]]
        tasks.append(
            {
                "task": task,
                "name": TASK_NAMES[task],
                "rows": rows,
                "open": sum(1 for r in rows if r["open"]),
                # A merge needs two items: two rows, or one matched row.
                "mergeable": mergeable
                if len(mergeable) > 1 or any(len(r["who"]) > 1 for r in mergeable)
                else [],
            }
        )
    return tasks


def _rating_of(column, event_id) -> str:
    for rating in column["payload"].get("action_ratings", []):
        if rating.get("event_id") == event_id:
            return RATING_NAMES.get(rating.get("rating"), "not rated")
    return ""


def _cell(item, column, cluster, events) -> dict | None:
    """A column's item of a cluster with its evidence named (a rated action's
    own event, which leads its evidence, left out: the row names it) and, for
    a recorded action, the column's rating of it. A column without an item in
    a recorded action's cluster says how it rated the action instead (a rating
    of potentially harmful recommends nothing), else None."""
    if item is None:
        event_id = next((i["event_id"] for i in cluster["items"] if i["event_id"]), 0)
        rating = _rating_of(column, event_id) if event_id else ""
        return {"rated_only": rating} if rating else None
    evidence = list(item.get("evidence") or [])
    if item.get("event_id") and evidence[:1] == [item["event_id"]]:
        evidence = evidence[1:]
    return {
        **item,
        "evidence_named": _named(events, evidence),
        "rating": _rating_of(column, item["event_id"]) if item.get("event_id") else "",
    }


def _next_in_queue(queue: list, window) -> object | None:
    """The queue's window after this one (in stay order), else its first other
    one: where "next window" leads."""
    key = (window.stay_id, window.index)
    others = [c.window for c in queue if c.window_id != window.pk]
    later = [w for w in others if (w.stay_id, w.index) > key]
    return (later or others or [None])[0]


def _third_candidates(*, campaign: Campaign, window, admin) -> list:
    """The campaign's physicians not yet assigned the window, by username: who
    can be asked for a third label. Never the adjudicator: a label of theirs
    would be judged by themselves."""
    taken = set(
        Assignment.objects.filter(campaign=campaign, window=window).values_list(
            "annotator_id", flat=True
        )
    )
    return [
        member.user
        for member in CampaignPhysician.objects.filter(campaign=campaign)
        .exclude(user_id__in=taken | {admin.pk})
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


__all__ = ["MERGE_KEYS", "RATING_NAMES", "TASK_NAMES", "adjudication_workspace"]
