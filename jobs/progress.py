"""Progress of a long job: a reporter that passes (done, total, label) to its
sinks, a sink that draws it as one console line on a management command's
stream, and the line's bar that the commands following a job on the workers
draw too."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

ProgressCallback = Callable[[int, int, str], None]


@dataclass
class Progress:
    """Reports (done, total, label) to its sinks: a console line, a job row."""

    sinks: list[ProgressCallback] = field(default_factory=list)
    done: int = 0
    total: int = 0

    def start(self, total: int, label: str = "") -> None:
        self.total, self.done = total, 0
        self._emit(label)

    def advance(self, n: int = 1, label: str = "") -> None:
        self.done += n
        self._emit(label)

    def _emit(self, label: str) -> None:
        for sink in self.sinks:
            sink(self.done, self.total, label)


def percent_of(done: int, total: int) -> int:
    """``done`` as a whole percent of ``total`` (0 of nothing, at most 100)."""
    return min(100, round(100 * done / total)) if total else 0


def bar_line(percent: int, detail: str, width: int = 30) -> str:
    """A progress line to rewrite in place (it starts with a carriage return):
    a bar of ``width`` filled to ``percent``, the percent, then ``detail``."""
    filled = int(width * percent / 100)
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {percent:3d}% {detail}   "


class ConsoleProgress:
    """A single progress line rewritten in place: bar, counts, label, time."""

    def __init__(self, stream=None, min_interval: float = 0.2) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.last = 0.0
        self.min_interval = min_interval

    def __call__(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if now - self.last < self.min_interval and done < total:
            return
        self.last = now
        elapsed = now - self.started
        self.stream.write(
            bar_line(
                percent_of(done, total),
                f"{done}/{total} {label[:60]:<60} {elapsed:6.1f}s",
            )
        )
        if total and done >= total:
            self.stream.write("\n")
        self.stream.flush()


def command_stream(command):
    """Where a management command draws its progress line: the raw stream under
    its stderr, as Django's wrapper would end each rewritten line with a
    newline."""
    return getattr(command.stderr, "_out", None) or sys.stderr


def command_progress(command) -> Progress:
    """A Progress drawn as one console line on the command's stream."""
    return Progress(sinks=[ConsoleProgress(stream=command_stream(command))])
