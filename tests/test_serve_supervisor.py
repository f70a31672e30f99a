"""The supervisor of ``manage.py serve`` (realicu_web/management/commands/
_supervisor.py) keeps web and worker up: a process that dies is started again,
a worker whose loop stops touching its liveness file (SIGSTOP, a hang) is
killed and started again, the other process keeps running throughout, and
Ctrl-C stops both. Stand-in commands play web and worker, so the behaviour is
the supervisor's alone; tests/test_embedded_smoke.py kills the real worker."""

import os
import signal
import sys
from pathlib import Path

from tests.supervised import pids_written, supervisor_start, supervisor_stop
from tests.workers import wait_for

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


def restarted(tmp_path: Path, times: int):
    """Whether the worker stand-in was started ``times`` times after its first."""
    return lambda: len(pids_written(tmp_path / "worker.pids")) == times + 1


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
    wait_for(lambda: pids_written(tmp_path / "worker.pids"), "a worker pid", 20)
    wait_for(lambda: pids_written(tmp_path / "web.pids"), "a web pid", 20)
    return proc


def test_a_killed_worker_is_started_again_while_the_web_keeps_running(tmp_path):
    proc = _start(tmp_path)
    try:
        worker = pids_written(tmp_path / "worker.pids")[0]
        web = pids_written(tmp_path / "web.pids")[0]
        os.kill(worker, signal.SIGKILL)
        wait_for(restarted(tmp_path, 1), "the worker started again", 20)
        assert _alive(pids_written(tmp_path / "worker.pids")[1])
        assert _alive(web) and pids_written(tmp_path / "web.pids") == [web]
        log = (tmp_path / "supervisor.log").read_text()
        assert "worker stopped by itself (exit code -9)" in log
    finally:
        supervisor_stop(proc)


def test_a_stopped_worker_is_killed_and_started_again(tmp_path):
    proc = _start(tmp_path, stale=2.0)
    try:
        worker = pids_written(tmp_path / "worker.pids")[0]
        os.kill(worker, signal.SIGSTOP)
        wait_for(restarted(tmp_path, 1), "the worker started again", 20)
        assert not _alive(worker)
        assert _alive(pids_written(tmp_path / "worker.pids")[1])
        log = (tmp_path / "supervisor.log").read_text()
        assert "its consumer loop stopped): killed" in log
        assert len(pids_written(tmp_path / "web.pids")) == 1
    finally:
        supervisor_stop(proc)


def test_restarts_back_off(tmp_path):
    proc = _start(tmp_path)
    try:
        for n in range(1, 4):
            pid = pids_written(tmp_path / "worker.pids")[-1]
            os.kill(pid, signal.SIGKILL)
            wait_for(restarted(tmp_path, n), f"restart {n}", 30)
        log = (tmp_path / "supervisor.log").read_text()
        delays = [
            line.rsplit(" in ", 1)[1] for line in log.splitlines() if " in " in line
        ]
        assert delays[:3] == ["1 s", "2 s", "4 s"], log
    finally:
        supervisor_stop(proc)


def test_sigterm_stops_web_and_worker(tmp_path):
    proc = _start(tmp_path)
    worker = pids_written(tmp_path / "worker.pids")[0]
    web = pids_written(tmp_path / "web.pids")[0]
    supervisor_stop(proc)
    assert proc.returncode == 0
    wait_for(
        lambda: not _alive(worker) and not _alive(web), "web and worker to end", 10
    )
