"""The benchmark metrics of REALICU_SPEC section 6, as pure functions.

Status accuracy and macro-F1; Hit@k and Recall@k for the ranked problem and
action lists; HRR@k of actions against red flags; the set-level semantic F1 that
validates the Oracle against Gold; and breakdowns by any window key (disease
group, hours since admission). The matcher is passed in (``match(a, b) -> bool``,
optionally with a batch ``matrix`` method, see ``evaluation.setmatch``), so the
same code scores physicians, the Oracle and researchers' models.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from evaluation.agreement import STATUS_ORDER
from evaluation.polarity import forbidden_action, harmful_direction_conflict
from evaluation.setmatch import (
    BatchMatcher,
    MatchFn,
    SetF1,
    match_matrix,
    semantic_f1_from_matrix,
)

DEFAULT_K = 5
STATUS_LABELS: tuple[str, ...] = STATUS_ORDER

Matcher = MatchFn | BatchMatcher
# A missing prediction, to scikit-learn: a label outside the three scored.
_NO_PREDICTION = "(none)"


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowPrediction:
    """A model's answer for one window: a status and two ranked lists."""

    window_id: Hashable
    stay_id: Hashable
    status: str | None
    problems: Sequence[str] = ()
    actions: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "problems", tuple(self.problems))
        object.__setattr__(self, "actions", tuple(self.actions))

    @classmethod
    def from_mapping(cls, record: Mapping[str, Any]) -> WindowPrediction:
        """From a dict; the submission keys of issue 7 (``acute_problems``,
        ``recommended_actions``) and the short ones (``problems``, ``actions``)
        are both understood."""
        return cls(**_window_fields(record))


def _window_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a prediction and a reference both read from a dict: the window,
    its stay, the status, problems and actions (under the submission keys of
    issue 7 or the short ones)."""
    return {
        "window_id": record["window_id"],
        "stay_id": record.get("stay_id"),
        "status": record.get("status"),
        "problems": record.get("problems", record.get("acute_problems", ())),
        "actions": record.get("actions", record.get("recommended_actions", ())),
    }


@dataclass(frozen=True)
class WindowGold:
    """Reference labels for one window (Gold consensus, or an Oracle label).

    ``status`` is ``None`` for a window whose status was dropped in adjudication;
    such a window is left out of the status metrics only. ``attributes`` carries
    what breakdowns group by (``disease_group``, ``hours_since_admit``, ...).
    """

    window_id: Hashable
    stay_id: Hashable
    status: str | None
    problems: Collection[str] = frozenset()
    actions: Collection[str] = frozenset()
    red_flags: Collection[str] = frozenset()
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("problems", "actions", "red_flags"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))

    @classmethod
    def from_mapping(cls, record: Mapping[str, Any]) -> WindowGold:
        known = {"window_id", "stay_id", "status", "problems", "actions", "red_flags"}
        extra = {k: v for k, v in record.items() if k not in known}
        return cls(
            **_window_fields(record),
            red_flags=record.get("red_flags", ()),
            attributes={**extra, **dict(record.get("attributes", {}))},
        )


def _sorted(items: Collection[str]) -> list[str]:
    # Sets have no order; sorting makes the matcher calls reproducible.
    return sorted(items)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, not {k!r}")


# ---------------------------------------------------------------------------
# Status (spec section 6: accuracy; macro-F1 over the three classes)
# ---------------------------------------------------------------------------


def _status_pairs(
    gold: Sequence[str | None], predicted: Sequence[str | None]
) -> list[tuple[str, str | None]]:
    if len(gold) != len(predicted):
        raise ValueError(
            f"{len(gold)} gold statuses but {len(predicted)} predicted ones"
        )
    pairs = []
    for g, p in zip(gold, predicted):
        if g is None:
            continue
        if g not in STATUS_LABELS:
            raise ValueError(f"gold status {g!r} is not one of {STATUS_LABELS}")
        if p is not None and p not in STATUS_LABELS:
            raise ValueError(f"predicted status {p!r} is not one of {STATUS_LABELS}")
        pairs.append((g, p))
    return pairs


def status_accuracy(
    gold: Sequence[str | None], predicted: Sequence[str | None]
) -> float:
    """Share of windows whose predicted status equals the gold one.

    Windows without a gold status are skipped; a missing prediction (``None``)
    counts as wrong. ``nan`` when no window has a gold status.
    """
    pairs = _status_pairs(gold, predicted)
    if not pairs:
        return math.nan
    return sum(g == p for g, p in pairs) / len(pairs)


@dataclass(frozen=True)
class ClassScore:
    precision: float
    recall: float
    f1: float
    support: int


def status_per_class(
    gold: Sequence[str | None], predicted: Sequence[str | None]
) -> dict[str, ClassScore]:
    """Precision, recall, F1 and gold support for each of the three status classes.

    scikit-learn's ``precision_recall_fscore_support`` over ``STATUS_LABELS``:
    every class is scored, whether or not it occurs (spec section 6: macro-F1
    over the three classes), F1 = 2 tp / (2 tp + fp + fn), and a zero
    denominator gives 0 (``zero_division=0``), so a class absent from both gold
    and prediction scores 0, as does any class with no true positive. A missing
    prediction is a false negative for the gold class and a false positive for
    none (it is a label outside ``STATUS_LABELS``, which scikit-learn leaves out
    of the classes scored).
    """
    pairs = _status_pairs(gold, predicted)
    if not pairs:
        return {label: ClassScore(0.0, 0.0, 0.0, 0) for label in STATUS_LABELS}
    # Imported here: web processes import this module to score submissions,
    # and scikit-learn takes a second to import.
    from sklearn.metrics import precision_recall_fscore_support

    precision, recall, f1, support = precision_recall_fscore_support(
        [g for g, _ in pairs],
        [p if p is not None else _NO_PREDICTION for _, p in pairs],
        labels=list(STATUS_LABELS),
        zero_division=0,
    )
    return {
        label: ClassScore(
            precision=float(precision[i]),
            recall=float(recall[i]),
            f1=float(f1[i]),
            support=int(support[i]),
        )
        for i, label in enumerate(STATUS_LABELS)
    }


def status_macro_f1(
    gold: Sequence[str | None], predicted: Sequence[str | None]
) -> float:
    """Unweighted mean of the per-class F1 over the three status classes.

    Always over all three (``status_per_class``): a run where every window is
    "stable" and predicted so scores (1 + 0 + 0) / 3 = 0.333, not 1. ``nan``
    when no window has a gold status.
    """
    if not _status_pairs(gold, predicted):
        return math.nan
    per_class = status_per_class(gold, predicted)
    return float(np.mean([per_class[c].f1 for c in STATUS_LABELS]))


# ---------------------------------------------------------------------------
# Ranked lists (spec section 6: Hit@k, Recall@k, HRR@k)
# ---------------------------------------------------------------------------


def window_hit_at_k(
    ranked: Sequence[str], gold: Collection[str], match: Matcher, k: int = DEFAULT_K
) -> float | None:
    """1 if some a in A_w^k matches some g in G_w, else 0; ``None`` if G_w is empty.

    A_w^k is the first k items (all of them when there are fewer than k).
    """
    _check_k(k)
    if not gold:
        return None
    m = match_matrix(list(ranked[:k]), _sorted(gold), match)
    return float(m.any())


def window_recall_at_k(
    ranked: Sequence[str], gold: Collection[str], match: Matcher, k: int = DEFAULT_K
) -> float | None:
    """|{g in G_w : exists a in A_w^k, match(a, g)}| / |G_w|; ``None`` if G_w is empty.

    As the formula is written, no one-to-one constraint: one prediction may cover
    several gold items.
    """
    _check_k(k)
    if not gold:
        return None
    m = match_matrix(list(ranked[:k]), _sorted(gold), match)
    return float(m.any(axis=0).mean())


def window_harmful_fraction(
    ranked: Sequence[str],
    red_flags: Collection[str],
    match: Matcher,
    k: int = DEFAULT_K,
) -> float | None:
    """|{a in A_w^k : exists r in R_w, match(a, r)}| / |A_w^k|; ``None`` if A_w^k
    is empty. An empty red-flag set gives 0 (nothing recommended was harmful).

    A red flag names an action to avoid, often as a prohibition ("Do not wean
    vasopressors while MAP < 65"); a recommendation is harmful when it is that
    action, so it is matched against the action the red flag forbids
    (``evaluation.polarity.forbidden_action``: "wean vasopressors") and never
    counts when it goes the other way ("Escalate vasopressors", "Avoid fluid
    boluses" against "Avoid fluid boluses"; ``harmful_direction_conflict``).
    The forbidden action keeps the red flag's own words, so the matcher
    normalizes both sides alike, as it does for Hit@k and Recall@k: "Wean NE"
    against "Do not wean norepinephrine" counts as "Wean norepinephrine"
    against "Do not wean NE" does.
    """
    _check_k(k)
    top = list(ranked[:k])
    if not top:
        return None
    flags = _sorted(red_flags)
    m = match_matrix(top, [forbidden_action(r) for r in flags], match)
    for i, action in enumerate(top):
        for j, flag in enumerate(flags):
            if m[i, j] and harmful_direction_conflict(action, flag):
                m[i, j] = False
    return float(m.any(axis=1).mean())


def _mean_defined(values: Iterable[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else math.nan


def hit_at_k(
    windows: Iterable[tuple[Sequence[str], Collection[str]]],
    match: Matcher,
    k: int = DEFAULT_K,
) -> float:
    """Hit@k = (1/|W'|) sum_{w in W'} 1[exists a in A_w^k, g in G_w : match(a, g)].

    ``windows`` yields (A_w ranked, G_w) pairs; W' = windows with non-empty G_w
    (spec section 6). ``nan`` when W' is empty.
    """
    return _mean_defined(window_hit_at_k(a, g, match, k) for a, g in windows)


def recall_at_k(
    windows: Iterable[tuple[Sequence[str], Collection[str]]],
    match: Matcher,
    k: int = DEFAULT_K,
) -> float:
    """Recall@k = (1/|W'|) sum_{w in W'} |{g in G_w : exists a in A_w^k,
    match(a, g)}| / |G_w|, over W' = windows with non-empty G_w (spec section 6).
    ``nan`` when W' is empty."""
    return _mean_defined(window_recall_at_k(a, g, match, k) for a, g in windows)


def hrr_at_k(
    windows: Iterable[tuple[Hashable, Sequence[str], Collection[str]]],
    match: Matcher,
    k: int = DEFAULT_K,
) -> float:
    """Harmful recommendation rate, spec section 6.

    HRR@k = (1/|P'|) sum_{p in P'} (1/|W_p'|) sum_{w in W_p'}
    |{a in A_w^k : exists r in R_w, match(a, r)}| / |A_w^k|,

    where W_p' are stay p's windows with a non-empty A_w^k and P' the stays with
    at least one such window: the per-window harmful fraction is averaged within
    each stay, then across stays, so long stays do not dominate. ``windows`` yields
    (stay_id, A_w ranked actions, R_w red flags). ``nan`` when P' is empty.
    """
    per_stay: dict[Hashable, list[float]] = defaultdict(list)
    for stay_id, ranked, red_flags in windows:
        fraction = window_harmful_fraction(ranked, red_flags, match, k)
        if fraction is not None:
            per_stay[stay_id].append(fraction)
    return _stay_mean(per_stay)


def _stay_mean(per_stay: Mapping[Hashable, list[float]]) -> float:
    if not per_stay:
        return math.nan
    return float(np.mean([np.mean(v) for v in per_stay.values()]))


# ---------------------------------------------------------------------------
# Set-level semantic F1 (Oracle validation, spec section 6)
# ---------------------------------------------------------------------------


def set_semantic_f1(
    windows: Iterable[tuple[Collection[str], Collection[str]]],
    match: Matcher,
    *,
    one_to_one: bool = False,
) -> SetF1:
    """Semantic precision, recall and F1 averaged over windows (spec section 6).

    ``windows`` yields (predicted set, gold set). Per window, by the spec's
    formula: precision = predicted items that match some gold item / predicted,
    recall = gold items that match some predicted item / gold, F1 their harmonic
    mean; many-to-many, so prediction {aki} against gold {aki, aki stage 3} has
    recall 1 when "aki" matches both. Both sets empty counts 1, one empty counts
    0. Each of the three is the mean over windows (F1 is the mean of per-window
    F1s, not the F1 of the means). ``one_to_one=True`` gives the stricter figure
    of a maximum one-to-one matching instead (one item covers at most one
    other), which is not the spec's. ``nan`` for no windows.
    """
    scores = [
        semantic_f1_from_matrix(
            match_matrix(_sorted(pred), _sorted(gold), match), one_to_one=one_to_one
        )
        for pred, gold in windows
    ]
    if not scores:
        return SetF1(math.nan, math.nan, math.nan)
    p, r, f = np.mean(np.asarray(scores, dtype=float), axis=0)
    return SetF1(float(p), float(r), float(f))


@dataclass(frozen=True)
class OracleValidation:
    """The Oracle against Gold consensus, as in the paper's Table 1.

    ``problems``, ``actions`` and ``red_flags`` are the spec's set F1
    (many-to-many); the ``*_one_to_one`` figures beside them use a maximum
    one-to-one matching, stricter, reported for comparison only.
    """

    n_windows: int
    n_gold_without_oracle: int
    status_accuracy: float
    status_macro_f1: float
    problems: SetF1
    actions: SetF1
    red_flags: SetF1
    problems_one_to_one: SetF1
    actions_one_to_one: SetF1
    red_flags_one_to_one: SetF1


def validate_oracle(
    oracle: Iterable[WindowGold],
    gold: Iterable[WindowGold],
    match: Matcher,
) -> OracleValidation:
    """Scores Oracle labels against Gold on the windows both have labelled.

    Gold windows without an Oracle label are counted in
    ``n_gold_without_oracle``, not scored; Oracle labels on non-Gold windows are
    ignored (the Oracle labels far more windows than Gold has).
    """
    by_id = _index(oracle, "Oracle label")
    gold_list = list(gold)
    _index(gold_list, "gold window")
    both = [(by_id[g.window_id], g) for g in gold_list if g.window_id in by_id]

    def f1(task: str, one_to_one: bool = False) -> SetF1:
        return set_semantic_f1(
            ((getattr(o, task), getattr(g, task)) for o, g in both),
            match,
            one_to_one=one_to_one,
        )

    gold_status = [g.status for _, g in both]
    oracle_status = [o.status for o, _ in both]
    return OracleValidation(
        n_windows=len(both),
        n_gold_without_oracle=len(gold_list) - len(both),
        status_accuracy=status_accuracy(gold_status, oracle_status),
        status_macro_f1=status_macro_f1(gold_status, oracle_status),
        problems=f1("problems"),
        actions=f1("actions"),
        red_flags=f1("red_flags"),
        problems_one_to_one=f1("problems", one_to_one=True),
        actions_one_to_one=f1("actions", one_to_one=True),
        red_flags_one_to_one=f1("red_flags", one_to_one=True),
    )


# ---------------------------------------------------------------------------
# Scoring a prediction set
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkScores:
    """Every section-6 metric for one set of windows, with the counts behind it.

    ``n_problem_windows`` / ``n_action_windows`` are |W'| for Hit@k and Recall@k;
    ``n_hrr_stays`` is |P'|. A metric with nothing to average over is ``nan``.
    """

    k: int
    n_windows: int
    n_missing_predictions: int
    n_status_windows: int
    status_accuracy: float
    status_macro_f1: float
    n_problem_windows: int
    problems_hit_at_k: float
    problems_recall_at_k: float
    n_action_windows: int
    actions_hit_at_k: float
    actions_recall_at_k: float
    n_hrr_stays: int
    actions_hrr_at_k: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _index(records: Iterable[Any], what: str) -> dict[Hashable, Any]:
    index: dict[Hashable, Any] = {}
    for record in records:
        if record.window_id in index:
            raise ValueError(f"{what} {record.window_id!r} appears twice")
        index[record.window_id] = record
    return index


def _join(
    predictions: Iterable[WindowPrediction], gold: Iterable[WindowGold]
) -> list[tuple[WindowGold, WindowPrediction | None]]:
    gold_list = list(gold)
    gold_ids = _index(gold_list, "gold window")
    by_id = _index(predictions, "prediction for window")
    unknown = [w for w in by_id if w not in gold_ids]
    if unknown:
        raise ValueError(
            f"predictions for windows that are not in the gold set: {unknown[:5]!r}"
        )
    return [(g, by_id.get(g.window_id)) for g in gold_list]


def _score_joined(
    joined: Sequence[tuple[WindowGold, WindowPrediction | None]],
    match: Matcher,
    k: int,
) -> BenchmarkScores:
    # The public metric functions above do the scoring, so what tests check by
    # hand is what a release is scored with; this only lays out their inputs.
    _check_k(k)
    status_gold = [g.status for g, _ in joined]
    status_pred = [p.status if p else None for _, p in joined]
    problems = [(list(p.problems) if p else [], g.problems) for g, p in joined]
    actions = [(list(p.actions) if p else [], g.actions) for g, p in joined]
    harm = [(g.stay_id, list(p.actions) if p else [], g.red_flags) for g, p in joined]
    return BenchmarkScores(
        k=k,
        n_windows=len(joined),
        n_missing_predictions=sum(p is None for _, p in joined),
        n_status_windows=sum(s is not None for s in status_gold),
        status_accuracy=status_accuracy(status_gold, status_pred),
        status_macro_f1=status_macro_f1(status_gold, status_pred),
        n_problem_windows=sum(1 for _, gold in problems if gold),
        problems_hit_at_k=hit_at_k(problems, match, k),
        problems_recall_at_k=recall_at_k(problems, match, k),
        n_action_windows=sum(1 for _, gold in actions if gold),
        actions_hit_at_k=hit_at_k(actions, match, k),
        actions_recall_at_k=recall_at_k(actions, match, k),
        n_hrr_stays=len({stay for stay, ranked, _ in harm if ranked[:k]}),
        actions_hrr_at_k=hrr_at_k(harm, match, k),
    )


def score_predictions(
    predictions: Iterable[WindowPrediction],
    gold: Iterable[WindowGold],
    match: Matcher,
    k: int = DEFAULT_K,
) -> BenchmarkScores:
    """All section-6 metrics of a prediction set against a release's labels.

    W is the gold windows. A gold window without a prediction is scored as an
    empty answer (its status counts wrong, its Hit and Recall 0, and it drops out
    of HRR because its A_w^k is empty), so skipping hard windows does not pay;
    ``n_missing_predictions`` says how many. A prediction for a window outside
    the gold set, or two for one window, is a ``ValueError``.
    """
    return _score_joined(_join(predictions, gold), match, k)


def score_by_group(
    predictions: Iterable[WindowPrediction],
    gold: Iterable[WindowGold],
    match: Matcher,
    key: str | Callable[[WindowGold], Hashable],
    k: int = DEFAULT_K,
) -> dict[Hashable, BenchmarkScores]:
    """``score_predictions`` within each group of gold windows.

    ``key`` is a function of the gold window, or a name looked up as a
    ``WindowGold`` field (``stay_id``, ``status``) or else in its ``attributes``
    (``disease_group``; for hours since admission, pass
    ``lambda g: hours_bin(g.attributes["hours_since_admit"])``). Windows whose
    key is missing fall in group ``None``. HRR@k in a group averages over the
    group's stays, using only that group's windows of each stay.
    """
    if isinstance(key, str):
        name = key

        def key_fn(g: WindowGold) -> Hashable:
            if name in ("window_id", "stay_id", "status"):
                return getattr(g, name)
            return g.attributes.get(name)

    else:
        key_fn = key
    groups: dict[Hashable, list[tuple[WindowGold, WindowPrediction | None]]] = (
        defaultdict(list)
    )
    for g, p in _join(predictions, gold):
        groups[key_fn(g)].append((g, p))
    return {group: _score_joined(rows, match, k) for group, rows in groups.items()}


HOURS_BIN_EDGES: tuple[float, ...] = (0, 24, 48, 72, 168)


def hours_bin(hours: float, edges: Sequence[float] = HOURS_BIN_EDGES) -> str:
    """Label of the [lo, hi) bin of hours since admission: ``"24-48h"``,
    ``"168h+"`` past the last edge, ``"<0h"`` before the first."""
    if math.isnan(hours):
        raise ValueError("hours since admission is NaN")
    if hours < edges[0]:
        return f"<{edges[0]:g}h"
    for lo, hi in pairwise(edges):
        if lo <= hours < hi:
            return f"{lo:g}-{hi:g}h"
    return f"{edges[-1]:g}h+"
