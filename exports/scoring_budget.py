"""The Gold budget of a Scale submission's score intervals (issue 33): for a
target width on one figure, how many more physician windows a uniform and an
active draw would need, from the intervals stored with its scores and the
Oracle's uncertainty on the Gold windows (``evaluation.ppi_budget``)."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.ppi_budget import active_factor, gold_budget, level_factor
from exports.metric_names import METRIC_KEYS, METRIC_TITLES
from exports.models import Release, ReleaseKind, ReleaseWindow
from exports.scoring_ppi import release_rectifier
from exports.selectors import submission_get

BUDGET_MEANING = (
    "Physician (Gold) windows a 95 % interval of the chosen width would need, "
    "in all and more than now: under a uniform draw of the release's windows, "
    "and under an active draw that favours windows where the Oracle is "
    "uncertain (its stored uncertainty levels, with the uniform floor the draw "
    "stored). The variances are those estimated from the physician labels so "
    "far, the release's windows stay as they are, and the active figure "
    "assumes each uncertainty level goes on erring as it did on the physician "
    "windows (draws without levels: in proportion to the uncertainty): a plan, "
    "not a promise."
)


def figure_choices(k: int | None) -> list[tuple[str, str]]:
    """The figures a budget can be planned for, named with ``k`` (if known)."""
    return [
        (m, METRIC_TITLES[m].replace("@k", f"@{k}" if k else "@k")) for m in METRIC_KEYS
    ]


@dataclass(frozen=True)
class StoredDraw:
    """What an active draw stored on a release's Gold windows: each one's
    uncertainty, level (None before levels), Hajek weight 1 / probability and
    the draw's floor, by window id; and how many Gold windows there are."""

    uncertainty: dict[int, float]
    levels: dict[int, int | None]
    weights: dict[int, float]
    floor: float | None
    n_gold: int


def release_uncertainty(release: Release) -> StoredDraw:
    """The active draw's rows (``oracle.models.GoldInclusion``) on the
    release's Gold windows."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return StoredDraw({}, {}, {}, None, 0)
    from oracle.models import GoldInclusion

    gold = set(release_rectifier(release))
    rows = list(
        GoldInclusion.objects.filter(
            campaign_id=release.validation_report.campaign_id, window_id__in=gold
        ).values_list("window_id", "uncertainty", "level", "probability", "floor")
    )
    floors = {f for *_, f in rows}
    return StoredDraw(
        uncertainty={w: u for w, u, *_ in rows},
        levels={w: lv for w, _, lv, *_ in rows},
        weights={w: 1.0 / p for w, _, _, p, _ in rows},
        # One draw has one floor; rows of several, their least.
        floor=min(floors) if floors else None,
        n_gold=len(gold),
    )


def draw_factor(draw: StoredDraw, distances: dict[int, float]) -> float:
    """The share of a uniform draw's Gold windows the stored draw's rule
    needs: from each level's error on the Gold windows when every row has a
    level, else from the raw uncertainty."""
    ids = sorted(draw.weights)
    weights = [draw.weights[w] for w in ids]
    if all(draw.levels[w] is not None for w in ids):
        return level_factor(
            [draw.levels[w] for w in ids],
            [distances.get(w, 0.0) for w in ids],
            weights,
            floor=draw.floor,
        )
    return active_factor([draw.uncertainty[w] for w in ids], weights, floor=draw.floor)


def active_missing(n_stored: int, n_gold: int) -> str | None:
    """Why the active figure cannot be computed, said plainly (None: it can):
    it reads the Oracle's uncertainty on every Gold window, which only an
    active draw stores."""
    if n_stored == 0:
        return (
            "Not computed: no stored Oracle uncertainty, because the Gold "
            "windows were not drawn actively (manage.py gold_draw_active stores "
            "each drawn window's uncertainty and probability)."
        )
    if n_stored < n_gold:
        return (
            f"Not computed: the Oracle's uncertainty is stored for {n_stored} of "
            f"the {n_gold} physician windows only; the active figure needs it on "
            "every one (windows added outside the active draw have none)."
        )
    return None


# How many of the windows where the physicians and the Oracle disagree most the
# page lists, each a candidate for a third rater.
DISAGREEMENTS_SHOWN = 10


def _set_distance(a: list[str], b: list[str]) -> float:
    a, b = {t.strip().casefold() for t in a}, {t.strip().casefold() for t in b}
    return 1 - len(a & b) / len(a | b) if a | b else 0.0


def rectifier_distances(release: Release) -> list[dict]:
    """Every Gold window of the release with how far the Oracle's label is
    from the physician consensus: the mean of a status mismatch and the three
    set tasks' Jaccard distances, texts as written up to case, as the active
    draw reads two Oracle runs' disagreement."""
    rectifier = release_rectifier(release)
    if not rectifier:
        return []
    records = ReleaseWindow.objects.filter(
        release=release, window_id__in=rectifier
    ).values_list("window_id", "record")
    rows = []
    for window_id, record in records:
        labels, truth = record["labels"], rectifier[window_id]
        parts = [
            float(labels["status"]["value"] != truth.status),
            _set_distance(
                [i["text"] for i in labels["acute_problems"]], truth.problems
            ),
            _set_distance(
                [i["text"] for i in labels["recommended_actions"]], truth.actions
            ),
            _set_distance([i["text"] for i in labels["red_flags"]], truth.red_flags),
        ]
        rows.append(
            {
                "window_id": window_id,
                "stay_id": truth.stay_id,
                "disagreement": sum(parts) / len(parts),
                "oracle_status": labels["status"]["value"],
                "consensus_status": truth.status,
            }
        )
    return rows


def rectifier_disagreements(*, admin, release: Release, rows: list[dict]) -> list[dict]:
    """Of ``rows`` (``rectifier_distances``), the Gold windows where the
    Oracle's label and the physician consensus disagree most, each with the
    page of its campaign where a physician can be added to it (a third
    rater)."""
    from annotation.selectors import campaign_window_page_number

    rows = sorted(rows, key=lambda r: (-r["disagreement"], r["window_id"]))
    campaign = release.validation_report.campaign if rows else None
    shown = [dict(row) for row in rows[:DISAGREEMENTS_SHOWN]]
    for row in shown:
        row["page"] = campaign_window_page_number(
            admin=admin, campaign=campaign, window_id=row["window_id"]
        )
    return shown


def submission_budget_page(
    *, user, submission_id: int, figure: str | None, target_width: float | None
) -> dict | None:
    """What the budget page shows (None: not the user's to see): the
    submission's figures with their intervals now and, for ``figure`` and
    ``target_width`` when given, the Gold windows needed."""
    submission = submission_get(user=user, submission_id=submission_id)
    if submission is None:
        return None
    intervals = (submission.scores or {}).get("intervals") or {}
    figures = intervals.get("figures", {})
    distances = rectifier_distances(submission.release) if figures else []
    context = {
        "submission": submission,
        "meaning": BUDGET_MEANING,
        "has_intervals": bool(figures),
        "budget": None,
        "disagreements": rectifier_disagreements(
            admin=user, release=submission.release, rows=distances
        ),
        "gold_campaign_id": submission.release.validation_report.campaign_id
        if figures
        else None,
    }
    if not figures or figure not in figures or target_width is None:
        return context
    draw = release_uncertainty(submission.release)
    missing = active_missing(len(draw.weights), draw.n_gold)
    active = (
        draw_factor(draw, {r["window_id"]: r["disagreement"] for r in distances})
        if missing is None
        else None
    )
    # The Gold windows count at the worth of the draw the interval assumed.
    drawn = intervals.get("inclusion") == "stored draw probabilities"
    budget = gold_budget(
        figures[figure],
        target_width=target_width,
        active=active,
        current=active if drawn and active else 1.0,
    )
    return {
        **context,
        "budget": {**budget, "active_missing": missing, "floor": draw.floor},
        "figure_title": dict(figure_choices(submission.k))[figure],
    }
