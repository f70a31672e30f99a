"""Progress of a long job: a reporter that passes (done, total, label) to its
sinks, and a sink that draws it as one console line."""

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


class ConsoleProgress:
    """A single progress line rewritten in place: bar, counts, rate."""

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
        width = 30
        frac = done / total if total else 0
        bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
        elapsed = now - self.started
        line = f"\r[{bar}] {done}/{total} {label[:60]:<60} {elapsed:6.1f}s"
        self.stream.write(line)
        if total and done >= total:
            self.stream.write("\n")
        self.stream.flush()
