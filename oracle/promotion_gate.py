"""The promotion gate: whether a validation report (``oracle.gold_comparison``)
is good enough to promote its Oracle run to a RealICU-Scale release, by one
threshold per task (paper Table 1 minus a margin, or an admin's own)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.roles import require_admin
from oracle.models import PromotionThresholds

# The paper's Table 1: the Oracle's F1 against Gold consensus per task.
PAPER_TABLE1 = {
    "status_macro_f1": 0.987,
    "acute_problems_f1": 0.987,
    "recommended_actions_f1": 0.895,
    "red_flags_f1": 0.964,
}
# Default thresholds are Table 1 minus this margin. A Gold campaign here holds
# ~10 windows per stay, a few hundred at most: with F1 near 0.95 over ~150
# windows a window-averaged figure has a standard error of about
# sqrt(0.95 * 0.05 / 150) = 0.018, so 0.05 (close to the 95 % half-width of
# 0.035, rounded up) admits an Oracle measuring like the paper's on such a Gold
# set and refuses one that is clearly worse. The defaults of the two hardest
# tasks (0.845 actions, 0.914 red flags) stay about at the physicians' own
# agreement on them (IRR 0.826 and 0.916): an Oracle below that would agree with
# the physicians less than they agree with each other.
DEFAULT_MARGIN = 0.05
DEFAULT_THRESHOLDS = {
    key: round(value - DEFAULT_MARGIN, 3) for key, value in PAPER_TABLE1.items()
}
# Threshold key -> its label and where the figure sits in a report.
GATE_FIGURES = {
    "status_macro_f1": ("Patient status macro-F1", ("status_macro_f1",)),
    "acute_problems_f1": ("Acute problems F1", ("acute_problems", "f1")),
    "recommended_actions_f1": (
        "Recommended actions F1",
        ("recommended_actions", "f1"),
    ),
    "red_flags_f1": ("Red flags F1", ("red_flags", "f1")),
}


def promotion_thresholds_current() -> dict:
    """The thresholds in force: the newest PromotionThresholds an admin set, or
    the defaults. ``values`` by key, and who set them when (None for defaults)."""
    row = PromotionThresholds.objects.select_related("set_by").first()
    if row is None:
        return {
            "values": dict(DEFAULT_THRESHOLDS),
            "source": f"default: paper Table 1 minus {DEFAULT_MARGIN}",
            "set_by": None,
            "set_at": None,
            "id": None,
        }
    return {
        "values": {key: getattr(row, key) for key in GATE_FIGURES},
        "source": "set by an admin",
        "set_by": row.set_by.get_username(),
        "set_at": row.set_at.isoformat(),
        "id": row.pk,
    }


def report_figure(report_body: dict, key: str):
    """The report's figure for a threshold key, or None when it has none."""
    value = report_body or {}
    for part in GATE_FIGURES[key][1]:
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) else None


def promotion_gate(*, report, thresholds: dict | None = None) -> dict:
    """Whether a validation report may promote its run to RealICU-Scale: each
    task's figure against its threshold. A missing figure fails (a report that
    did not measure a task cannot show it is good enough)."""
    thresholds = thresholds or promotion_thresholds_current()
    rows = []
    for key, (label, _path) in GATE_FIGURES.items():
        figure = report_figure(report.report if report is not None else {}, key)
        threshold = thresholds["values"][key]
        rows.append(
            {
                "key": key,
                "label": label,
                "threshold": threshold,
                "figure": figure,
                "passed": figure is not None and figure >= threshold,
            }
        )
    body = report.report if report is not None else {}
    absent = _gold_status_classes_absent(body)
    if body.get("n_windows") == 0:
        # Nothing compared says nothing of which classes Gold holds.
        rows[0]["note"] = "no window was compared: " + (
            f"{body.get('n_missing')} Gold windows have no Oracle label"
            if body.get("n_missing")
            else "Gold has no usable window"
        )
    elif absent:
        # Macro-F1 averages the three classes always (evaluation.metrics): a
        # class no compared window has caps it, however right the Oracle is.
        rows[0]["note"] = (
            f"no compared Gold window is {' or '.join(absent)}, so status macro-F1 "
            f"cannot exceed {(3 - len(absent)) / 3:.3f}"
        )
    failures = [row for row in rows if not row["passed"]]
    return {
        "thresholds": thresholds,
        "rows": rows,
        "failures": failures,
        "passed": not failures,
    }


def _gold_status_classes_absent(report_body: dict) -> list[str]:
    """Status classes with no Gold window in the report's confusion matrix
    (rows are Gold), in STATUS_ORDER; [] when the report has no matrix."""
    confusion = (report_body or {}).get("confusion") or {}
    labels, matrix = confusion.get("labels") or [], confusion.get("matrix") or []
    if not labels or len(labels) != len(matrix):
        return []
    return [label for label, row in zip(labels, matrix) if not sum(row)]


def gate_failure_text(row: dict) -> str:
    """One failed threshold in words, e.g. "Red flags F1 0.612 is below the
    threshold 0.914"."""
    if row["figure"] is None:
        text = (
            f"{row['label']} is missing from the report "
            f"(threshold {row['threshold']:.3f})"
        )
    else:
        text = (
            f"{row['label']} {row['figure']:.3f} is below the threshold "
            f"{row['threshold']:.3f}"
        )
    return f"{text} ({row['note']})" if row.get("note") else text


@transaction.atomic
def promotion_thresholds_set(
    *, user, values: dict, note: str = ""
) -> PromotionThresholds:
    """New promotion thresholds (admins only): one F1 in [0, 1] per task of
    GATE_FIGURES. The earlier ones stay as history."""
    require_admin(user, "set the promotion thresholds")
    problems, clean = [], {}
    for key, (label, _path) in GATE_FIGURES.items():
        value = values.get(key)
        try:
            value = float(value)
        except (TypeError, ValueError):
            problems.append(f"{label}: give a number between 0 and 1.")
            continue
        if not 0.0 <= value <= 1.0:
            problems.append(f"{label}: {value} is not between 0 and 1.")
            continue
        clean[key] = value
    if problems:
        raise ValidationError(problems)
    return PromotionThresholds.objects.create(set_by=user, note=note.strip(), **clean)
