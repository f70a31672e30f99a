"""What ``manage.py serve`` becomes once it has built its command lines: a small
process that starts the web server and the worker, and stops both when either
stops or on Ctrl-C / SIGTERM. Run as a script (``python _supervisor.py SPEC``,
SPEC a JSON object with the commands and the address), so it imports neither
Django nor the apps: the process that only waits holds a few MB, not the
project's 200. The leading underscore keeps it out of Django's commands."""

import json
import os
import signal
import subprocess
import sys
import time


def supervise(*, commands: list[dict], address: str) -> int:
    """Start each command ({"argv": [...], "env": {...}}), wait, stop them all
    when one stops or a signal comes; returns the exit code."""
    procs = [
        subprocess.Popen(c["argv"], env={**os.environ, **c.get("env", {})})
        for c in commands
    ]
    print(f"RealICU Web at http://{address}/  (Ctrl-C stops web and worker)")
    sys.stdout.flush()

    stopping = False
    interrupted = False

    def stop():
        nonlocal stopping
        if stopping:
            return
        stopping = True
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def on_signal(*_):
        nonlocal interrupted
        interrupted = True
        stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stopping and all(p.poll() is None for p in procs):
            time.sleep(0.5)
    finally:
        stop()
        deadline = time.monotonic() + 20
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
    code = max((p.returncode or 0) for p in procs)
    if interrupted:
        return 0
    print("A process stopped by itself; both are stopped now.", file=sys.stderr)
    return code or 1


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    sys.exit(supervise(commands=spec["commands"], address=spec["address"]))
