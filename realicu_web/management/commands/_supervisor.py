"""What ``manage.py serve`` becomes once it has built its command lines: a small
process that starts the web server and the worker and keeps them up. A process
that exits, or a worker whose consumer loop stops passing (its liveness file,
touched by the loop through jobs.liveness, goes stale: a hang, a SIGSTOP, a
shutdown that never ends), is killed and started again after a backoff, while
the other keeps serving. A worker that ends with its recycle exit code (it
gave back the embedding model's memory once idle: realicu_web.celery) is
started again at once, with no backoff. Ctrl-C / SIGTERM stops both.

Run as a script (``python _supervisor.py SPEC``, SPEC a JSON object with the
commands and the address), so it imports neither Django nor the apps: the
process that only waits holds a few MB, not the project's 200. The leading
underscore keeps it out of Django's commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

# Backoff between restarts of one process: 1, 2, 4 ... 60 s; a process that ran
# this long since its last start is healthy again and restarts after 1 s.
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
HEALTHY_AFTER = 300.0


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] serve: {message}", file=sys.stderr, flush=True)


class Child:
    """One supervised command: {"name", "argv", "env", and for a worker
    "liveness_file", "liveness_stale" (seconds without a loop pass that make
    it hung), "liveness_grace" (seconds a new process has for its first
    pass) and "recycle_exit_code" (the code of an exit on purpose)}."""

    def __init__(self, spec: dict):
        self.name = spec.get("name") or os.path.basename(spec["argv"][0])
        self.argv = spec["argv"]
        self.env = {**os.environ, **spec.get("env", {})}
        self.liveness_file = spec.get("liveness_file")
        self.stale = float(spec.get("liveness_stale", 60))
        self.grace = float(spec.get("liveness_grace", 180))
        self.recycle_code = spec.get("recycle_exit_code")
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.restarts = 0
        self.backoff = BACKOFF_FIRST
        self.restart_at: float | None = None

    def start(self) -> None:
        if self.liveness_file:
            try:
                os.remove(self.liveness_file)
            except FileNotFoundError:
                pass
        self.proc = subprocess.Popen(self.argv, env=self.env)
        self.started = time.monotonic()
        self.restart_at = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def hung_for(self) -> float | None:
        """Seconds since the worker's loop last passed, when that is too long
        (or since its start, when it never passed within its grace)."""
        if not self.liveness_file or not self.running():
            return None
        age_of_process = time.monotonic() - self.started
        try:
            age = time.time() - os.stat(self.liveness_file).st_mtime
        except FileNotFoundError:
            return age_of_process if age_of_process > self.grace else None
        # A file older than the process is the previous process's.
        age = min(age, age_of_process)
        return age if age > self.stale else None

    def schedule_restart(self, why: str) -> None:
        ran = time.monotonic() - self.started
        if ran >= HEALTHY_AFTER:
            self.backoff = BACKOFF_FIRST
        delay = self.backoff
        self.backoff = min(BACKOFF_MAX, self.backoff * 2)
        self.restart_at = time.monotonic() + delay
        self.restarts += 1
        log(f"{self.name} {why}; starting it again in {delay:g} s")

    def kill(self) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGCONT)  # a stopped process too
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def terminate(self) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)


def supervise(*, commands: list[dict], address: str) -> int:
    """Start each command, keep it up, stop all on a signal; returns 0."""
    children = [Child(spec) for spec in commands]
    for child in children:
        child.start()
    print(f"RealICU Web at http://{address}/  (Ctrl-C stops web and worker)")
    sys.stdout.flush()

    stopping = False

    def on_signal(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stopping:
            now = time.monotonic()
            for child in children:
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        child.start()
                    continue
                code = child.proc.poll()
                if code is not None and code == child.recycle_code:
                    # Not a crash: its backoff stays as it was.
                    log(f"{child.name} recycled (exit code {code}); started again")
                    child.start()
                    continue
                if code is not None:
                    child.schedule_restart(f"stopped by itself (exit code {code})")
                    continue
                hung = child.hung_for()
                if hung is not None:
                    child.kill()
                    child.schedule_restart(
                        f"took no message for {hung:.0f} s (its consumer loop "
                        "stopped): killed"
                    )
            time.sleep(0.5)
    finally:
        for child in children:
            child.terminate()
        deadline = time.monotonic() + 20
        for child in children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
    return 0


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    sys.exit(supervise(commands=spec["commands"], address=spec["address"]))
