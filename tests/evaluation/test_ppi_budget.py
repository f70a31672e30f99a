"""The Gold budget of a PPI interval (issue 33): PPI++'s variance with the
Oracle's term fixed and the Gold term shrinking as 1 / n, and an active draw's
share of a uniform one's windows (Zrnic and Candès 2024)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from evaluation.ppi import inclusion_probabilities
from evaluation.ppi_budget import active_factor, gold_budget

Z = NormalDist().inv_cdf(0.975)


def interval(*, se, n_gold, lam=0.0, oracle_se=0.0, estimate=0.5):
    return {
        "estimate": estimate,
        "lower": estimate - Z * se,
        "upper": estimate + Z * se,
        "se": se,
        "lam": lam,
        "n_gold": n_gold,
        "n_windows": 5000,
        "effective_gold": n_gold,
        "oracle_only_lower": estimate - Z * oracle_se,
        "oracle_only_upper": estimate + Z * oracle_se,
    }


def test_without_an_oracle_term_the_uniform_draw_needs_the_classical_n():
    # se 0.05 on 100 windows: sigma = 0.5; a width of 0.1 is a half-width of
    # 0.05, so n = ceil((z * 0.5 / 0.05)^2) = ceil(384.15) = 385.
    budget = gold_budget(interval(se=0.05, n_gold=100), target_width=0.1)
    assert budget["uniform"] == math.ceil((Z * 0.5 / 0.05) ** 2) == 385
    assert budget["more_uniform"] == 285
    assert budget["width_now"] == pytest.approx(2 * Z * 0.05)
    assert budget["active"] is None and budget["more_active"] is None
    # The width it has now needs no more windows.
    now = gold_budget(interval(se=0.05, n_gold=100), target_width=2 * Z * 0.05)
    assert now["uniform"] == 100 and now["more_uniform"] == 0


def test_the_oracle_term_stays_and_bounds_the_narrowest_width():
    # lam 1, Oracle se 0.01: the Gold term is 0.05^2 - 0.01^2 = 0.0024 on 100
    # windows (0.24 per window); a width of 0.1 leaves (0.05 / z)^2 - 0.0001.
    budget = gold_budget(
        interval(se=0.05, n_gold=100, lam=1.0, oracle_se=0.01), target_width=0.1
    )
    assert budget["uniform"] == math.ceil(0.24 / ((0.05 / Z) ** 2 - 0.0001))
    assert budget["uniform"] == 436
    assert budget["narrowest_width"] == pytest.approx(2 * Z * 0.01)
    beyond = gold_budget(
        interval(se=0.05, n_gold=100, lam=1.0, oracle_se=0.01), target_width=0.03
    )
    assert beyond["uniform"] is None and beyond["more_uniform"] is None


def test_an_active_draw_needs_fewer_windows_where_the_uncertainty_is_concentrated():
    # Half the windows certain, half uncertain (u = 1): with the 0.7 floor the
    # uncertain ones are drawn at N q = 0.7 + 0.3 * 1 / 0.5 = 1.3 times the
    # uniform rate, so the Gold term needs 1 / 1.3 of the windows.
    u = np.array([0.0] * 50 + [1.0] * 50)
    factor = active_factor(u, np.ones(100))
    assert factor == pytest.approx(1 / 1.3)
    # The same as the draw evaluation.ppi makes: sum u / (N q) over sum u.
    q = inclusion_probabilities(u, 10) / 10
    assert factor == pytest.approx((u / (100 * q)).sum() / u.sum())
    assert active_factor(np.full(8, 0.3), np.ones(8)) == pytest.approx(1.0)
    budget = gold_budget(interval(se=0.05, n_gold=100), target_width=0.1, active=factor)
    assert budget["active"] == math.ceil((Z * 0.5 / 0.05) ** 2 / 1.3) == 296
    assert budget["more_active"] == 196 < budget["more_uniform"]


def test_gold_windows_from_an_active_draw_count_at_their_uniform_worth():
    # The windows so far came from the active draw itself: their variance per
    # window is the active one, a uniform draw needs 1.3 times as many.
    budget = gold_budget(
        interval(se=0.05, n_gold=100),
        target_width=2 * Z * 0.05,
        active=1 / 1.3,
        current=1 / 1.3,
    )
    assert budget["active"] == 100
    assert budget["uniform"] == 130


@pytest.mark.parametrize("width", [0.0, -0.1, 1.0, 2.0, math.nan, math.inf])
def test_a_target_width_outside_zero_to_one_is_refused(width):
    with pytest.raises(ValueError, match="target width"):
        gold_budget(interval(se=0.05, n_gold=100), target_width=width)
