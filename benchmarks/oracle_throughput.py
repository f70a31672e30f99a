"""Oracle throughput: windows labelled by an OpenAI-compatible backbone against
the fake server (tests/oracle/fake_llm.py, 300 ms per reply), on 2 Celery worker
processes on Redis, twice: with the limits a new backbone ships with (the
Backbone model's defaults for requests in flight and per minute, read from the
model, and the REALICU_ORACLE_LANES / REALICU_ORACLE_CHUNK_SIZE settings), then
with raised limits (--raised-concurrency, --raised-rpm). Prints, for each,
windows per minute, the p95 latency of a window's request (OracleLabel.latency_ms:
sending to reply, summed over retries, without the wait for a concurrency slot),
the p95 latency of a chunk task (its run time on the worker, as Celery logs it),
and the workers' peak memory (RSS high-water mark).

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... \\
        .venv/bin/python benchmarks/oracle_throughput.py [--windows 1000]

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there, ``<name>_oracle_throughput``, with its stays
(factories: 50 windows a stay). The shipped default of requests per minute caps
a run at that many windows a minute whatever the server's speed; the raised run
shows what the workers and the fake server reach without that cap.

Left out: a real model's latency and token limits (the fake server answers
every request in --latency seconds), prompt building on real stays (the
factories' stays have two series), and the workers' start (measured from the
run's first claim to its last label, and from submit).
Target (issue 6): 1,000 windows per minute or more, with raised limits.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._database import (  # noqa: E402 - after the path
    database_create,
    database_done,
    database_name,
)
from benchmarks._worker import worker_start, workers_stop  # noqa: E402

BENCH_DB = database_name("oracle_throughput")

COHORT = "oracle-throughput"
WINDOWS_PER_STAY = 50  # a 100-h stay: windows every 2 h


def cohort_build(n_windows: int):
    from tests.factories import make_admission, make_events, make_stay
    from windows.models import Cohort, CohortStay, CohortStratum, Window
    from windows.windowing import windows_build

    cohort = Cohort.objects.create(name=COHORT, seed=0, target_size=0)
    stays = math.ceil(n_windows / WINDOWS_PER_STAY)
    made = 0
    for n in range(stays):
        want = min(WINDOWS_PER_STAY, n_windows - made)
        hours = 2 * want - 1.0
        stay = make_stay(admission=make_admission(), hours=hours)
        make_events(admission=stay.admission, count=int(hours), start=stay.intime)
        make_events(
            admission=stay.admission,
            count=int(hours),
            start=stay.intime,
            category="map",
            name="MAP",
            value_num=70.0,
            unit="mmHg",
        )
        built = windows_build(stay=stay)
        extra = made + len(built) - n_windows
        if extra > 0:  # exactly n_windows: the last stay's latest windows go
            Window.objects.filter(
                pk__in=[w.pk for w in sorted(built, key=lambda w: w.index)[-extra:]]
            ).delete()
        made += min(len(built), n_windows - made)
        CohortStay.objects.create(
            cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_LONG
        )
        print(f"\rbuilding stays {n + 1}/{stays}", end="", flush=True)
    print()
    return cohort


# Celery's own line for each task that returned: its run time on the worker.
CHUNK_DONE = re.compile(
    r"Task oracle\.tasks\.oracle_run_chunk_task\[[^\]]+\] succeeded in "
    r"([0-9.]+)s: '(\w+)'"
)


def chunk_seconds(log_dir: Path, workers: int) -> list[float]:
    """Run times of the chunk tasks that labelled windows (not those that found
    nothing to claim and only re-queued themselves)."""
    times = []
    for index in range(workers):
        text = (log_dir / f"oracle-worker-{index}.log").read_text()
        times += [
            float(seconds)
            for seconds, outcome in CHUNK_DONE.findall(text)
            if outcome in ("labelled", "stopped")
        ]
    return sorted(times)


def p95(values: list) -> float:
    return values[min(len(values) - 1, int(math.ceil(0.95 * len(values))) - 1)]


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return math.nan


def run_once(
    *, cohort, admin, args, concurrency: int, rpm: int, lanes: int, chunk: int
) -> dict:
    """One Oracle run over ``cohort`` on fresh workers with these limits."""
    from oracle import services
    from oracle.models import Backbone, BackboneKind, OracleLabel, RunState
    from tests.oracle.fake_llm import FakeLLM

    fake = FakeLLM(latency=args.latency).start()
    backbone, _ = Backbone.objects.update_or_create(
        name=f"fake {concurrency}/{rpm}",
        defaults={
            "kind": BackboneKind.OPENAI,
            "base_url": fake.base_url,
            "model": "fake",
            "concurrency": concurrency,
            "requests_per_minute": rpm,
        },
    )
    env = dict(os.environ)
    env.update(
        {"REALICU_ORACLE_LANES": str(lanes), "REALICU_ORACLE_CHUNK_SIZE": str(chunk)}
    )
    log_dir = Path(tempfile.mkdtemp(prefix="realicu-oracle-bench-"))
    workers = [
        worker_start(f"oracle-bench-{i}", env, log_dir / f"oracle-worker-{i}.log")
        for i in range(args.workers)
    ]
    try:
        time.sleep(4)  # the workers connect to the broker
        started = time.monotonic()
        run = services.oracle_run_create(
            admin=admin,
            name=f"throughput {concurrency}/{rpm}",
            backbone=backbone,
            cohort=cohort,
        )
        while True:
            run.refresh_from_db()
            done = OracleLabel.objects.filter(run=run).count()
            elapsed = time.monotonic() - started
            print(
                f"\r{done}/{run.total_windows} windows, {elapsed:5.1f} s, "
                f"{done / elapsed * 60 if elapsed else 0:,.0f}/min   ",
                end="",
                flush=True,
            )
            if run.state not in (RunState.QUEUED, RunState.RUNNING):
                break
            if any(w.poll() is not None for w in workers):
                sys.exit(f"\na worker died; see {log_dir}/oracle-worker-*.log")
            time.sleep(0.5)
        wall = time.monotonic() - started
        print()
        rss = [peak_rss_mb(w.pid) for w in workers]
    finally:
        workers_stop(workers, timeout=30)
        fake.stop()

    latencies = sorted(
        OracleLabel.objects.filter(run=run).values_list("latency_ms", flat=True)
    )
    return {
        "run": run,
        "state": run.get_state_display(),
        "labels": len(latencies),
        "failed": OracleLabel.objects.filter(run=run, state="failed").count(),
        "in_run": (run.finished_at - run.started_at).total_seconds(),
        "wall": wall,
        "p50": latencies[len(latencies) // 2] if latencies else math.nan,
        "p95": p95(latencies) if latencies else math.nan,
        "chunks": chunk_seconds(log_dir, args.workers),
        "in_flight": fake.max_in_flight,
        "rss": rss,
        "concurrency": concurrency,
        "rpm": rpm,
        "lanes": lanes,
        "chunk": chunk,
    }


def report(label: str, r: dict, args) -> None:
    print(
        f"{label}: {r['concurrency']} in flight, {r['rpm']:,} per minute, "
        f"{r['lanes']} lanes, chunks of {r['chunk']}"
    )
    print(
        f"  run {r['run'].pk}: {r['state']}, {r['labels']} windows "
        f"({r['failed']} failed)"
    )
    print(
        f"  windows/minute: {r['labels'] / r['in_run'] * 60:,.0f} (first claim to "
        f"last label, {r['in_run']:.1f} s); {r['labels'] / r['wall'] * 60:,.0f} "
        f"from submit ({r['wall']:.1f} s)"
    )
    print(
        f"  per-window request latency: p50 {r['p50']} ms, p95 {r['p95']} ms "
        f"(fake server latency {args.latency * 1000:.0f} ms; sending to reply, "
        f"summed over retries, no wait for a slot)"
    )
    chunks = r["chunks"]
    if chunks:
        print(
            f"  chunk-task latency: p50 {chunks[len(chunks) // 2]:.1f} s, p95 "
            f"{p95(chunks):.1f} s over {len(chunks)} chunk tasks (run time on "
            f"the worker)"
        )
    else:
        print("  chunk-task latency: no chunk task found in the workers' logs")
    print(
        f"  most requests in flight at the server: {r['in_flight']} "
        f"(limit {r['concurrency']})"
    )
    print("  peak RSS per worker: " + ", ".join(f"{m:.0f} MB" for m in r["rss"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--raised-concurrency",
        type=int,
        default=32,
        help="Requests in flight of the raised run (the shipped run reads its own).",
    )
    parser.add_argument(
        "--raised-rpm",
        type=int,
        default=6000,
        help="Requests per minute of the raised run.",
    )
    parser.add_argument(
        "--raised-chunk-size",
        type=int,
        default=100,
        help="Windows per chunk task of the raised run.",
    )
    parser.add_argument(
        "--only", choices=("shipped", "raised"), help="run one of the two"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        sys.exit("Set CELERY_BROKER_URL to Redis (the workers share it).")

    os.environ["DATABASE_URL"] = database_create(BENCH_DB)
    os.environ["REALICU_VAR_DIR"] = tempfile.mkdtemp(prefix="realicu-oracle-var-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from oracle.models import Backbone

    try:
        call_command("migrate", verbosity=0)
        cohort = cohort_build(args.windows)
        admin = get_user_model().objects.create_superuser("oracle-bench", password=None)
        fields = Backbone._meta
        shipped = {
            "concurrency": fields.get_field("concurrency").default,
            "rpm": fields.get_field("requests_per_minute").default,
            "lanes": settings.REALICU_ORACLE_LANES,
            "chunk": settings.REALICU_ORACLE_CHUNK_SIZE,
        }
        raised = {
            "concurrency": args.raised_concurrency,
            "rpm": args.raised_rpm,
            "lanes": args.workers,
            "chunk": args.raised_chunk_size,
        }
        results = []
        for label, limits in (("shipped defaults", shipped), ("raised", raised)):
            if args.only and not label.startswith(args.only):
                continue
            print(f"{label}:")
            results.append(
                (label, run_once(cohort=cohort, admin=admin, args=args, **limits))
            )
        print()
        print(
            f"Oracle throughput, {args.windows:,} windows, {args.workers} solo "
            f"workers, fake server {args.latency * 1000:.0f} ms a reply"
        )
        for label, r in results:
            report(label, r, args)
    finally:
        database_done(BENCH_DB, keep=args.keep)


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
