"""The Gold budget of a Scale submission's score intervals (issue 33): for a
target width on one figure, how many more physician windows a uniform and an
active draw would need, from the intervals stored with its scores and the
Oracle's uncertainty on the Gold windows (``evaluation.ppi_budget``)."""

from __future__ import annotations

from evaluation.ppi import DEFAULT_FLOOR
from evaluation.ppi_budget import active_factor, gold_budget
from exports.models import Release, ReleaseKind, ReleaseWindow
from exports.scoring_ppi import INTERVAL_METRICS, INTERVAL_TITLES, release_rectifier
from exports.selectors import submission_get

BUDGET_MEANING = (
    "Physician (Gold) windows a 95 % interval of the chosen width would need, "
    "in all and more than now: under a uniform draw of the release's windows, "
    "and under an active draw that favours windows where the Oracle is "
    "uncertain (its stored uncertainty; a uniform floor of "
    f"{DEFAULT_FLOOR * 100:.0f} % of the budget). The variances are those "
    "estimated from the physician labels so far, the release's windows stay as "
    "they are, and the active figure "
    "assumes the Oracle errs in proportion to its uncertainty: a plan, not a "
    "promise."
)


def figure_choices(k: int | None) -> list[tuple[str, str]]:
    """The figures a budget can be planned for, named with ``k`` (if known)."""
    return [
        (m, INTERVAL_TITLES[m].replace("@k", f"@{k}" if k else "@k"))
        for m in INTERVAL_METRICS
    ]


def release_uncertainty(release: Release) -> tuple[list[float], list[float], int]:
    """The Oracle's stored uncertainty on the release's Gold windows (an
    active draw's, ``oracle.models.GoldInclusion``) with their Hajek weights
    (1 / probability), and how many Gold windows the release has."""
    if release.kind != ReleaseKind.SCALE or release.validation_report_id is None:
        return [], [], 0
    from oracle.models import GoldInclusion

    gold = set(release_rectifier(release))
    rows = [
        (u, 1.0 / p)
        for w, u, p in GoldInclusion.objects.filter(
            campaign_id=release.validation_report.campaign_id, window_id__in=gold
        ).values_list("window_id", "uncertainty", "probability")
    ]
    return [u for u, _ in rows], [w for _, w in rows], len(gold)


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


def rectifier_disagreements(*, admin, release: Release) -> list[dict]:
    """The release's Gold windows where the Oracle's label and the physician
    consensus disagree most (the mean of a status mismatch and the three set
    tasks' Jaccard distances, texts as written up to case, as the active draw
    reads two Oracle runs' disagreement), each with the page of its campaign
    where a physician can be added to it (a third rater)."""
    from annotation.selectors import campaign_window_page_number

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
    rows.sort(key=lambda r: (-r["disagreement"], r["window_id"]))
    campaign = release.validation_report.campaign
    for row in rows[:DISAGREEMENTS_SHOWN]:
        row["page"] = campaign_window_page_number(
            admin=admin, campaign=campaign, window_id=row["window_id"]
        )
    return rows[:DISAGREEMENTS_SHOWN]


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
    context = {
        "submission": submission,
        "meaning": BUDGET_MEANING,
        "has_intervals": bool(figures),
        "budget": None,
        "disagreements": rectifier_disagreements(admin=user, release=submission.release)
        if figures
        else [],
        "gold_campaign_id": submission.release.validation_report.campaign_id
        if figures
        else None,
    }
    if not figures or figure not in figures or target_width is None:
        return context
    uncertainty, weights, n_gold = release_uncertainty(submission.release)
    missing = active_missing(len(uncertainty), n_gold)
    active = active_factor(uncertainty, weights) if missing is None else None
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
        "budget": {**budget, "active_missing": missing},
        "figure_title": dict(figure_choices(submission.k))[figure],
    }
