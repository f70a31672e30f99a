"""Scoring with a cold embedding cache over tens of thousands of distinct texts.

Real predictions are free text: every window's problems and actions carry their
own values, doses and abbreviations, so a leaderboard's scoring meets tens of
thousands of texts that no earlier submission embedded. This benchmark builds a
RealICU-Scale release (release_bench's generated Oracle labels: --stays stays of
120 windows) and a prediction file of 5 problems and 5 actions a window whose
texts are drawn, each at least once, from a pool of --texts distinct phrases
made combinatorially (a problem or action, a qualifier, a value with its unit,
written out or abbreviated, e.g. "worsening AKI, creatinine 2.7 mg/dL" or
"start norepi 0.08 mcg/kg/min"). It scores the file twice in fresh processes:
first with an empty embedding cache (cold: every text embedded), then warm.

Prints, for each: the scoring's wall time, the distinct texts and how many
were embedded (fewer: texts the normalizer makes equal, e.g. an abbreviation
and its spelled-out form, are embedded once), the embedding's own time and its
throughput (texts per second, the model's encode calls only), and the peak
memory (RSS high-water mark) of the process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \\
        python benchmarks/scoring_cold_bench.py [--texts 24000] [--stays 40]

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there (``<name>_scoring_cold``); releases, broker
folder and caches go to a temporary folder removed at the end.

Left out: the upload and the validation's queueing (scoring is timed as the
scoring task runs it, in one process), the model's load (timed apart: the
first encode call's load is not in the throughput), and a GPU (the matcher's
device setting decides; this machine has none).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import release_bench  # noqa: E402

import benchmarks._database as pg  # noqa: E402
from benchmarks._label_texts import predictions_write  # noqa: E402
from benchmarks._parts import (  # noqa: E402
    part_environment,
    part_options,
    part_run,
    peak_mb,
    setup_django,
)

TARGET_TEXTS = 20_000

# (phrase, abbreviation or None, [(measure, abbreviation, unit, low, high, step)])
PROBLEM_STEMS = [
    ("acute kidney injury", "AKI", [("creatinine", "Cr", "mg/dL", 1.3, 6.0, 0.1)]),
    ("hyperkalemia", "hyperK", [("potassium", "K", "mmol/L", 5.5, 7.5, 0.1)]),
    ("hypokalemia", "hypoK", [("potassium", "K", "mmol/L", 2.2, 3.4, 0.1)]),
    ("hyponatremia", "hypoNa", [("sodium", "Na", "mmol/L", 112, 133, 1)]),
    ("hypernatremia", "hyperNa", [("sodium", "Na", "mmol/L", 147, 165, 1)]),
    ("septic shock", None, [("lactate", "lac", "mmol/L", 2.1, 9.0, 0.1)]),
    ("lactic acidosis", None, [("lactate", "lac", "mmol/L", 2.1, 12.0, 0.1)]),
    (
        "hypotension",
        None,
        [("mean arterial pressure", "MAP", "mmHg", 42, 64, 1)],
    ),
    (
        "hypoxemic respiratory failure",
        "AHRF",
        [("PaO2/FiO2", "P/F", "", 60, 290, 5), ("SpO2", "sat", "%", 78, 91, 1)],
    ),
    ("hypercapnia", None, [("PaCO2", "pCO2", "mmHg", 48, 95, 1)]),
    (
        "atrial fibrillation with rapid ventricular response",
        "AF with RVR",
        [("heart rate", "HR", "bpm", 115, 190, 1)],
    ),
    ("anemia", None, [("hemoglobin", "Hb", "g/dL", 5.0, 8.5, 0.1)]),
    ("thrombocytopenia", None, [("platelets", "plt", "x10^9/L", 8, 95, 1)]),
    ("hyperglycemia", None, [("glucose", "BG", "mg/dL", 200, 560, 5)]),
    ("hypoglycemia", None, [("glucose", "BG", "mg/dL", 28, 68, 1)]),
    ("fever", None, [("temperature", "T", "C", 38.1, 41.0, 0.1)]),
    ("oliguria", None, [("urine output", "UOP", "mL/h", 0, 25, 1)]),
    ("metabolic acidosis", None, [("pH", "pH", "", 6.95, 7.30, 0.01)]),
    ("delirium", None, [("CAM-ICU score", "CAM", "", 1, 4, 1)]),
    (
        "upper gastrointestinal bleeding",
        "UGIB",
        [("hemoglobin drop", "Hb drop", "g/dL", 1.0, 4.0, 0.1)],
    ),
]
PROBLEM_QUALIFIERS = [
    "",
    "worsening ",
    "persistent ",
    "new ",
    "severe ",
    "suspected ",
    "improving ",
    "refractory ",
]

# (verb, drug or procedure, abbreviation or None, unit, low, high, step)
ACTION_STEMS = [
    ("start", "norepinephrine", "norepi", "mcg/kg/min", 0.02, 0.60, 0.01),
    ("titrate up", "norepinephrine", "NE", "mcg/kg/min", 0.05, 0.80, 0.01),
    ("add", "vasopressin", "vaso", "units/min", 0.01, 0.06, 0.01),
    ("give", "potassium chloride", "KCl", "mEq IV", 10, 80, 10),
    ("give", "furosemide", "Lasix", "mg IV", 10, 200, 10),
    ("bolus", "lactated Ringer's", "LR", "mL", 250, 2000, 250),
    ("bolus", "normal saline", "NS", "mL", 250, 2000, 250),
    ("transfuse", "packed red blood cells", "PRBC", "units", 1, 4, 1),
    ("start", "insulin infusion", "insulin gtt", "units/h", 1, 15, 0.5),
    ("give", "dextrose 50%", "D50", "mL", 12.5, 50, 12.5),
    ("start", "heparin infusion", "heparin gtt", "units/kg/h", 10, 18, 1),
    ("give", "amiodarone", "amio", "mg IV", 150, 300, 150),
    ("give", "metoprolol", "metop", "mg IV", 2.5, 15, 2.5),
    ("increase", "PEEP", "PEEP", "cmH2O", 6, 18, 1),
    ("increase", "FiO2", "FiO2", "%", 40, 100, 5),
    ("start", "propofol", "prop", "mcg/kg/min", 5, 80, 5),
    ("start", "dexmedetomidine", "dex", "mcg/kg/h", 0.2, 1.4, 0.1),
    ("give", "calcium gluconate", "Ca gluc", "g IV", 1, 3, 1),
    ("give", "sodium bicarbonate", "bicarb", "mEq IV", 50, 150, 50),
    ("start", "piperacillin-tazobactam", "pip-tazo", "g IV q6h", 3.375, 4.5, 1.125),
]
PROBLEM_TAILS = ["", ", rising", " on repeat", " since admission"]
ACTION_TAILS = [
    "",
    " now",
    " and recheck in 2 h",
    " over 1 h",
    ", reassess",
    " if MAP < 65",
    " per protocol",
    " after discussing with the family",
]


def _steps(low: float, high: float, step: float) -> list[str]:
    count = int(round((high - low) / step)) + 1
    places = max(0, -Decimal(str(step)).as_tuple().exponent)
    return [f"{low + n * step:.{places}f}" for n in range(count)]


def problem_texts() -> list[str]:
    texts = []
    for name, abbreviation, measures in PROBLEM_STEMS:
        names = [name] + ([abbreviation] if abbreviation else [])
        for qualifier, shown, measure, tail in itertools.product(
            PROBLEM_QUALIFIERS, names, measures, PROBLEM_TAILS
        ):
            label, short, unit, low, high, step = measure
            for value in _steps(low, high, step):
                what = label if len(texts) % 2 else short
                reading = f"{what} {value} {unit}".strip()
                texts.append(f"{qualifier}{shown}, {reading}{tail}")
    return texts


def action_texts() -> list[str]:
    texts = []
    for verb, drug, abbreviation, unit, low, high, step in ACTION_STEMS:
        for shown, tail in itertools.product((drug, abbreviation), ACTION_TAILS):
            for value in _steps(low, high, step):
                texts.append(f"{verb} {shown} {value} {unit}{tail}")
    return texts


def text_pool(size: int, seed: int = 5) -> tuple[list[str], list[str]]:
    """``size`` distinct phrases, half problems and half actions (as far as the
    combinations go), drawn with ``seed``."""
    rng = random.Random(seed)
    problems = sorted(set(problem_texts()))
    actions = sorted(set(action_texts()))
    half = size // 2
    take_problems = min(len(problems), max(half, size - len(actions)))
    take_actions = min(len(actions), size - take_problems)
    return rng.sample(problems, take_problems), rng.sample(actions, take_actions)


def part_predictions(release_id: str, path: str, size: str) -> dict:
    setup_django()
    from exports.models import ReleaseWindow

    problems, actions = text_pool(int(size))
    rng = random.Random(11)
    rng.shuffle(problems)
    rng.shuffle(actions)
    # Every phrase used once before any is used again.
    next_problem = itertools.cycle(problems)
    next_action = itertools.cycle(actions)
    statuses = ["improving", "stable", "deteriorating"]
    count = predictions_write(
        path,
        ReleaseWindow.objects.filter(release_id=int(release_id))
        .order_by("window_id")
        .values_list("window_id", flat=True)
        .iterator(),
        lambda: {
            "status": rng.choice(statuses),
            "acute_problems": [next(next_problem) for _ in range(5)],
            "recommended_actions": [next(next_action) for _ in range(5)],
        },
    )
    used = min(len(problems), 5 * count) + min(len(actions), 5 * count)
    return {"predictions": count, "pool": len(problems) + len(actions), "used": used}


def part_score(release_id: str, path: str) -> dict:
    setup_django()
    from exports.models import Release
    from exports.scoring import release_matcher

    release = Release.objects.get(pk=int(release_id))
    matcher = release_matcher(release)
    base = getattr(matcher, "base", matcher)
    started = time.perf_counter()
    model = base.load()
    load_seconds = time.perf_counter() - started
    encode = {"seconds": 0.0, "texts": 0}
    original = model.encode

    def timed_encode(texts, *args, **kwargs):
        begun = time.perf_counter()
        try:
            return original(texts, *args, **kwargs)
        finally:
            encode["seconds"] += time.perf_counter() - begun
            encode["texts"] += len(texts)

    model.encode = timed_encode
    started = time.perf_counter()
    figures = release_bench.predictions_scored(release, path, matcher)
    return {
        "seconds": time.perf_counter() - started,
        **figures,
        "load_seconds": load_seconds,
        "encode_seconds": encode["seconds"],
        "encoded": encode["texts"],
        "model": base.model_name,
        "peak_mb": peak_mb(),
    }


def part_data(stays: str) -> dict:
    release_bench.STAYS = int(stays)
    return release_bench.part_data()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part")
    parser.add_argument(
        "--texts", type=int, default=24_000, help="distinct phrases in the file"
    )
    parser.add_argument(
        "--stays",
        type=int,
        default=40,
        help="stays of 120 windows in the release (10 phrases a window)",
    )
    options = part_options(
        parser,
        {
            "data": part_data,
            "build": release_bench.part_build,
            "predictions": part_predictions,
            "score": part_score,
        },
    )
    if options is None:
        return

    windows = options.stays * release_bench.WINDOWS_PER_STAY
    if windows * 5 < options.texts // 2:
        sys.exit(
            f"{windows:,} windows hold {windows * 10:,} phrases, fewer than "
            f"--texts {options.texts:,}: raise --stays."
        )
    db = pg.database_name("scoring_cold")
    pg.database_create(db)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = part_environment(pg.database_url(db), Path(tmp))
            data = part_run(__file__, "data", env, str(options.stays))
            build = part_run(__file__, "build", env, str(data["run_id"]))
            print(
                f"release: {build['windows']:,} windows ({data['seconds']:.0f} s to "
                f"generate, {build['seconds']:.0f} s to build)"
            )
            predictions = str(Path(tmp) / "predictions.jsonl")
            made = part_run(
                __file__,
                "predictions",
                env,
                str(build["release_id"]),
                predictions,
                str(options.texts),
            )
            print(
                f"predictions: {made['predictions']:,} windows, 5 problems and 5 "
                f"actions each, {made['used']:,} distinct phrases of a pool of "
                f"{made['pool']:,}"
            )
            for label in ("cold", "warm"):
                score = part_run(
                    __file__, "score", env, str(build["release_id"]), predictions
                )
                rate = (
                    f"{score['encoded'] / score['encode_seconds']:,.0f} texts/s"
                    if score["encode_seconds"]
                    else "nothing embedded"
                )
                print(
                    f"scoring ({label} cache): {score['seconds']:.1f} s "
                    f"(validation {score['validation_seconds']:.1f} s); "
                    f"{score['texts']:,} distinct texts, "
                    f"{score['texts_embedded']:,} embedded (distinct once "
                    f"normalized: abbreviations spelled out) in "
                    f"{score['encode_seconds']:.1f} s ({rate}; model "
                    f"{score['model']} loaded in {score['load_seconds']:.1f} s, "
                    f"apart); peak {score['peak_mb']:.0f} MB; problems Hit@5 "
                    f"{score['problems_hit_at_5']:.3f}, actions HRR@5 "
                    f"{score['actions_hrr_at_5']:.3f}"
                )
                if label == "cold" and score["texts_embedded"] < TARGET_TEXTS:
                    print(
                        f"  note: fewer than {TARGET_TEXTS:,} texts embedded cold; "
                        "raise --texts"
                    )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        if not options.keep:
            pg.database_drop(db)


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
