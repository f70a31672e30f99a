"""Following a fanned-out build (windows.builds) from the command line: one
progress line, rewritten in place, until the run ends."""

from __future__ import annotations

import time

from django.core.management.base import CommandError

from windows.builds import OPEN, build_run_progress
from windows.models import BuildRun

FOLLOW_SECONDS = 1.0


def _line(progress: dict, started: float, width: int = 30) -> str:
    filled = int(width * progress["percent"] / 100)
    elapsed = time.monotonic() - started
    return (
        f"\r[{'#' * filled}{'.' * (width - filled)}] {progress['percent']:3d}% "
        f"{progress['done']}/{progress['total']} stays · batches "
        f"{progress['batches_done']}/{progress['batches']} · "
        f"{progress['workers']} workers busy · {progress['state']} "
        f"{elapsed:6.1f}s   "
    )


def build_run_follow(*, run: BuildRun, stdout, stream) -> BuildRun:
    """Draw the run's progress on ``stream`` until it ends; Ctrl-C stops
    following (the workers go on). Raises CommandError when the run failed."""
    started = time.monotonic()
    stdout.write(
        f"Build {run.pk} ({run.get_kind_display().lower()}): {run.stays_total} stays "
        f"in {run.batches.count()} batches, queued for the workers."
    )
    try:
        while True:
            run.refresh_from_db()
            progress = build_run_progress(run=run)
            stream.write(_line(progress, started))
            stream.flush()
            if progress["state"] not in OPEN:
                break
            time.sleep(FOLLOW_SECONDS)
    except KeyboardInterrupt:
        stream.write("\n")
        stdout.write(f"Stopped following; build {run.pk} goes on on the workers.")
        return run
    stream.write("\n")
    run.refresh_from_db()
    if run.error:
        raise CommandError(f"Build {run.pk} failed: {run.error}")
    return run
