"""The reference calibration of each matching model: a set of item pairs written
from clinical knowledge and shipped with the code (``data/reference_pairs.csv``:
problems, actions and red flags; paraphrases, near misses, opposites, unrelated
pairs; each judged the same item or not), swept over tau with the calibration
code of spec section 5 (``evaluation.calibration.tau_sweep``).

It gives a model an honest tau before any physician has judged pairs: the
physicians' own calibration (annotation.calibration) replaces it once adopted.
The matcher's decision is the guarded one (``SemanticMatcher.similarity``:
cosine, with opposite directions vetoed), the one every metric uses.

The tau adopted is not simply the one of highest F1. The judged pairs are
mostly hard ones (paraphrases, near misses, opposites), while the pairs a
window's scoring compares are mostly unrelated items: five predictions against
three gold items are fifteen pairs, and at a 20 % false-match rate per pair a
random list would hit almost every window. So each tau is also measured on
the unrelated pairs the set implies (items of one kind never judged the same,
directly or through other pairs), and the adopted tau is the one of highest F1
among those matching at most ``MAX_UNRELATED_RATE`` of them in every kind.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluation.calibration import SweepRow, best_row, sweep_taus, tau_sweep

REFERENCE_PAIRS_PATH = Path(__file__).parent / "data" / "reference_pairs.csv"
REFERENCE_SET_NAME = "RealICU reference pairs v1"
KINDS = ("problem", "action", "red_flag")
# The share of unrelated pairs a usable tau may match, in each kind. Five
# predictions against three gold items are fifteen pairs: at 2.5 % per pair a
# list of unrelated items still hits about a third of windows by chance
# (1 - 0.975 ** 15), at 5 % more than half. Some of those pairs are in truth the
# same concept (the set does not judge "AKI" against "worsening AKI"), so the
# measured rate overstates the real one and never reaches 0.
MAX_UNRELATED_RATE = 0.025
# Swept from 0.1, below the paper's 0.3: small general-purpose models give
# clinical paraphrases lower cosines than PubMedBERT did.
REFERENCE_TAUS = tuple(sweep_taus(0.1, 0.9, 0.05))
CATEGORIES = (
    "paraphrase",
    "abbreviation",
    "specificity",
    "near_miss",
    "opposite",
    "unrelated",
)


@dataclass(frozen=True)
class ReferencePair:
    kind: str
    category: str
    same: bool
    a: str
    b: str


def load_reference_pairs(path: Path = REFERENCE_PAIRS_PATH) -> list[ReferencePair]:
    """The shipped pairs; a malformed row is a ValueError naming its line."""
    pairs = []
    with open(path, newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            if row["kind"] not in KINDS or row["category"] not in CATEGORIES:
                raise ValueError(
                    f"{path.name} line {line}: kind {row['kind']!r} or category "
                    f"{row['category']!r} is not one of {KINDS} / {CATEGORIES}"
                )
            if row["same"] not in ("0", "1") or not row["a"] or not row["b"]:
                raise ValueError(
                    f"{path.name} line {line}: needs same 0 or 1 and two texts"
                )
            pairs.append(
                ReferencePair(
                    kind=row["kind"],
                    category=row["category"],
                    same=row["same"] == "1",
                    a=row["a"],
                    b=row["b"],
                )
            )
    return pairs


def unrelated_pairs(pairs: Sequence[ReferencePair]) -> dict[str, list[tuple[str, str]]]:
    """Per kind, the pairs of distinct texts that no chain of "same" judgments
    links: "Septic shock" and "Hypoglycemia" (both problems), but not "AKI"
    and "Acute renal failure" when each was judged the same as "Acute kidney
    injury"."""
    result = {}
    for kind in KINDS:
        parent: dict[str, str] = {}

        def root(text: str, parent: dict[str, str] = parent) -> str:
            parent.setdefault(text, text)
            while parent[text] != text:
                parent[text] = parent[parent[text]]
                text = parent[text]
            return text

        for pair in pairs:
            if pair.kind != kind:
                continue
            a, b = root(pair.a), root(pair.b)
            if pair.same:
                parent[a] = b
        texts = sorted(parent)
        groups = {text: root(text) for text in texts}
        result[kind] = [
            (x, y)
            for n, x in enumerate(texts)
            for y in texts[n + 1 :]
            if groups[x] != groups[y]
        ]
    return result


def _finite(value: float) -> float | None:
    return None if isinstance(value, float) and math.isnan(value) else value


def _row(row: SweepRow | None) -> dict | None:
    if row is None:
        return None
    return {k: _finite(v) for k, v in row.as_dict().items()}


def sweep_report(
    pairs: Sequence[ReferencePair],
    similarities: Sequence[float],
    cosines: Sequence[float] | None = None,
    taus: Sequence[float] | None = None,
    unrelated: dict[str, Sequence[float]] | None = None,
) -> dict:
    """The sweep over tau of pairs with their matcher similarities, as data a
    page or a command shows: every row (with, when ``unrelated`` similarities
    per kind are given, the share of them each tau matches), the row of
    highest F1 (``best``), the adopted row (``adopted``: highest F1 among the
    taus matching at most ``MAX_UNRELATED_RATE`` of the unrelated pairs of
    every kind; the best row when there are none), the adopted tau's figures
    per kind and per category, and the pairs it gets wrong. ``cosines``
    (unguarded), when given, adds the best row without the polarity guard."""
    if len(pairs) != len(similarities):
        raise ValueError(f"{len(pairs)} pairs but {len(similarities)} similarities")
    taus = sweep_taus() if taus is None else list(taus)
    truths = [p.same for p in pairs]
    sweep = tau_sweep(similarities, truths, taus)
    rows = [_row(r) for r in sweep]
    usable = list(sweep)
    if unrelated:
        for row in rows:
            rates = {
                kind: (sum(v >= row["tau"] for v in values) / len(values))
                for kind, values in unrelated.items()
                if len(values)
            }
            row["unrelated_match_rate"] = rates
            row["unrelated_match_rate_max"] = max(rates.values()) if rates else None
        usable = [
            r
            for r, row in zip(sweep, rows)
            if (row["unrelated_match_rate_max"] or 0.0) <= MAX_UNRELATED_RATE
        ]
    best = best_row(sweep)
    adopted = best_row(usable) or best
    report = {
        "set": REFERENCE_SET_NAME,
        "pairs": len(pairs),
        "positives": sum(truths),
        "unrelated_pairs": {k: len(v) for k, v in (unrelated or {}).items()},
        "max_unrelated_rate": MAX_UNRELATED_RATE,
        "rows": rows,
        "best": _row(best),
        "adopted": next(
            (row for row in rows if adopted is not None and row["tau"] == adopted.tau),
            None,
        ),
        "by_kind": {},
        "by_category": {},
        "errors": [],
    }
    if cosines is not None:
        report["best_without_guard"] = _row(best_row(tau_sweep(cosines, truths, taus)))
    if adopted is None:
        return report
    tau = adopted.tau
    for kind in KINDS:
        index = [n for n, p in enumerate(pairs) if p.kind == kind]
        if index:
            (row,) = tau_sweep(
                [similarities[n] for n in index], [truths[n] for n in index], [tau]
            )
            report["by_kind"][kind] = {"pairs": len(index), **_row(row)}
    for category in CATEGORIES:
        index = [n for n, p in enumerate(pairs) if p.category == category]
        if index:
            right = sum((similarities[n] >= tau) == truths[n] for n in index)
            report["by_category"][category] = {
                "pairs": len(index),
                "accuracy": right / len(index),
            }
    for pair, similarity in zip(pairs, similarities):
        if (similarity >= tau) != pair.same:
            report["errors"].append(
                {
                    "kind": pair.kind,
                    "category": pair.category,
                    "same": pair.same,
                    "a": pair.a,
                    "b": pair.b,
                    "similarity": round(float(similarity), 4),
                }
            )
    return report


def reference_report(matcher, taus: Sequence[float] | None = None) -> dict:
    """``sweep_report`` of the shipped pairs and the unrelated pairs they imply,
    under a ``SemanticMatcher``'s model (embeddings go through its cache)."""
    pairs = load_reference_pairs()
    texts = list(dict.fromkeys(t for p in pairs for t in (p.a, p.b)))
    matcher.embed(texts)  # one batch, so everything below reads the cache
    similarities, cosines = [], []
    for pair in pairs:
        similarities.append(float(matcher.similarity([pair.a], [pair.b])[0, 0]))
        cosines.append(float(matcher.cosine([pair.a], [pair.b])[0, 0]))
    unrelated = {}
    for kind, kind_pairs in unrelated_pairs(pairs).items():
        kind_texts = sorted({t for pair in kind_pairs for t in pair})
        position = {t: n for n, t in enumerate(kind_texts)}
        matrix = matcher.similarity(kind_texts, kind_texts)
        unrelated[kind] = [
            float(matrix[position[a], position[b]]) for a, b in kind_pairs
        ]
    taus = REFERENCE_TAUS if taus is None else taus
    report = sweep_report(pairs, similarities, cosines, taus, unrelated)
    report["model_name"] = matcher.model_name
    return report


_reports: dict[tuple[str, float], dict] = {}


def reference_report_for(
    model_name: str | None = None, *, embedded_only: bool = False
) -> dict:
    """The reference report of a model (default: the configured one), for a page:
    computed once per process and pairs file, with the tau in force for the
    model and where it comes from (``tau_in_force``, ``tau_source``), which
    differ from the report's adopted tau once an admin adopts another.

    ``embedded_only`` (the web processes, which never load the model): computed
    only from the embedding cache, or MatcherUnavailable saying that the pairs
    are not embedded yet (a worker embeds them for the configured model as it
    starts: ``reference_pairs_embed``)."""
    from evaluation.matcher import SemanticMatcher, configured_model_name

    name = model_name or configured_model_name()
    key = (name, REFERENCE_PAIRS_PATH.stat().st_mtime)
    if key not in _reports:
        matcher = SemanticMatcher(name, tau=0.5)
        if embedded_only:
            _require_embedded(matcher)
        _reports[key] = reference_report(matcher)
    current = SemanticMatcher(name)
    return {
        **_reports[key],
        "tau_in_force": current.tau,
        "tau_source": current.tau_source,
    }


def _require_embedded(matcher) -> None:
    from evaluation.matcher import MatcherUnavailable, text_hash
    from evaluation.models import EmbeddingCache

    pairs = load_reference_pairs()
    hashes = {
        text_hash(matcher.normalize(t)) for pair in pairs for t in (pair.a, pair.b)
    }
    cached = set(
        EmbeddingCache.objects.filter(
            model_name=matcher.model_name, text_hash__in=sorted(hashes)
        ).values_list("text_hash", flat=True)
    )
    if len(cached) < len(hashes):
        raise MatcherUnavailable(
            f"The reference pairs are not embedded with {matcher.model_name} yet "
            f"({len(cached)} of {len(hashes)} texts): a worker embeds them for the "
            "configured model as it starts, and the web processes never load a "
            "model. Reload this page once a worker runs."
        )


def reference_pairs_embed(model_name: str | None = None) -> str:
    """Compute the reference report in this process (a worker, which holds the
    model), so the pairs' embeddings are cached for the web processes' page.
    Returns what happened, for the log."""
    from evaluation.matcher import MatcherUnavailable

    try:
        report = reference_report_for(model_name)
    except MatcherUnavailable as error:
        return f"reference pairs not embedded: {error}"
    return f"reference pairs embedded with {report['model_name']}"
