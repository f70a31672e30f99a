"""The Oracle measured against Gold consensus, as the paper's Table 1 (spec
section 6): status accuracy, macro-F1 and confusion matrix; semantic F1 of the
three set tasks averaged over windows; the same per disease group; and how many
Gold windows were compared and how many had no Oracle label.

Gold is the campaign's consensus, leaving out dropped windows and windows with
open disputes (their consensus is not final). The Oracle's sets are derived
from its label payload exactly as a physician's are
(``annotation.services.agreement.label_items``: problems; best-practice and acceptable
ratings plus added actions; red flags), so both sides of the comparison mean
the same thing. Whether the figures are good enough to promote the run is
``oracle.promotion_gate``; the services that run this and store the report are
``oracle.services.validating``."""

from __future__ import annotations

import math
from types import SimpleNamespace

from django.db.models import Exists, F, OuterRef

from annotation.models import Campaign, ConsensusLabel, ConsensusTask
from annotation.services.agreement import label_items, rated_event_names
from annotation.services.consensus import SET_TASKS
from evaluation.agreement import STATUS_ORDER
from evaluation.metrics import WindowGold, validate_oracle
from oracle.models import OracleLabel, OracleLabelState, OracleRun
from windows.models import DiseaseGroup

# Texts sent to the matcher at once while warming its cache (one progress step).
EMBED_BATCH = 64

# Task -> the WindowGold attribute the metrics read.
SET_TASK_FIELDS = {
    ConsensusTask.ACUTE_PROBLEMS: "problems",
    ConsensusTask.RECOMMENDED_ACTIONS: "actions",
    ConsensusTask.RED_FLAGS: "red_flags",
}


def _finite(value):
    """JSON has no NaN (PostgreSQL's jsonb refuses it): an undefined figure is
    stored as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _label_shim(label: OracleLabel):
    """An Oracle label in the shape ``label_items`` reads (it has no annotator)."""
    return SimpleNamespace(
        pk=label.pk,
        payload=label.payload or {},
        assignment=SimpleNamespace(annotator_id=None),
    )


def gold_windows(*, campaign: Campaign) -> tuple[list[WindowGold], dict]:
    """The campaign's consensus as metric inputs, and what was left out."""
    consensus = list(
        ConsensusLabel.objects.filter(campaign=campaign).select_related("window__stay")
    )
    kept, dropped, disputed = [], 0, 0
    for label in consensus:
        if label.dropped:
            dropped += 1
            continue
        if label.dispute_count:
            disputed += 1
            continue
        stay = label.window.stay
        kept.append(
            WindowGold(
                window_id=label.window_id,
                stay_id=stay.pk,
                status=label.status or None,
                **{
                    SET_TASK_FIELDS[task]: [
                        item["text"] for item in (label.items or {}).get(task, [])
                    ]
                    for task in SET_TASKS
                },
                attributes={
                    "disease_group": stay.disease_group or DiseaseGroup.UNKNOWN
                },
            )
        )
    return kept, {
        "consensus": len(consensus),
        "dropped": dropped,
        "open_disputes": disputed,
        "awaiting": windows_awaiting_labels(campaign=campaign),
    }


# Windows awaiting labels named on a report; the count is always whole.
AWAITING_NAMED = 50


def windows_awaiting_labels(*, campaign: Campaign) -> dict:
    """The campaign's windows with no consensus yet (their physicians' labels
    are not all in): how many, and the first AWAITING_NAMED of them by stay
    and window index, so that a report says which Gold it could not use."""
    from annotation.models import CampaignWindow

    has_consensus = ConsensusLabel.objects.filter(
        campaign=campaign, window_id=OuterRef("window_id")
    )
    open_windows = (
        CampaignWindow.objects.filter(campaign=campaign)
        .filter(~Exists(has_consensus))
        .order_by("window__stay_id", "window__index")
    )
    named = list(
        open_windows.values(
            "window_id", stay_id=F("window__stay_id"), index=F("window__index")
        )[:AWAITING_NAMED]
    )
    return {"count": open_windows.count(), "windows": named}


def oracle_windows(*, run: OracleRun, window_ids) -> tuple[list[WindowGold], int]:
    """The run's successful labels of those windows as metric inputs, and how
    many of those windows the Oracle failed on."""
    labels = list(OracleLabel.objects.filter(run=run, window_id__in=list(window_ids)))
    ok = [label for label in labels if label.state == OracleLabelState.OK]
    shims = [_label_shim(label) for label in ok]
    names = rated_event_names(shims)
    windows = []
    for label, shim in zip(ok, shims):
        items = label_items(shim, names)
        windows.append(
            WindowGold(
                window_id=label.window_id,
                stay_id=None,
                status=label.status or None,
                **{
                    SET_TASK_FIELDS[task]: [item["text"] for item in items[task]]
                    for task in SET_TASKS
                },
            )
        )
    failed = sum(label.state == OracleLabelState.FAILED for label in labels)
    return windows, failed


def _confusion(oracle: list[WindowGold], gold: list[WindowGold]) -> list[list[int]]:
    """Rows: Gold status; columns: Oracle status; in STATUS_ORDER."""
    by_id = {o.window_id: o.status for o in oracle}
    index = {status: n for n, status in enumerate(STATUS_ORDER)}
    matrix = [[0] * len(STATUS_ORDER) for _ in STATUS_ORDER]
    for g in gold:
        predicted = by_id.get(g.window_id)
        if g.status in index and predicted in index:
            matrix[index[g.status]][index[predicted]] += 1
    return matrix


def _figures(oracle: list[WindowGold], gold: list[WindowGold], matcher) -> dict:
    result = validate_oracle(oracle, gold, matcher)
    compared = {o.window_id for o in oracle} & {g.window_id for g in gold}
    return {
        "n_windows": result.n_windows,
        "n_missing": result.n_gold_without_oracle,
        "n_status_windows": sum(
            1 for g in gold if g.window_id in compared and g.status is not None
        ),
        "status_accuracy": _finite(result.status_accuracy),
        "status_macro_f1": _finite(result.status_macro_f1),
        # The spec's set F1 (many-to-many), and under "one_to_one" the
        # stricter maximum one-to-one figure, shown beside it labelled as such.
        **{
            task: {
                **_set_f1_figures(getattr(result, field)),
                "one_to_one": _set_f1_figures(getattr(result, f"{field}_one_to_one")),
            }
            for task, field in SET_TASK_FIELDS.items()
        },
    }


def _set_f1_figures(scores) -> dict:
    return {
        "precision": _finite(scores.precision),
        "recall": _finite(scores.recall),
        "f1": _finite(scores.f1),
    }


def _texts(windows: list[WindowGold]) -> list[str]:
    seen: dict[str, None] = {}
    for window in windows:
        for field in SET_TASK_FIELDS.values():
            for text in getattr(window, field):
                seen.setdefault(text, None)
    return list(seen)


def _embed_ahead(matcher, texts: list[str], on_progress) -> None:
    """Embed every text once, in batches, before any matching: the scoring then
    reads the matcher's cache, and the slow part (a cold model on texts it has
    not seen) reports its progress batch by batch."""
    embed = getattr(matcher, "embed", None)
    if embed is None:
        return  # a plain callable matcher has nothing to warm
    on_progress(0, "embedding texts (the matching model loads first if cold)")
    for start in range(0, len(texts), EMBED_BATCH):
        embed(texts[start : start + EMBED_BATCH])
        on_progress(min(start + EMBED_BATCH, len(texts)), "embedding texts")


def oracle_validation_compute(
    *, run: OracleRun, campaign: Campaign, matcher, on_progress=None
) -> dict:
    """The report stored in ``ValidationReport.report``. ``on_progress(done,
    total, label)`` is told how far it is: the texts embedded, then the
    windows scored (once overall, once per disease group)."""
    gold, excluded = gold_windows(campaign=campaign)
    oracle, failed = oracle_windows(run=run, window_ids=[g.window_id for g in gold])
    compared = {o.window_id for o in oracle} & {g.window_id for g in gold}
    texts = _texts([g for g in gold if g.window_id in compared]) + _texts(oracle)
    texts = list(dict.fromkeys(texts))
    total = len(texts) + 2 * len(gold)

    def report(done: int, label: str) -> None:
        if on_progress is not None:
            on_progress(done, total, label)

    report(0, "reading labels")
    _embed_ahead(matcher, texts, report)
    overall = _figures(oracle, gold, matcher)
    report(len(texts) + len(gold), "scoring windows")
    groups = []
    labels = dict(DiseaseGroup.choices)
    by_group: dict[str, list[WindowGold]] = {}
    for g in gold:
        by_group.setdefault(g.attributes["disease_group"], []).append(g)
    scored = 0
    for group, members in sorted(by_group.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ids = {g.window_id for g in members}
        groups.append(
            {
                "group": group,
                "label": labels.get(group, group),
                **_figures([o for o in oracle if o.window_id in ids], members, matcher),
            }
        )
        scored += len(members)
        report(len(texts) + len(gold) + scored, "scoring disease groups")
    return {
        **overall,
        "n_gold_windows": len(gold),
        "n_oracle_failed": failed,
        "excluded": excluded,
        "confusion": {
            "labels": list(STATUS_ORDER),
            "matrix": _confusion(oracle, gold),
        },
        "by_disease_group": groups,
        "run": {
            "id": run.pk,
            "backbone": (run.backbone_snapshot or {}).get("name", ""),
            "model": (run.backbone_snapshot or {}).get("model", ""),
            "prompt_version": run.prompt.version,
        },
    }
