"""MIMIC-IV-Note import throughput (issue 21): a generated MIMIC-IV folder (20 ICU
admissions, a small chartevents) with a note/ module of realistic shape and size:
radiology.csv.gz (reports of about 1-2.5 kB in the real layout, half of them of
subjects not imported, as most of the real file is), radiology_detail.csv.gz
(three fields per report) and discharge.csv.gz (summaries of 7-12 kB).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        python benchmarks/notes_import_bench.py [--reports 100000]

Prints the import's wall time on a fresh PostgreSQL database, the notes
imported and the note rows read per second, and peak memory. The chartevents
file is kept small so that the notes are most of the work; the figure is an
upper bound of their cost (the whole import is timed).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import database_create, database_drop  # noqa: E402

# Per run: a fixed name would be dropped under a concurrent run of the benchmark.
BENCH_DB = f"realicu_notes_bench_{os.getpid()}"


def write_notes(folder: Path, reports: int) -> dict:
    """note/ files under ``folder`` (a folder from import_bench.write_mimic:
    subjects 10000001-10000020, admissions 20000001-20000020 from 2150-01-01)."""
    from tests.windows.notes_files import (
        DETAIL_COLUMNS,
        EXAMS,
        FINDINGS,
        IMPRESSIONS,
        NOTE_COLUMNS,
        discharge_text,
        radiology_text,
    )

    rng = random.Random(0)
    note = folder / "note"
    note.mkdir(parents=True, exist_ok=True)
    sizes = {"radiology": 0, "imported": 0, "discharge": 0}
    with (
        gzip.open(note / "radiology.csv.gz", "wt", encoding="utf-8") as rf,
        gzip.open(note / "radiology_detail.csv.gz", "wt", encoding="utf-8") as df,
    ):
        reports_out = csv.writer(rf, lineterminator="\n")
        details_out = csv.writer(df, lineterminator="\n")
        reports_out.writerow(NOTE_COLUMNS)
        details_out.writerow(DETAIL_COLUMNS)
        for i in range(reports):
            mine = i % 2 == 0
            k = i % 20
            subject = 10_000_001 + k if mine else 11_000_000 + i
            hadm = 20_000_001 + k if mine else 21_000_000 + i
            day, minute = (i // 40) % 390, rng.randrange(1440)
            when = f"2150-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d} "
            chart = when + f"{minute // 60:02d}:{minute % 60:02d}:00"
            store = when + f"{minute // 60:02d}:{minute % 60:02d}:30"
            code, exam = EXAMS[i % len(EXAMS)]
            findings = " ".join(rng.choice(FINDINGS) for _ in range(rng.randint(4, 10)))
            text = radiology_text(exam, findings, rng.choice(IMPRESSIONS))
            note_id = f"{subject}-RR-{i}"
            reports_out.writerow([note_id, subject, hadm, "RR", i, chart, store, text])
            for ordinal, (field, value) in enumerate(
                (("exam_code", code), ("exam_name", exam), ("cpt_code", "71045")), 1
            ):
                details_out.writerow([note_id, subject, field, value, ordinal])
            sizes["radiology"] += len(text)
            sizes["imported"] += mine
    with gzip.open(note / "discharge.csv.gz", "wt", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(NOTE_COLUMNS)
        for i in range(max(20, reports // 10)):
            mine = i < 20
            subject = 10_000_001 + i if mine else 12_000_000 + i
            hadm = 20_000_001 + i if mine else 22_000_000 + i
            text = discharge_text(rng=rng)
            out.writerow(
                [
                    f"{subject}-DS-1",
                    subject,
                    hadm,
                    "DS",
                    1,
                    "2151-02-04 00:00:00",
                    "2151-02-04 12:00:00",
                    text,
                ]
            )
            sizes["discharge"] += len(text)
    return sizes


def _full_times(path: Path, columns) -> None:
    """pandas writes a midnight timestamp as a date ("2150-01-01"), which the
    importer rightly refuses in a time column: write it with its time."""
    import pandas as pd

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column in columns:
        short = frame[column].str.len() == 10
        frame.loc[short, column] = frame.loc[short, column] + " 00:00:00"
    frame.to_csv(path, index=False)


def part_import(folder: str) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    django.setup()
    from django.core.management import call_command

    from windows.importers.mimic import mimic_import

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = mimic_import(directory=Path(folder))
    seconds = time.perf_counter() - started
    return {
        "radiology": summary.events.get("radiology", 0),
        "discharge": summary.events.get("discharge", 0),
        "events": summary.total_events,
        "seconds": seconds,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["import"])
    parser.add_argument("--folder")
    parser.add_argument("--reports", type=int, default=100_000)
    args = parser.parse_args()
    if args.part == "import":
        print(json.dumps(part_import(args.folder)))
        return

    from benchmarks.import_bench import write_mimic

    folder = Path(tempfile.mkdtemp(prefix="realicu-notes-bench-")) / "mimic"
    write_mimic(folder, 1_000)
    _full_times(folder / "hosp" / "admissions.csv", ("admittime", "dischtime"))
    _full_times(folder / "icu" / "icustays.csv", ("intime", "outtime"))
    started = time.perf_counter()
    sizes = write_notes(folder, args.reports)
    print(
        f"Generated note/ in {time.perf_counter() - started:.0f} s: "
        f"{args.reports:,} radiology reports ({sizes['imported']:,} of imported "
        f"admissions; {sizes['radiology'] / args.reports:,.0f} characters on "
        f"average), {3 * args.reports:,} radiology_detail rows, "
        f"{max(20, args.reports // 10):,} discharge summaries "
        f"({sizes['discharge'] / max(20, args.reports // 10):,.0f} characters on "
        "average, 20 imported)"
    )
    env = dict(os.environ, DATABASE_URL=database_create(BENCH_DB))
    env["REALICU_VAR_DIR"] = tempfile.mkdtemp(prefix="realicu-bench-")
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--part", "import", "--folder", str(folder)],
            env=env,
            capture_output=True,
            text=True,
        )
    finally:
        database_drop(BENCH_DB)
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    notes = r["radiology"] + r["discharge"]
    read = args.reports + max(20, args.reports // 10)
    print(
        f"MIMIC-IV import with notes (PostgreSQL): {r['seconds']:.1f} s for "
        f"{r['events']:,} events, of which {r['radiology']:,} radiology reports and "
        f"{r['discharge']} discharge summaries; {notes / r['seconds']:,.0f} notes "
        f"imported/s, {read / r['seconds']:,.0f} note rows read/s (whole import "
        f"timed); peak memory {r['peak_mb']:,.0f} MB"
    )


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
