"""Prediction-powered intervals of a Scale submission's scores (issue 33): its
score against the Oracle's labels on every window, corrected by the rectifier
set, the release's windows that also have a physician consensus in the Gold
campaign its Oracle run was validated against (with, for an active draw, the
pilot's windows labelled before it). The statistics are ``evaluation.ppi``'s,
the very functions benchmarks/ppi_coverage_bench.py measures: when the draw
stored every window's uncertainty level, lam takes one value per stratum of
levels (``evaluation.ppi_active.lam_strata``), as the benchmark's active
draws do."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from django.db.models import Q

from annotation.models import ConsensusLabel
from evaluation.metrics import (
    WindowGold,
    WindowPrediction,
    window_harmful_fraction,
    window_hit_at_k,
    window_recall_at_k,
)
from evaluation.ppi import (
    ALPHA,
    MACRO_F1,
    MEAN,
    RATIO,
    Design,
    score_interval,
)
from evaluation.ppi_active import lam_strata
from evaluation.ppi_vectors import (
    status_cells,
    status_code,
    status_hits,
    stay_weighted_values,
    window_values,
)
from exports.metric_names import METRIC_KEYS, METRIC_TITLES
from exports.models import Release, ReleaseKind

# What an interval means, said once for the API, the pages and the data card.
INTERVAL_MEANING = (
    "A 95 % confidence interval for the score against physicians: the score "
    "against the Oracle's labels on every window, corrected by the windows that "
    "also have a physician consensus (prediction-powered inference, PPI++). The "
    "Oracle-only figure treats the Oracle as the truth; the Gold-only figure "
    "uses the physician windows alone; effective Gold windows are how many "
    "physician windows a Gold-only interval would need to be as narrow."
)

# How lam was fitted, for the API, the manifest and a researcher recomputing.
LAM_ONE = "one lam"
LAM_BY_LEVEL = (
    "one lam per stratum of the stored uncertainty levels: 0, 1, 2-3 "
    "(evaluation.ppi_active.lam_strata); a stratum with fewer than 30 Gold "
    "windows shares one with the others"
)


def release_rectifier(release: Release) -> dict[int, WindowGold]:
    """The physician consensus of a Scale release's windows, by window id: the
    Gold campaign of the validation report the release was promoted on
    (finished, undisputed, not dropped), as the metrics read labels, and the
    windows an active draw of that campaign counted as its pilot (their
    latest consensus, in whichever campaign)."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return {}
    from oracle.models import GoldInclusion, GoldInclusionPhase

    campaign_id = release.validation_report.campaign_id
    in_release = release.window_records.values("window_id")
    pilot = GoldInclusion.objects.filter(
        campaign_id=campaign_id, phase=GoldInclusionPhase.PILOT
    ).values("window_id")
    rows = (
        ConsensusLabel.objects.filter(
            Q(campaign_id=campaign_id) | Q(window_id__in=pilot),
            dropped=False,
            dispute_count=0,
            window_id__in=in_release,
        )
        .order_by("window_id", "pk")
        .values_list("window_id", "window__stay_id", "status", "items")
    )
    out = {}
    for window_id, stay_id, status, items in rows:
        items = items or {}
        out[window_id] = WindowGold(
            window_id=window_id,
            stay_id=stay_id,
            status=status or None,
            problems=[i["text"] for i in items.get("acute_problems", [])],
            actions=[i["text"] for i in items.get("recommended_actions", [])],
            red_flags=[i["text"] for i in items.get("red_flags", [])],
        )
    return out


def rectifier_inclusion(release: Release) -> dict[int, float] | None:
    """Each Gold window's stored probability of its draw (an active draw,
    ``oracle.models.GoldInclusion``), or ``None`` when its campaign stored
    none (the Gold windows then count as a uniform draw)."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return None
    from oracle.models import GoldInclusion

    rows = dict(
        GoldInclusion.objects.filter(
            campaign_id=release.validation_report.campaign_id
        ).values_list("window_id", "probability")
    )
    return rows or None


def release_levels(release: Release) -> dict[int, int] | None:
    """Each window's uncertainty level stored by the active draw of the
    release's Gold campaign (``GoldInclusion.level``, every pool window's),
    or ``None`` when it stored none."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return None
    from oracle.models import GoldInclusion

    rows = dict(
        GoldInclusion.objects.filter(
            campaign_id=release.validation_report.campaign_id, level__isnull=False
        ).values_list("window_id", "level")
    )
    return rows or None


def window_strata(window_ids, levels: dict[int, int] | None):
    """lam's stratum of each window (``lam_strata`` of its level), or
    ``None`` (one lam) unless every window has a stored level."""
    if not levels or any(w not in levels for w in window_ids):
        return None
    return lam_strata([levels[w] for w in window_ids])


def rectifier_texts(rectifier: dict[int, WindowGold]):
    """The texts the matcher meets on the rectifier set (scoring prepares them
    with the release's own)."""
    from evaluation.polarity import forbidden_action

    for g in rectifier.values():
        yield from g.problems
        yield from g.actions
        yield from (forbidden_action(r) for r in g.red_flags)


def window_vectors(
    reference: Sequence[WindowGold | None],
    predictions: Sequence[WindowPrediction | None],
    stays: Sequence,
    match,
    k: int,
) -> dict[str, np.ndarray]:
    """Per metric, the (N x d) per-window vectors of predictions against
    ``reference`` (``None``: no reference on that window, zeros), in the
    shapes ``evaluation.ppi``'s functionals read; ``stays`` every window's
    stay (HRR@k averages within stays)."""
    present = [r is not None for r in reference]
    ref = [r if r is not None else _EMPTY for r in reference]
    preds = [p if p is not None else _NO_PREDICTION for p in predictions]
    ref_status = [status_code(r.status) if ok else -1 for r, ok in zip(ref, present)]
    pred_status = [status_code(p.status) for p in preds]

    def per_window(fn, task):
        return window_values(
            [
                fn(list(getattr(p, task)), getattr(r, task), match, k) if ok else None
                for r, p, ok in zip(ref, preds, present)
            ]
        )

    # HRR: which windows count (a recommendation in the top k) is the
    # prediction's alone, so the Oracle's and the truth's vectors share their
    # weights; a window without a reference has no red flags to match.
    harm = [
        window_harmful_fraction(list(p.actions), r.red_flags if ok else (), match, k)
        for r, p, ok in zip(ref, preds, present)
    ]
    return {
        "status_accuracy": status_hits(ref_status, pred_status),
        "status_macro_f1": status_cells(ref_status, pred_status),
        "problems_hit_at_k": per_window(window_hit_at_k, "problems"),
        "problems_recall_at_k": per_window(window_recall_at_k, "problems"),
        "actions_hit_at_k": per_window(window_hit_at_k, "actions"),
        "actions_recall_at_k": per_window(window_recall_at_k, "actions"),
        "actions_hrr_at_k": stay_weighted_values(stays, harm),
    }


_EMPTY = WindowGold(window_id=None, stay_id=None, status=None)
_NO_PREDICTION = WindowPrediction(window_id=None, stay_id=None, status=None)

FUNCTIONALS = {
    "status_accuracy": RATIO,
    "status_macro_f1": MACRO_F1,
    "problems_hit_at_k": RATIO,
    "problems_recall_at_k": RATIO,
    "actions_hit_at_k": RATIO,
    "actions_recall_at_k": RATIO,
    "actions_hrr_at_k": MEAN,
}


def scale_intervals(
    *,
    oracle: list[WindowGold],
    rectifier: dict[int, WindowGold],
    predictions: list[WindowPrediction],
    match,
    k: int,
    inclusion: dict[int, float] | None = None,
    levels: dict[int, int] | None = None,
) -> dict:
    """Every figure's PPI estimate and interval, with the Oracle-only and
    Gold-only figures and the effective Gold windows. ``oracle`` is the
    release's labels (every window), ``rectifier`` the physician consensus
    by window id, ``inclusion`` each Gold window's probability of its draw
    (missing: the Gold windows count as a uniform draw), ``levels`` each
    window's uncertainty level (lam per stratum of levels when every window
    has one, ``window_strata``; else one lam)."""
    by_id = {p.window_id: p for p in predictions}
    preds = [by_id.get(g.window_id) for g in oracle]
    truth = [rectifier.get(g.window_id) for g in oracle]
    stays = [g.stay_id for g in oracle]
    labelled = np.array([t is not None for t in truth], dtype=bool)
    pi = None
    uniform = inclusion is None or not labelled.any()
    if not uniform:
        pi = np.array(
            [inclusion.get(g.window_id, math.nan) for g in oracle], dtype=float
        )
        if np.isnan(pi[labelled]).any():
            # A Gold window outside the stored draw: count them all uniform.
            pi, uniform = None, True
    strata = window_strata([g.window_id for g in oracle], levels)
    f_vectors = window_vectors(oracle, preds, stays, match, k)
    y_vectors = window_vectors(truth, preds, stays, match, k)
    figures = {}
    for metric in METRIC_KEYS:
        design = Design.of(
            f_vectors[metric], y_vectors[metric], labelled, pi, strata=strata
        )
        figures[metric] = score_interval(design, FUNCTIONALS[metric]).as_dict()
    return {
        "confidence": 1 - ALPHA,
        "method": "PPI++ (power-tuned prediction-powered inference)",
        "meaning": INTERVAL_MEANING,
        "n_windows": len(oracle),
        "n_rectifier_windows": int(labelled.sum()),
        "inclusion": "uniform" if uniform else "stored draw probabilities",
        "lam_strata": LAM_ONE if strata is None else LAM_BY_LEVEL,
        "figures": figures,
    }


def interval_rows(intervals: dict | None, k: int) -> list[dict]:
    """The rows a score page shows, one per figure, from stored scores'
    ``intervals`` (none for a Gold release, or Scale without a rectifier)."""
    if not intervals:
        return []
    return [
        {
            "metric": metric,
            "title": METRIC_TITLES[metric].replace("@k", f"@{k}"),
            **intervals["figures"][metric],
        }
        for metric in METRIC_KEYS
        if metric in intervals.get("figures", {})
    ]


def rectifier_manifest(release: Release) -> dict | None:
    """A Scale manifest's ``rectifier`` section: the Gold campaign, its windows
    in the release and each one's inclusion probability, so that a researcher
    can recompute a score's interval offline (with the Gold release's labels
    of those windows and ``evaluation.ppi``): the probabilities an active
    draw stored, or else n / N each (the windows count as a uniform draw)."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return None
    ids = sorted(release_rectifier(release))
    n_windows = release.window_records.count()
    stored = rectifier_inclusion(release)
    if stored is not None and not all(w in stored for w in ids):
        stored = None  # as scale_intervals: a window outside the draw
    uniform = len(ids) / n_windows if n_windows else None
    levels = release_levels(release)
    every = list(release.window_records.values_list("window_id", flat=True))
    by_level = window_strata(every, levels) is not None
    return {
        "gold_campaign_id": release.validation_report.campaign_id,
        "n_windows": len(ids),
        "inclusion": "uniform" if stored is None else "stored draw probabilities",
        "lam_strata": LAM_BY_LEVEL if by_level else LAM_ONE,
        # Every window's level, for lam's strata (only when every one has one).
        "window_levels": {str(w): levels[w] for w in sorted(every)}
        if by_level
        else None,
        "method": "PPI++ (power-tuned prediction-powered inference), 95 %",
        "meaning": INTERVAL_MEANING,
        "windows": [
            {
                "window_id": w,
                "inclusion_probability": uniform if stored is None else stored[w],
            }
            for w in ids
        ],
    }


def rectifier_markdown(section: dict | None) -> str:
    """The data card's paragraph on score intervals (Scale only)."""
    if not section:
        return ""
    return (
        "## Score intervals\n\n"
        f"{section['meaning']} The rectifier set is the {section['n_windows']} "
        "windows of this release with a physician consensus in Gold campaign "
        f"{section['gold_campaign_id']} (or in its active draw's pilot); the "
        "manifest's `rectifier` lists them "
        f"with each window's inclusion probability ({section['inclusion']}); "
        f"the intervals fit {section['lam_strata']}.\n"
    )
