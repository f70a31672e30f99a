"""Cohen's and Fleiss' kappa as computed here are scikit-learn's and statsmodels'
to the last bit, on fixed data; and computing them imports neither library."""

import math
import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from evaluation.agreement import STATUS_ORDER, cohens_kappa, fleiss_kappa


def _ratings(seed: int, items: int, q: int, agree: float) -> tuple:
    """Two raters' codes: the second copies the first with probability
    ``agree`` and draws at random otherwise."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, q, items)
    second = np.where(rng.random(items) < agree, first, rng.integers(0, q, items))
    return first, second


@pytest.mark.parametrize(
    ("seed", "items", "q", "agree"),
    [(0, 12, 3, 0.5), (1, 160, 3, 0.8), (2, 1388, 3, 0.6), (3, 57, 5, 0.3)],
)
def test_cohens_kappa_is_scikit_learns_to_the_last_bit(seed, items, q, agree):
    first, second = _ratings(seed, items, q, agree)
    expected = cohen_kappa_score(first, second, labels=np.arange(q))
    assert cohens_kappa(list(first), list(second), categories=range(q)) == expected


def test_cohens_kappa_on_status_labels_is_scikit_learns():
    first, second = _ratings(4, 200, 3, 0.7)
    r1 = [STATUS_ORDER[c] for c in first]
    r2 = [STATUS_ORDER[c] for c in second]
    expected = cohen_kappa_score(r1, r2, labels=list(STATUS_ORDER))
    assert cohens_kappa(r1, r2, categories=STATUS_ORDER) == expected


def test_cohens_kappa_with_a_category_nobody_used_is_scikit_learns():
    first, second = _ratings(5, 40, 2, 0.6)  # categories 0 and 1 of 0, 1, 2
    expected = cohen_kappa_score(first, second, labels=np.arange(3))
    assert cohens_kappa(list(first), list(second), categories=range(3)) == expected


@pytest.mark.parametrize(
    ("seed", "items", "raters", "q"),
    [(0, 10, 3, 3), (1, 160, 3, 3), (2, 1388, 3, 3), (3, 40, 14, 5), (4, 9, 2, 2)],
)
def test_fleiss_kappa_of_a_complete_design_is_statsmodels_to_the_last_bit(
    seed, items, raters, q
):
    rng = np.random.default_rng(seed)
    # Raters lean to the item's own category, so kappa is well away from 0.
    leaning = rng.integers(0, q, items)
    codes = np.where(
        rng.random((items, raters)) < 0.6,
        leaning[:, None],
        rng.integers(0, q, (items, raters)),
    )
    table = np.stack([(codes == c).sum(axis=1) for c in range(q)], axis=1)
    expected = statsmodels_fleiss_kappa(table, method="fleiss")
    assert not math.isnan(expected)
    assert fleiss_kappa(table) == expected


def test_fleiss_kappa_leaves_unrated_items_out_as_statsmodels_would_refuse_them():
    table = np.array([[2, 1, 0], [0, 0, 0], [1, 1, 1], [3, 0, 0], [0, 2, 1]])
    rated = table[table.sum(axis=1) > 0]
    assert fleiss_kappa(table) == statsmodels_fleiss_kappa(rated, method="fleiss")


def test_computing_the_kappas_imports_neither_scikit_learn_nor_statsmodels():
    script = (
        "import sys\n"
        "from evaluation.agreement import cohens_kappa, fleiss_kappa\n"
        "print(cohens_kappa([0, 1, 1, 2], [0, 1, 2, 2], categories=range(3)))\n"
        "print(fleiss_kappa([[2, 1, 0], [0, 3, 0], [1, 1, 1]]))\n"
        "print(sorted(m for m in ('sklearn', 'statsmodels', 'scipy')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    cohen, fleiss, imported = out.stdout.split("\n")[:3]
    assert float(cohen) == pytest.approx(0.6363636, abs=1e-6)
    assert float(fleiss) == pytest.approx(
        fleiss_kappa([[2, 1, 0], [0, 3, 0], [1, 1, 1]])
    )
    assert imported == "[]"
