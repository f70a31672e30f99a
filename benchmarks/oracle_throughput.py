"""Oracle throughput: 2,000 windows labelled by an OpenAI-compatible backbone
against the fake server (tests/oracle/fake_llm.py, 300 ms per reply), on 2
Celery worker processes on Redis. Prints windows per minute, the p95 latency of
a window's request (OracleLabel.latency_ms: sending to reply, summed over
retries, without the wait for a concurrency slot), the p95 latency of a chunk
task (its run time on the worker, as Celery logs it), and the workers' peak
memory (RSS high-water mark).

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... \\
        .venv/bin/python benchmarks/oracle_throughput.py [--windows 2000]

The database must be migrated (manage.py migrate); the benchmark makes its own
stays (factories) once, in a cohort named ``oracle-throughput``, and reuses them.
Target (issue 6): 1,000 windows per minute or more.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from oracle import services  # noqa: E402
from oracle.models import Backbone, BackboneKind, OracleLabel, OracleRun, RunState  # noqa: E402
from tests.factories import make_admission, make_events, make_stay  # noqa: E402
from tests.oracle.fake_llm import FakeLLM  # noqa: E402
from windows.models import Cohort, CohortStay, CohortStratum, Window  # noqa: E402
from windows.windowing import windows_build  # noqa: E402

COHORT = "oracle-throughput"
WINDOWS_PER_STAY = 50  # a 100-h stay: windows every 2 h


def cohort_get_or_build(n_windows: int) -> Cohort:
    cohort = Cohort.objects.filter(name=COHORT).first()
    if cohort is not None:
        have = Window.objects.filter(stay__cohort_stays__cohort=cohort).count()
        if have == n_windows:
            return cohort
        cohort.delete()
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


def start_worker(index: int, env: dict, log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"oracle-worker-{index}.log", "w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "realicu_web",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "-n",
            f"oracle-bench-{index}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="The backbone's requests in flight, for the whole run.",
    )
    parser.add_argument(
        "--rpm",
        type=int,
        default=6000,
        help="The backbone's requests per minute, for the whole run.",
    )
    parser.add_argument("--chunk-size", type=int, default=100)
    args = parser.parse_args()
    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith(
        "redis"
    ):
        sys.exit("Set DATABASE_URL to PostgreSQL and CELERY_BROKER_URL to Redis.")

    cohort = cohort_get_or_build(args.windows)
    admin = get_user_model().objects.filter(is_superuser=True).first() or (
        get_user_model().objects.create_superuser("oracle-bench", password=None)
    )
    fake = FakeLLM(latency=args.latency).start()
    backbone, _ = Backbone.objects.update_or_create(
        name="fake-throughput",
        defaults={
            "kind": BackboneKind.OPENAI,
            "base_url": fake.base_url,
            "model": "fake",
            "concurrency": args.concurrency,
            "requests_per_minute": args.rpm,
            "max_retries": 2,
        },
    )
    env = dict(os.environ)
    env.update(
        {
            "REALICU_ORACLE_LANES": str(args.workers),
            "REALICU_ORACLE_CHUNK_SIZE": str(args.chunk_size),
        }
    )
    log_dir = ROOT / "var"
    log_dir.mkdir(exist_ok=True)
    workers = [start_worker(i, env, log_dir) for i in range(args.workers)]
    try:
        time.sleep(4)  # the workers connect to the broker
        started = time.monotonic()
        run = services.oracle_run_create(
            admin=admin,
            name=f"throughput {args.windows}",
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
                sys.exit("\na worker died; see var/oracle-worker-*.log")
            time.sleep(0.5)
        wall = time.monotonic() - started
        print()
        rss = [peak_rss_mb(w.pid) for w in workers]
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
        fake.stop()

    latencies = sorted(
        OracleLabel.objects.filter(run=run).values_list("latency_ms", flat=True)
    )
    failed = OracleLabel.objects.filter(run=run, state="failed").count()
    p50 = latencies[len(latencies) // 2]
    chunks = chunk_seconds(log_dir, args.workers)
    in_run = (run.finished_at - run.started_at).total_seconds()
    print(
        f"run {run.pk}: {run.get_state_display()}, {len(latencies)} windows "
        f"({failed} failed)"
    )
    print(
        f"windows/minute: {len(latencies) / in_run * 60:,.0f} (first claim to last "
        f"label, {in_run:.1f} s); {len(latencies) / wall * 60:,.0f} from submit "
        f"({wall:.1f} s)"
    )
    print(
        f"per-window request latency: p50 {p50} ms, p95 {p95(latencies)} ms "
        f"(fake server latency {args.latency * 1000:.0f} ms; sending to reply, "
        f"summed over retries, no wait for a slot)"
    )
    if chunks:
        print(
            f"chunk-task latency: p50 {chunks[len(chunks) // 2]:.1f} s, p95 "
            f"{p95(chunks):.1f} s over {len(chunks)} chunk tasks of up to "
            f"{args.chunk_size} windows (run time on the worker)"
        )
    else:
        print("chunk-task latency: no chunk task found in var/oracle-worker-*.log")
    print(
        f"most requests in flight at the server: {fake.max_in_flight} "
        f"(limit {args.concurrency})"
    )
    print("peak RSS per worker: " + ", ".join(f"{m:.0f} MB" for m in rss))
    print(
        f"{args.workers} solo workers, {args.workers} lanes, chunks of "
        f"{args.chunk_size}, backbone limits {args.concurrency} in flight / "
        f"{args.rpm} per minute"
    )
    OracleRun.objects.filter(pk=run.pk).delete()


if __name__ == "__main__":
    main()
