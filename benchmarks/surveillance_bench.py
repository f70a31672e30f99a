"""Checkpoint labels of the surveillance companion (surveillance.checkpoints):
time to label the 13 checkpoints of one stay, each from the events before it,
for a generated stay (windows.concepts.synthetic: about 100 events an hour, a
release reads its first 48 h plus up to 30 h before admission).

    python benchmarks/surveillance_bench.py [--events-per-hour 100] [--repeat 3]

Needs no database. Prints events, checkpoints, seconds per stay (best of the
repeats) and the extrapolation to a cohort of 94 stays (the paper's)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-hour", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import pandas as pd

    from surveillance.checkpoints import stay_checkpoints
    from windows.concepts.synthetic import synthetic_stay

    events, intime, outtime = synthetic_stay(
        hours=60, events_per_hour=args.events_per_hour
    )
    events = events[events["time"] < intime + pd.Timedelta(hours=48)]
    best = float("inf")
    points = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        points = stay_checkpoints(events, intime=intime, outtime=outtime)
        best = min(best, time.perf_counter() - start)
    findings = sum(len(p.findings) for p in points)
    print(f"events read: {len(events)}")
    print(f"checkpoints: {len(points)} ({findings} active findings)")
    print(f"seconds per stay (best of {args.repeat}): {best:.2f}")
    print(f"ms per checkpoint: {1000 * best / max(len(points), 1):.0f}")
    print(f"94 stays, one process: {94 * best:.0f} s")


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
