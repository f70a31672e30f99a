"""What build_concepts and build_windows share: their --inline and
--batch-stays options, and a fanned-out build (windows.builds) started and
followed from the command line: one progress line, rewritten in place, until
the run ends. When no worker takes the build's work, it says so within
``REALICU_BUILD_NO_WORKER_SECONDS`` (10 s) and again every
``REALICU_BUILD_NO_WORKER_REMIND_SECONDS`` (a minute), naming ``--inline``,
and keeps following: the work is queued, not lost."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import CommandError

from accounts.commands import service_refusals
from jobs.progress import bar_line, command_stream
from windows.builds import OPEN, build_run_create, build_run_progress
from windows.models import BuildRun

FOLLOW_SECONDS = 1.0

START_ONE = (
    "Start one (`manage.py serve` or `celery -A realicu_web worker`), or run the "
    "build in this process with --inline."
)


def no_worker_seconds() -> float:
    return float(getattr(settings, "REALICU_BUILD_NO_WORKER_SECONDS", 10))


def no_worker_remind_seconds() -> float:
    return float(getattr(settings, "REALICU_BUILD_NO_WORKER_REMIND_SECONDS", 60))


def _workers_alive() -> int | None:
    """Workers whose consumer loop passed lately (jobs.presence); None when
    that cannot be read."""
    try:
        from jobs.presence import workers_alive

        return workers_alive().count()
    except Exception:  # an older database without the presence table
        return None


def _no_worker_line(progress: dict, waited: float) -> str | None:
    """What to say when no worker is at the build: none took its work within
    the bound since it was queued, or the ones that took it went silent."""
    if progress["taken"]:
        if not progress["stalled"]:
            return None
        silent = ", ".join(progress["lost_workers"]) or "its workers"
        return (
            f"No worker has shown life on this build for "
            f"{progress['silent_seconds']} s (last: {silent}): is a worker running? "
            f"{START_ONE} The reaper queues its batches again, or Resume on the "
            "import page does."
        )
    if waited < no_worker_seconds():
        return None
    line = f"No worker has taken this build's work in {no_worker_seconds():g} s: "
    alive = _workers_alive()
    if alive:
        return (
            line + f"{alive} worker{'s are' if alive != 1 else ' is'} alive but busy "
            "with other work; it starts when one is free. To run the build in this "
            "process instead, stop here (Ctrl-C) and use --inline."
        )
    return line + "is a worker running? " + START_ONE


def _line(progress: dict, started: float) -> str:
    elapsed = time.monotonic() - started
    return bar_line(
        progress["percent"],
        f"{progress['done']}/{progress['total']} stays · batches "
        f"{progress['batches_done']}/{progress['batches']} · "
        f"{progress['workers']} workers busy · {progress['label'].lower()} "
        f"{elapsed:6.1f}s",
    )


def build_run_follow(*, run: BuildRun, stdout, stream) -> BuildRun:
    """Draw the run's progress on ``stream`` until it ends; Ctrl-C stops
    following (the workers go on). Raises CommandError when the run failed."""
    started = time.monotonic()
    said_at: float | None = None
    stdout.write(
        f"Build {run.pk} ({run.get_kind_display().lower()}): {run.stays_total} stays "
        f"in {run.batches.count()} batches, queued for the workers."
    )
    try:
        while True:
            run.refresh_from_db()
            progress = build_run_progress(run=run)
            if progress["state"] not in OPEN:
                stream.write(_line(progress, started))
                break
            now = time.monotonic()
            if said_at is None or now - said_at >= no_worker_remind_seconds():
                line = _no_worker_line(progress, now - started)
                if line:
                    stream.write(f"\n{line}\n")
                    said_at = now
            stream.write(_line(progress, started))
            stream.flush()
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


def build_options_add(parser, *, inline_help: str) -> None:
    """--inline and --batch-stays, as every build command takes them."""
    parser.add_argument("--inline", action="store_true", help=inline_help)
    parser.add_argument(
        "--batch-stays",
        type=int,
        default=None,
        help="Stays per worker batch (default: REALICU_BUILD_BATCH_STAYS).",
    )


def build_on_workers(
    command, *, kind: str, stays, params: dict, batch_stays: int | None
) -> BuildRun:
    """Queue the build for the workers and follow it to its end (a refused
    build is the command's error)."""
    with service_refusals():
        run = build_run_create(
            kind=kind, stays=stays, params=params, batch_stays=batch_stays
        )
    return build_run_follow(
        run=run, stdout=command.stdout, stream=command_stream(command)
    )
