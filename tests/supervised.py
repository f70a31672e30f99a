"""``manage.py serve``'s supervisor (realicu_web/management/commands/
_supervisor.py) run on its own for the tests, over a web stand-in that writes
its pid and a worker command the test gives; the pids a stand-in wrote."""

import json
import signal
import subprocess
import sys
from pathlib import Path

SUPERVISOR = (
    Path(__file__).resolve().parent.parent
    / "realicu_web"
    / "management"
    / "commands"
    / "_supervisor.py"
)

# A web stand-in: writes its pid, then idles.
WEB = """
import os, sys, time
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
while True:
    time.sleep(0.2)
"""


def pids_written(path: Path) -> list[int]:
    """The pids a stand-in wrote to ``path``, one a start, oldest first."""
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def supervisor_start(tmp_path: Path, worker: dict) -> subprocess.Popen:
    """The supervisor of the web stand-in (its pids in web.pids) and ``worker``
    (a command's spec, named worker), logging to supervisor.log."""
    spec = {
        "address": "127.0.0.1:0",
        "commands": [
            {
                "name": "web",
                "argv": [sys.executable, "-c", WEB, str(tmp_path / "web.pids")],
            },
            {"name": "worker", **worker},
        ],
    }
    with open(tmp_path / "supervisor.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, str(SUPERVISOR), json.dumps(spec)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def supervisor_stop(proc: subprocess.Popen) -> None:
    """SIGTERM, as Ctrl-C's stop, and the supervisor's exit within 30 s."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
