"""An active Gold draw's statistics (evaluation.ppi, issue 33) on a small
synthetic population with a fixed seed: the inverse-probability weights keep
the estimate unbiased and the intervals cover, the same estimate without the
weights is biased, and the draw keeps every window's chance of being drawn
at its uniform floor. A few seconds; the 1,000-replication figures are
benchmarks/ppi_coverage_bench.py's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.ppi import (
    DEFAULT_FLOOR,
    RATIO,
    Design,
    _t,
    effective_df,
    inclusion_probabilities,
    poisson_draw,
    ppi_estimate,
)
from evaluation.ppi_active import (
    NEYMAN_FLOOR,
    lam_strata,
    level_moments,
    neyman_probabilities,
    top_up_probabilities,
    two_phase_probabilities,
    uncertainty_levels,
    union_probabilities,
)
from evaluation.ppi_budget import active_factor

N = 3000
BUDGET = 250
REPS = 300


def population(rng):
    """A truth, an Oracle that errs on 40 % of the hard windows (a fifth) and
    3 % of the others, always towards 1, and an uncertainty that is high on
    the hard windows; per-window RATIO vectors (every window counts)."""
    hard = rng.random(N) < 0.2
    y = (rng.random(N) < 0.6).astype(float)
    wrong = rng.random(N) < np.where(hard, 0.4, 0.03)
    f = np.where(wrong, 1.0, y)
    uncertainty = np.where(hard, rng.choice([2 / 3, 1.0], N), rng.choice([0, 1 / 3], N))
    ones = np.ones(N)
    return np.column_stack([f, ones]), np.column_stack([y, ones]), uncertainty


def replications():
    rng = np.random.default_rng(33)
    out = []
    for _ in range(REPS):
        f, y, u = population(rng)
        pi = inclusion_probabilities(u, BUDGET)
        drawn = poisson_draw(pi, rng)
        target = RATIO.value(y.mean(axis=0))
        weighted = ppi_estimate(Design.of(f, y, drawn, pi), RATIO)
        # The same Gold windows counted as if drawn uniformly.
        unweighted = ppi_estimate(Design.of(f, y, drawn), RATIO)
        out.append((target, weighted, unweighted, pi, drawn))
    return out


@pytest.fixture(scope="module")
def results():
    return replications()


def test_the_weighted_active_estimate_is_unbiased_and_covers(results):
    errors = np.array([w.estimate - t for t, w, _, _, _ in results])
    spread = errors.std() / math.sqrt(REPS)
    assert abs(errors.mean()) < 3 * spread
    covered = np.mean([w.covers(t) for t, w, _, _, _ in results])
    # 95 % intervals: 300 replications put the coverage within about 2.5
    # points of it.
    assert covered >= 0.91
    # The interval is as wide as the estimate's spread, not narrower.
    rms_se = math.sqrt(np.mean([w.se**2 for _, w, _, _, _ in results]))
    assert errors.std() <= 1.1 * rms_se


def test_without_the_weights_the_active_estimate_is_biased(results):
    # The hard windows, where the Oracle overstates the truth, are drawn more
    # often: counted as uniform they pull the correction too far.
    errors = np.array([u.estimate - t for t, _, u, _, _ in results])
    spread = errors.std() / math.sqrt(REPS)
    assert errors.mean() < -5 * spread
    # Not a rounding matter: a good part of the interval's standard error.
    assert errors.mean() < -0.5 * np.mean([u.se for _, _, u, _, _ in results])


def test_every_window_keeps_its_floor_and_the_budget_is_spent(results):
    _, _, _, pi, drawn = results[0]
    assert pi.min() == pytest.approx(DEFAULT_FLOOR * BUDGET / N)
    assert pi.sum() == pytest.approx(BUDGET)
    mean_drawn = np.mean([d.sum() for *_, d in results])
    assert abs(mean_drawn - BUDGET) < 3 * math.sqrt(BUDGET)
    # No weight grows beyond that of the floor.
    weights = np.concatenate([1 / p[d] for *_, p, d in results])
    assert weights.max() <= N / (DEFAULT_FLOOR * BUDGET) + 1e-9


def test_the_active_draw_narrows_the_interval_as_the_budget_page_plans(results):
    rng = np.random.default_rng(34)
    f, y, u = population(rng)
    pi_active = inclusion_probabilities(u, BUDGET)
    factor = active_factor(u, np.ones(N))
    assert factor < 0.9
    widths = {"uniform": [], "active": []}
    for _ in range(100):
        uniform = np.full(N, BUDGET / N)
        for name, pi in (("uniform", uniform), ("active", pi_active)):
            design = Design.of(f, y, poisson_draw(pi, rng), pi)
            widths[name].append(ppi_estimate(design, RATIO, lam=1.0).se ** 2)
    # The rectifier's variance shrinks by about the planned factor (the
    # Oracle term lam^2 var(f) / N, the same under both draws, is small here).
    ratio = np.mean(widths["active"]) / np.mean(widths["uniform"])
    assert ratio < 0.95
    assert ratio == pytest.approx(factor, abs=0.12)


def test_a_draw_from_levels_moments_on_the_labels_so_far_stays_unbiased():
    # Each replication: a uniform pilot of 100 labelled windows estimates each
    # level's second moment of the Oracle's error; the Gold draw follows its
    # root above a 0.2 floor. The probabilities depend on the pilot only, so
    # the weighted estimate is unbiased given them.
    rng = np.random.default_rng(35)
    errors, covered, ses, uniform_ses = [], [], [], []
    for _ in range(200):
        f, y, u = population(rng)
        levels = uncertainty_levels(u)
        pilot = poisson_draw(np.full(N, 100 / N), rng)
        moments = level_moments(levels[pilot], (f - y)[pilot, 0])
        pi = neyman_probabilities(levels, moments, BUDGET, floor=0.2)
        target = RATIO.value(y.mean(axis=0))
        e = ppi_estimate(Design.of(f, y, poisson_draw(pi, rng), pi), RATIO)
        uniform = np.full(N, BUDGET / N)
        drawn = poisson_draw(uniform, rng)
        uniform_ses.append(ppi_estimate(Design.of(f, y, drawn, uniform), RATIO).se)
        errors.append(e.estimate - target)
        covered.append(e.covers(target))
        ses.append(e.se)
    errors = np.array(errors)
    assert abs(errors.mean()) < 3 * errors.std() / math.sqrt(errors.size)
    assert np.mean(covered) >= 0.91
    assert errors.std() <= 1.1 * math.sqrt(np.mean(np.square(ses)))
    # The errors sit on the hard windows: the draw there narrows the interval
    # (by 8 % in variance here, where the Oracle term lam^2 var(f) / N, the
    # same under both draws, is a good third of it).
    assert np.mean(np.square(ses)) < 0.96 * np.mean(np.square(uniform_ses))


@pytest.mark.parametrize(
    "df, exact", [(3, 3.1824), (10, 2.2281), (30, 2.0423), (math.inf, 1.9600)]
)
def test_the_t_quantile_matches_the_table(df, exact):
    assert _t(0.05, df) == pytest.approx(exact, abs=0.004)


def test_a_variance_carried_by_a_few_windows_has_few_degrees_of_freedom():
    # Eight windows carry the variance: as unsure as a variance from 16.
    spread = np.zeros(1000)
    spread[:8] = [1, -1] * 4
    assert effective_df(spread) == pytest.approx(16, rel=0.02)
    # Normal values: about as many degrees of freedom as values.
    normal = np.random.default_rng(0).normal(size=2000)
    assert 1600 < effective_df(normal) < 2400
    # A PPI interval on such data takes the wider t quantile.
    f = np.zeros(1000)
    y = np.zeros(1000)
    y[:6] = 1.0
    labelled = np.zeros(1000, dtype=bool)
    labelled[:60] = True
    e = ppi_estimate(Design.of(f, y, labelled), lam=1.0)
    assert e.width / (2 * e.se) > 2.1


def test_the_union_of_pilot_and_active_draw_has_the_two_phase_probability():
    # By hand: missed by both phases with (1 - p)(1 - q).
    pi = two_phase_probabilities([0.5, 0.1, 0.0, 1.0], [0.4, 0.2, 0.3, 0.0])
    assert pi.tolist() == pytest.approx([0.7, 0.28, 0.3, 1.0])
    with pytest.raises(ValueError, match="lie in"):
        two_phase_probabilities([1.5], [0.1])
    # Two independent Poisson phases: each window's frequency in the union
    # over 4,000 draws is its pi (within 4 standard errors), and the
    # Horvitz-Thompson total over the union is unbiased.
    rng = np.random.default_rng(5)
    p = np.full(6, 0.1)
    q = np.array([0.05, 0.1, 0.3, 0.5, 0.8, 0.02])
    y = np.array([3.0, 1.0, 0.0, 2.0, 5.0, 4.0])
    pi = two_phase_probabilities(p, q)
    reps = 4000
    hits = np.zeros(6)
    totals = []
    for _ in range(reps):
        union = poisson_draw(p, rng) | poisson_draw(q, rng)
        hits += union
        totals.append((y[union] / pi[union]).sum())
    assert np.all(np.abs(hits / reps - pi) < 4 * np.sqrt(pi * (1 - pi) / reps))
    se = np.std(totals) / math.sqrt(reps)
    assert abs(np.mean(totals) - y.sum()) < 4 * se
    # Weighting the union by the active draw's q alone overcounts it.
    biased = [
        (y[u] / q[u]).sum()
        for u in (poisson_draw(p, rng) | poisson_draw(q, rng) for _ in range(reps))
    ]
    assert np.mean(biased) - y.sum() > 4 * se


def test_lam_strata_join_the_two_top_levels():
    assert lam_strata([0, 1, 2, 3]).tolist() == [0, 1, 2, 2]


def test_the_active_draw_tops_the_pilot_up_to_the_square_root_rule():
    # Levels 0, 0, 1, 1 with moments 0.01 and 0.09 (roots 0.1 and 0.3, sum
    # 0.8), floor 0.5: for a total budget B the rule gives level 0 B * (0.5 /
    # 4 + 0.5 * 0.1 / 0.8) = 0.1875 B and level 1 0.3125 B. A uniform pilot
    # of p = 0.25 and one new window: sum (1 - p) q = 2 (0.1875 B - 0.25) +
    # 2 (0.3125 B - 0.25) = B - 1 = 1, so B = 2: the union's pi is 0.375 and
    # 0.625, q = (pi - 0.25) / 0.75 = 1/6 and 1/2.
    levels, moments = [0, 0, 1, 1], [0.01, 0.09]
    q = top_up_probabilities([0.25] * 4, levels, moments, 1, floor=0.5)
    assert q == pytest.approx([1 / 6, 1 / 6, 0.5, 0.5])
    union = two_phase_probabilities([0.25] * 4, q)
    assert union == pytest.approx([0.375, 0.375, 0.625, 0.625])
    # A pilot that already favoured level 0 (p 0.6) gets nothing more there:
    # q 0 on level 0; 2 (0.3125 B - 0.05) = 0.5 at B = 0.96, level 0's rule
    # 0.18 < 0.6; level 1's q (0.3 - 0.05) / 0.95.
    p = [0.6, 0.6, 0.05, 0.05]
    q = top_up_probabilities(p, levels, moments, 0.5, floor=0.5)
    assert q == pytest.approx([0.0, 0.0, 0.25 / 0.95, 0.25 / 0.95])
    # More new windows than the pilot left: every window.
    assert top_up_probabilities(p, levels, moments, 5, floor=0.5) == pytest.approx(
        [1.0] * 4
    )
    with pytest.raises(ValueError, match="same windows"):
        top_up_probabilities(p[:3], levels, moments, 1)


def test_a_pilot_window_is_weighted_by_the_draw_its_own_label_did_not_set():
    # 40 pilot windows, 20 on each of levels 0 and 3, uniform p = 0.1; the
    # Oracle was wrong (residual 1) on window 0 of level 0 and 0.8 off on
    # five of level 3. Window 0's union
    # probability is the one the draw would have given it without its label
    # (level 0 then showed no error), and so for each pilot window; a window
    # outside the pilot has that of q.
    n = 400
    levels = np.repeat([0, 3], n // 2)
    labelled = np.zeros(n, dtype=bool)
    labelled[:20] = labelled[200:220] = True
    residuals = np.zeros(n)
    residuals[0] = 1.0
    residuals[200:205] = 0.8
    p = np.full(n, 0.1)
    q, pi, moments, floor = union_probabilities(p, labelled, levels, residuals, 30)
    assert floor == NEYMAN_FLOOR
    assert moments == pytest.approx(
        level_moments(levels[labelled], residuals[labelled], 1 / p[labelled])
    )
    assert ((1 - p) * q).sum() == pytest.approx(30, rel=1e-6)
    assert pi[~labelled] == pytest.approx(two_phase_probabilities(p, q)[~labelled])
    for window in (0, 1, 200, 210):
        without = labelled.copy()
        without[window] = False
        m = level_moments(levels[without], residuals[without], 1 / p[without])
        q_without = top_up_probabilities(p, levels, m, 30)
        assert pi[window] == pytest.approx(1 - 0.9 * (1 - q_without[window]))
        if window == 0:
            # Its own error raised level 0's moment, and so its q: without
            # its label it would have been drawn less likely.
            assert q_without[0] < q[0]
    # Fewer than MIN_LABELLED labels: the levels' own uncertainty, the wide floor.
    few = np.zeros(n, dtype=bool)
    few[:5] = True
    _, _, moments, floor = union_probabilities(p, few, levels, residuals, 30)
    assert floor == DEFAULT_FLOOR
    assert moments.tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])


def test_a_pilot_topped_up_stays_unbiased_and_covers():
    # Each replication: an active pilot of 100 windows (the levels' own
    # uncertainty, floor 0.7), then BUDGET - 100 new windows topping it up
    # from its labels' moments; the union weighted by union_probabilities.
    # Weighting the pilot's windows by the q their own labels set is biased
    # (by a sixth of a standard error here, over 3 of the mean's standard
    # errors over the replications); leaving each one's label out is not.
    rng = np.random.default_rng(36)
    errors, naive, covered = [], [], []
    for _ in range(300):
        f, y, u = population(rng)
        levels = uncertainty_levels(u)
        p = neyman_probabilities(levels, np.arange(4) / 3, 100, floor=DEFAULT_FLOOR)
        pilot = poisson_draw(p, rng)
        q, pi, _, _ = union_probabilities(p, pilot, levels, (f - y)[:, 0], BUDGET - 100)
        union = pilot | poisson_draw(q, rng)
        target = RATIO.value(y.mean(axis=0))
        e = ppi_estimate(Design.of(f, y, union, pi), RATIO)
        e_naive = ppi_estimate(
            Design.of(f, y, union, two_phase_probabilities(p, q)), RATIO
        )
        errors.append(e.estimate - target)
        naive.append(e_naive.estimate - target)
        covered.append(e.covers(target))
    errors, naive = np.array(errors), np.array(naive)
    se = errors.std() / math.sqrt(errors.size)
    assert abs(errors.mean()) < 3 * se
    assert naive.mean() > 3 * se
    assert np.mean(covered) >= 0.91
