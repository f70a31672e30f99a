"""Reads of a campaign's inter-rater reliability (spec section 4) and of each
physician's figures, over the windows whose agreement is computed
(annotation.services.agreement)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from itertools import combinations

import numpy as np
from django.db import connection

from accounts.roles import require_admin
from annotation.models import (
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    ConsensusLabel,
    ConsensusTask,
    Label,
    PatientStatus,
    WindowAgreement,
)
from annotation.selectors import campaign_get_for_admin
from annotation.selectors.agreement import irr_recompute_progress
from annotation.selectors.disputes import adjudication_queue
from annotation.services.consensus import SET_TASKS, majority_status
from evaluation.agreement import bootstrap_ci, cohens_kappa, status_agreement
from evaluation.matcher import SemanticMatcher, configured_model_name, tau_source_of

TASK_NAMES = dict(ConsensusTask.choices)


def _ci(ci) -> dict:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def _nanmean(values) -> float:
    array = np.asarray(list(values), dtype=float)
    array = array[~np.isnan(array)]
    return float(array.mean()) if array.size else math.nan


def _nanmean_batch(samples: np.ndarray) -> np.ndarray:
    """``_nanmean`` of each row of ``samples`` (resamples x windows) at once: the
    bootstrap's replicates (evaluation.agreement.bootstrap_ci's ``batch``)."""
    present = ~np.isnan(samples)
    count = present.sum(axis=1)
    total = np.where(present, samples, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


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
    # Only the columns the figures read, as tuples (window id, labels, status
    # agreed, pairwise F1): model instances, and the clusters' JSON (counted
    # apart, _cluster_figures) were most of a Gold release's report (issue 35).
    agreements = list(
        WindowAgreement.objects.filter(campaign=campaign)
        .order_by("window_id")
        .values_list("window_id", "labels", "status_agreed", "pairwise_f1")
    )
    consensus = {
        window_id: (status, dropped)
        for window_id, status, dropped in ConsensusLabel.objects.filter(
            campaign=campaign
        ).values_list("window_id", "status", "dropped")
    }
    ratings = [[entry["status"] for entry in labels] for _, labels, _, _ in agreements]
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
        values = np.array([f1[task]["mean"] for *_, f1 in agreements], dtype=float)
        if values.size:
            ci = bootstrap_ci(
                _nanmean, values, n_boot=n_boot, seed=seed, batch=_nanmean_batch
            )
            result["set_tasks"][task] = {"mean_pairwise_f1": _ci(ci)}
        else:
            result["set_tasks"][task] = {"mean_pairwise_f1": None}

    result["pairs"] = _pair_figures((labels, f1) for _, labels, _, f1 in agreements)

    keep = {}
    agreed = sum(
        1
        for _, labels, status_agreed, _ in agreements
        if status_agreed or majority_status([entry["status"] for entry in labels])
    )
    kept_status = sum(
        1
        for window_id, *_ in agreements
        if (c := consensus.get(window_id)) and c[0] and not c[1]
    )
    keep[ConsensusTask.STATUS] = {
        "raw": len(agreements),
        "kept_auto": agreed,
        "keep_rate": agreed / len(agreements) if agreements else math.nan,
        "kept_final": kept_status,
        "dropped_windows": sum(1 for _, dropped in consensus.values() if dropped),
    }
    clusters = _cluster_figures(campaign)
    consensus_items = _consensus_item_counts(campaign)
    for task in SET_TASKS:
        raw, kept_items, count, count_kept = clusters.get(task, (0, 0, 0, 0))
        keep[task] = {
            "raw": raw,
            "kept_auto": kept_items,
            "keep_rate": kept_items / raw if raw else math.nan,
            "clusters": count,
            "clusters_kept_auto": count_kept,
            "kept_final": consensus_items.get(task, 0),
        }
    result["keep_rates"] = keep
    return result


# Counted by PostgreSQL: reading the clusters' JSON (4.7 MB for 1,388 windows)
# to count them was a third of campaign_irr's time (issue 35).
_CLUSTER_FIGURES_SQL = """
SELECT task.key,
       SUM(jsonb_array_length(c -> 'items')),
       COALESCE(SUM(jsonb_array_length(c -> 'items'))
                FILTER (WHERE c -> 'kept' = 'true'::jsonb), 0),
       COUNT(*),
       COUNT(*) FILTER (WHERE c -> 'kept' = 'true'::jsonb)
FROM {table} AS agreement
CROSS JOIN LATERAL jsonb_each(agreement.clusters) AS task
CROSS JOIN LATERAL jsonb_array_elements(task.value) AS c
WHERE agreement.campaign_id = %s
GROUP BY task.key
"""

_CONSENSUS_ITEMS_SQL = """
SELECT task.key, SUM(jsonb_array_length(task.value))
FROM {table} AS consensus
CROSS JOIN LATERAL jsonb_each(consensus.items) AS task
WHERE consensus.campaign_id = %s AND NOT consensus.dropped
GROUP BY task.key
"""


def _counted(sql: str, model, campaign: Campaign) -> dict[str, tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql.format(table=model._meta.db_table), [campaign.pk])
        return {key: tuple(row) for key, *row in cursor.fetchall()}


def _cluster_figures(campaign: Campaign) -> dict[str, tuple[int, int, int, int]]:
    """Per set task of the campaign's agreement rows: items, items in kept
    clusters, clusters, kept clusters."""
    if connection.vendor == "postgresql":
        return _counted(_CLUSTER_FIGURES_SQL, WindowAgreement, campaign)
    return _clusters_counted(
        clusters
        for (clusters,) in WindowAgreement.objects.filter(
            campaign=campaign
        ).values_list("clusters")
    )


def _clusters_counted(rows) -> dict[str, tuple[int, int, int, int]]:
    """``_cluster_figures`` of the agreement rows' ``clusters``, in Python."""
    figures: dict[str, list[int]] = {}
    for clusters in rows:
        for task, entries in clusters.items():
            counts = figures.setdefault(task, [0, 0, 0, 0])
            for cluster in entries:
                size = len(cluster["items"])
                counts[0] += size
                counts[2] += 1
                if cluster["kept"]:
                    counts[1] += size
                    counts[3] += 1
    return {task: tuple(counts) for task, counts in figures.items()}


def _consensus_item_counts(campaign: Campaign) -> dict[str, int]:
    """Per set task: the items of the campaign's consensus (dropped windows
    aside)."""
    if connection.vendor == "postgresql":
        counted = _counted(_CONSENSUS_ITEMS_SQL, ConsensusLabel, campaign)
        return {task: int(row[0]) for task, row in counted.items()}
    return _consensus_items_counted(
        items
        for (items,) in ConsensusLabel.objects.filter(
            campaign=campaign, dropped=False
        ).values_list("items")
    )


def _consensus_items_counted(rows) -> dict[str, int]:
    """``_consensus_item_counts`` of the consensus rows' ``items``, in Python."""
    counts: dict[str, int] = defaultdict(int)
    for items in rows:
        for task, entries in items.items():
            counts[task] += len(entries)
    return dict(counts)


def _pair_figures(agreements) -> list[dict]:
    """The physician pairs' figures from the (labels, pairwise F1) of each
    agreement row."""
    shared: dict[tuple[int, int], dict] = {}
    for labels, pairwise_f1 in agreements:
        status_of = {e["annotator_id"]: e["status"] for e in labels}
        for a, b in combinations(sorted(status_of), 2):
            entry = shared.setdefault(
                (a, b),
                {"a": [], "b": [], "f1": {task: [] for task in SET_TASKS}},
            )
            entry["a"].append(status_of[a])
            entry["b"].append(status_of[b])
        for task in SET_TASKS:
            for pair in pairwise_f1[task]["pairs"]:
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
    pairs = _pair_figures(
        WindowAgreement.objects.filter(campaign=campaign).values_list(
            "labels", "pairwise_f1"
        )
    )
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


# The IRR dashboard ------------------------------------------------------------


def irr_dashboard_get(*, admin, campaign: Campaign) -> dict:
    """What the campaign's IRR dashboard shows: the IRR figures with their
    charts (static/js/charts.js), the physician pairs, the keep rates, each
    physician's figures (the lowest status agreement marked), the matcher the
    agreement was computed with and the one in force, and the queue's size."""
    irr = campaign_irr(campaign=campaign)
    stats = physician_stats(admin=admin, campaign=campaign)
    names = {row["user_id"]: row["username"] for row in stats}
    status = irr["status"]
    status_chart = None
    if status:
        kappa_label = (
            "Cohen's kappa" if status["kappa_name"] == "cohen" else "Fleiss' kappa"
        )
        status_chart = _ci_chart(
            [
                _ci_item("Percent agreement", status["percent_agreement"]),
                _ci_item(kappa_label, status["kappa"]),
                _ci_item("Krippendorff's alpha (ordinal)", status["alpha_ordinal"]),
            ]
        )
    set_rows = [
        {
            "task": task,
            "name": TASK_NAMES[task],
            "f1": irr["set_tasks"][task]["mean_pairwise_f1"],
        }
        for task in SET_TASKS
    ]
    keep = [
        {"task": task, "name": TASK_NAMES[task], **irr["keep_rates"][task]}
        for task in (ConsensusTask.STATUS, *SET_TASKS)
    ]
    model_name = configured_model_name()
    in_force = SemanticMatcher(model_name)
    return {
        "campaign": campaign,
        "irr": irr,
        "status": status,
        "status_chart": status_chart,
        "set_rows": set_rows,
        "f1_chart": (
            _ci_chart([_ci_item(r["name"], r["f1"]) for r in set_rows])
            if irr["windows"]
            else None
        ),
        "pairs": [
            {
                **pair,
                "names": [names.get(uid, f"user {uid}") for uid in pair["physicians"]],
                "f1": [pair["mean_pairwise_f1"][task] for task in SET_TASKS],
            }
            for pair in irr["pairs"]
        ],
        "keep": keep,
        "keep_chart": (
            _ci_chart(
                [_ci_item(row["name"], {"estimate": row["keep_rate"]}) for row in keep]
            )
            if irr["windows"]
            else None
        ),
        "stats": _stats_rows(stats),
        "set_names": [TASK_NAMES[t] for t in SET_TASKS],
        "computed_with": _computed_with(campaign),
        "model_name": model_name,
        "model_tau": in_force.tau,
        "tau_source": in_force.tau_source,
        "queue_count": len(adjudication_queue(admin=admin, campaign=campaign)),
    }


def _stats_rows(stats: list[dict]) -> list[dict]:
    """The physicians' rows as the page shows them: F1 per set task in order,
    the median time as m:ss, and the lowest status agreement marked once two
    physicians have one."""
    for row in stats:
        row["f1"] = [row["mean_pairwise_f1"][task] for task in SET_TASKS]
        seconds = row["median_seconds"]
        row["median_display"] = (
            f"{int(seconds) // 60}:{int(seconds) % 60:02d}"
            if seconds is not None
            else "–"
        )
    compared = [
        r["status_agreement"] for r in stats if not math.isnan(r["status_agreement"])
    ]
    if len(compared) >= 2:
        lowest = min(compared)
        for row in stats:
            row["lowest"] = row["status_agreement"] == lowest
    return stats


def _computed_with(campaign: Campaign) -> list[tuple]:
    """The (model, tau, where tau comes from) the campaign's agreement rows were
    computed with."""
    return [
        (model, tau, tau_source_of(model, tau))
        for model, tau in sorted(
            set(
                WindowAgreement.objects.filter(campaign=campaign)
                .values_list("matcher_model", "tau")
                .distinct()
            )
        )
    ]


def _figure(value) -> float | None:
    """A figure for a chart's JSON: an undefined one (nan) is null."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _ci_item(label: str, ci: dict | None) -> dict:
    """A bar of a chart (static/js/charts.js): the estimate and its 95 % CI."""
    ci = ci or {}
    return {
        "label": label,
        **{key: _figure(ci.get(key)) for key in ("estimate", "low", "high")},
    }


def _ci_chart(items: list[dict]) -> dict:
    return {"kind": "bars", "bars": items}


__all__ = ["campaign_irr", "irr_dashboard_get", "physician_stats"]


def irr_dashboard_page(*, admin, campaign_id) -> dict:
    """The IRR dashboard of a campaign (``irr_dashboard_get``) with its
    recompute area (``irr_recompute_progress``). Http404 for another id or a
    non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    return {
        **irr_dashboard_get(admin=admin, campaign=campaign),
        "progress": irr_recompute_progress(admin=admin, campaign=campaign),
    }
