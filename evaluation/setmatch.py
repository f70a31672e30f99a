"""Semantic set matching (REALICU_SPEC section 5): which items of two lists
match under a matcher, a maximum one-to-one matching between them, and the set
precision, recall and F1 behind the set tasks' pairwise agreement (section 4)
and the benchmark's set metrics (section 6). Pure functions: the matcher is
passed in, so the same code serves any embedding model or a toy one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

MatchFn = Callable[[str, str], bool]


class BatchMatcher(Protocol):
    """A matcher that can also score two lists at once.

    ``match_matrix`` uses ``matcher.matrix(a, b)`` (a boolean array of shape
    ``(len(a), len(b))``) when the matcher has it, so an embedding matcher can
    compare a whole window in one matrix product instead of one call per pair.
    """

    def __call__(self, a: str, b: str) -> bool: ...

    def matrix(self, a: Sequence[str], b: Sequence[str]) -> npt.ArrayLike: ...


def match_matrix(
    a: Sequence[str], b: Sequence[str], match: MatchFn | BatchMatcher
) -> np.ndarray:
    """Boolean len(a) x len(b) matrix of match(a_i, b_j).

    Uses ``match.matrix(a, b)`` when the matcher offers it (see ``BatchMatcher``).
    """
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=bool)
    batch = getattr(match, "matrix", None)
    if callable(batch):
        result = np.asarray(batch(list(a), list(b)), dtype=bool)
        if result.shape != (len(a), len(b)):
            raise ValueError(
                f"matcher.matrix returned shape {result.shape}, "
                f"expected {(len(a), len(b))}"
            )
        return result
    return np.array([[bool(match(x, y)) for y in b] for x in a], dtype=bool)


def _max_matching(edges: np.ndarray, priority: np.ndarray) -> list[tuple[int, int]]:
    """Maximum-cardinality one-to-one matching on a boolean bipartite graph.

    Starts from a greedy matching in descending ``priority`` (ties by row, then
    column), then grows it with augmenting paths (Kuhn's algorithm) until no path
    is left, which makes it maximum (Berge's theorem). Augmenting never unmatches
    a matched item, so the greedy preference survives wherever it can.
    """
    n_a, n_b = edges.shape
    match_of_a = [-1] * n_a
    match_of_b = [-1] * n_b
    rows, cols = np.nonzero(edges)
    order = np.lexsort((cols, rows, -priority[rows, cols]))
    for k in order:
        i, j = int(rows[k]), int(cols[k])
        if match_of_a[i] < 0 and match_of_b[j] < 0:
            match_of_a[i] = j
            match_of_b[j] = i

    neighbours = [
        sorted(np.flatnonzero(edges[i]).tolist(), key=lambda j, i=i: -priority[i, j])
        for i in range(n_a)
    ]

    def augment(i: int, seen: set[int]) -> bool:
        for j in neighbours[i]:
            if j in seen:
                continue
            seen.add(j)
            if match_of_b[j] < 0 or augment(match_of_b[j], seen):
                match_of_a[i] = j
                match_of_b[j] = i
                return True
        return False

    for i in range(n_a):
        if match_of_a[i] < 0 and neighbours[i]:
            augment(i, set())
    return sorted((i, j) for i, j in enumerate(match_of_a) if j >= 0)


def match_sets(
    a: Sequence[str],
    b: Sequence[str],
    match: MatchFn | BatchMatcher | None = None,
    *,
    similarity: npt.ArrayLike | None = None,
    tau: float | None = None,
) -> list[tuple[int, int]]:
    """Index pairs (i, j) of a maximum one-to-one matching between a and b.

    Either ``match`` (a function ``match(x, y) -> bool``) or a precomputed
    ``similarity`` matrix (len(a) x len(b)) with its threshold ``tau`` (a boolean
    matrix needs none): items match when similarity >= tau, as in spec section 5.
    The number of pairs is always the maximum possible. Which pairs: with a
    similarity matrix, the most similar pairs are taken first (greedy by
    descending similarity); with a match function, by list order. Augmenting
    paths then add whatever the greedy pass missed. Indices, not strings, so
    duplicate texts stay distinguishable.
    """
    if similarity is not None:
        sim = np.asarray(similarity)
        if sim.shape != (len(a), len(b)):
            raise ValueError(
                f"similarity has shape {sim.shape}, expected {(len(a), len(b))}"
            )
        if sim.dtype == bool:
            edges = sim
            priority = np.zeros(sim.shape)
        else:
            if tau is None:
                raise ValueError("a similarity matrix needs its threshold tau")
            edges = sim >= tau
            priority = sim.astype(float)
    elif match is not None:
        edges = match_matrix(a, b, match)
        priority = np.zeros(edges.shape)
    else:
        raise ValueError("give either a match function or a similarity matrix")
    return _max_matching(edges, priority)


class SetF1(NamedTuple):
    precision: float
    recall: float
    f1: float


def _set_f1(n_pred: int, n_gold: int, matched_pred: int, matched_gold: int) -> SetF1:
    if n_pred == 0 and n_gold == 0:
        return SetF1(1.0, 1.0, 1.0)
    if n_pred == 0 or n_gold == 0:
        return SetF1(0.0, 0.0, 0.0)
    precision = matched_pred / n_pred
    recall = matched_gold / n_gold
    f1 = (
        0.0
        if precision + recall == 0
        else 2 * precision * recall / (precision + recall)
    )
    return SetF1(precision, recall, f1)


def semantic_f1_from_matrix(edges: np.ndarray, *, one_to_one: bool = False) -> SetF1:
    """Set F1 from a boolean predicted x gold match matrix (see
    ``pairwise_semantic_f1``)."""
    n_pred, n_gold = edges.shape
    if one_to_one:
        k = len(_max_matching(edges, np.zeros(edges.shape)))
        return _set_f1(n_pred, n_gold, k, k)
    return _set_f1(
        n_pred, n_gold, int(edges.any(axis=1).sum()), int(edges.any(axis=0).sum())
    )


def pairwise_semantic_f1(
    a: Sequence[str],
    b: Sequence[str],
    match: MatchFn | BatchMatcher,
    *,
    one_to_one: bool = False,
) -> SetF1:
    """Semantic precision, recall and F1 of set ``a`` (predicted) against ``b`` (gold).

    precision = matched items of a / |a|, recall = matched items of b / |b|
    (spec sections 4 and 6), F1 their harmonic mean. By default, as the spec
    defines it, an item counts as matched if it matches any item of the other
    set (many-to-many: "AKI" against {"AKI", "AKI stage 3"} has recall 1). With
    ``one_to_one=True`` the matched items are those of a maximum one-to-one
    matching (``match_sets``), so one vague item cannot stand for several
    specific ones: a stricter figure, to be labelled so wherever it is shown.
    Both sets empty: P = R = F1 = 1 (the raters agree there is nothing);
    exactly one empty: P = R = F1 = 0. Swapping a and b swaps P and R
    and leaves F1 unchanged, so it serves rater pairs as well as model vs gold.
    """
    return semantic_f1_from_matrix(match_matrix(a, b, match), one_to_one=one_to_one)
