"""The supervisor of ``manage.py serve`` (realicu_web/management/commands/
_supervisor.py) keeps web and worker up: a process that dies is started again,
a worker whose loop stops touching its liveness file (SIGSTOP, a hang) is
killed and started again, the other process keeps running throughout, and
Ctrl-C stops both. Stand-in commands play web and worker, so the behaviour is
the supervisor's alone; tests/test_embedded_smoke.py kills the real worker."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SUPERVISOR = (
    Path(__file__).resolve().parent.parent
    / "realicu_web"
    / "management"
    / "commands"
    / "_supervisor.py"
)

# A worker stand-in: writes its pid, then touches its liveness file every
# 0.2 s as a consumer loop would.
WORKER = """
import os, sys, time
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
while True:
    with open(os.environ["REALICU_WORKER_LIVENESS_FILE"], "a"):
        pass
    os.utime(os.environ["REALICU_WORKER_LIVENESS_FILE"])
    time.sleep(0.2)
"""
WEB = """
import os, sys, time
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
while True:
    time.sleep(0.2)
"""


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie awaiting its parent counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


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


def _start(tmp_path: Path, stale: float = 2.0):
    liveness = tmp_path / "worker.alive"
    worker = {
        "argv": [sys.executable, "-c", WORKER, str(tmp_path / "worker.pids")],
        "env": {"REALICU_WORKER_LIVENESS_FILE": str(liveness)},
        "liveness_file": str(liveness),
        "liveness_stale": stale,
        "liveness_grace": 10,
    }
    proc = supervisor_start(tmp_path, worker)
    assert _wait(lambda: _pids(tmp_path / "worker.pids"), 20)
    assert _wait(lambda: _pids(tmp_path / "web.pids"), 20)
    return proc


def _stop(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def test_a_killed_worker_is_started_again_while_the_web_keeps_running(tmp_path):
    proc = _start(tmp_path)
    try:
        worker = _pids(tmp_path / "worker.pids")[0]
        web = _pids(tmp_path / "web.pids")[0]
        os.kill(worker, signal.SIGKILL)
        assert _wait(lambda: len(_pids(tmp_path / "worker.pids")) == 2, 20)
        assert _alive(_pids(tmp_path / "worker.pids")[1])
        assert _alive(web) and _pids(tmp_path / "web.pids") == [web]
        log = (tmp_path / "supervisor.log").read_text()
        assert "worker stopped by itself (exit code -9)" in log
    finally:
        _stop(proc)


def test_a_stopped_worker_is_killed_and_started_again(tmp_path):
    proc = _start(tmp_path, stale=2.0)
    try:
        worker = _pids(tmp_path / "worker.pids")[0]
        os.kill(worker, signal.SIGSTOP)
        assert _wait(lambda: len(_pids(tmp_path / "worker.pids")) == 2, 20)
        assert not _alive(worker)
        assert _alive(_pids(tmp_path / "worker.pids")[1])
        log = (tmp_path / "supervisor.log").read_text()
        assert "its consumer loop stopped): killed" in log
        assert len(_pids(tmp_path / "web.pids")) == 1
    finally:
        _stop(proc)


def test_restarts_back_off(tmp_path):
    proc = _start(tmp_path)
    try:
        for n in range(1, 4):
            pid = _pids(tmp_path / "worker.pids")[-1]
            os.kill(pid, signal.SIGKILL)
            assert _wait(lambda n=n: len(_pids(tmp_path / "worker.pids")) == n + 1, 30)
        log = (tmp_path / "supervisor.log").read_text()
        delays = [
            line.rsplit(" in ", 1)[1] for line in log.splitlines() if " in " in line
        ]
        assert delays[:3] == ["1 s", "2 s", "4 s"], log
    finally:
        _stop(proc)


def test_sigterm_stops_web_and_worker(tmp_path):
    proc = _start(tmp_path)
    worker = _pids(tmp_path / "worker.pids")[0]
    web = _pids(tmp_path / "web.pids")[0]
    _stop(proc)
    assert proc.returncode == 0
    assert _wait(lambda: not _alive(worker) and not _alive(web), 10)
