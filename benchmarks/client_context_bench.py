"""The researchers' client (client/realicu_client) reading a downloaded
release offline: time to yield every window with its bedside context, for a
generated 1,800-hour stay with a window every 30 minutes (3,600 windows, the
longest stay the other benchmarks use) and for a 72-hour one, with an action
in every window so that each window's own actions are filtered out.

    python benchmarks/client_context_bench.py [--events-per-hour 60]

Needs no database or server: the release folder is written to a temporary
directory in the release's file format (exports/building/context.py). Prints
events, windows, the total time, ms per window and the peak memory (RSS)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "client"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realicu_client import iterate_windows  # noqa: E402

INTIME = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=30)


def write_stay(folder: Path, *, stay_id: int, hours: int, per_hour: int) -> int:
    """Writes the stay's context file and window records; returns its events."""
    step = timedelta(hours=1) / per_hour
    count = hours * per_hour
    with open(folder / "context" / f"{stay_id}.jsonl", "w") as out:
        for n in range(count):
            when = INTIME + n * step
            action = n % per_hour == 0
            out.write(
                json.dumps(
                    {
                        "event_id": stay_id * 10**7 + n,
                        "time": when.isoformat(),
                        "hours_since_admit": round(n / per_hour, 4),
                        "kind": "action" if action else "observation",
                        "domain": "vitals",
                        "category": "heart_rate",
                        "name": "Heart rate",
                        "concept": "Heart rate",
                        "value_num": 88.0,
                        "unit": "bpm",
                        "value_text": None,
                        "source_table": "vitals",
                    }
                )
                + "\n"
            )
    with open(folder / "windows.jsonl", "a") as out:
        for index in range(hours * 2):
            start = INTIME + index * WINDOW
            first = int(index * 0.5 * per_hour)
            last = int((index + 1) * 0.5 * per_hour)
            own = [stay_id * 10**7 + n for n in range(first, last) if n % per_hour == 0]
            out.write(
                json.dumps(
                    {
                        "window_id": stay_id * 10**5 + index,
                        "stay_id": stay_id,
                        "window_index": index,
                        "start": start.isoformat(),
                        "end": (start + WINDOW).isoformat(),
                        "context_file": f"context/{stay_id}.jsonl",
                        "window_action_event_ids": own,
                        "labels": {},
                    }
                )
                + "\n"
            )
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-hour", type=int, default=60)
    args = parser.parse_args()
    for name, hours in (("72-hour stay", 72), ("1,800-hour stay", 1800)):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "context").mkdir()
            events = write_stay(
                folder, stay_id=1, hours=hours, per_hour=args.events_per_hour
            )
            started = time.perf_counter()
            windows = context_events = 0
            for window in iterate_windows(folder):
                windows += 1
                context_events += len(window.context)
            seconds = time.perf_counter() - started
        print(
            f"{name}: {events:,} events, {windows:,} windows, "
            f"{context_events:,} context events yielded; {seconds:.2f} s, "
            f"{1000 * seconds / windows:.2f} ms per window"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
