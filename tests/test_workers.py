"""tests/workers.py: a worker that is not ready in time is not left behind,
nor is any process of its group."""

import os
import subprocess

import pytest

from tests import workers


def test_a_worker_not_ready_in_time_is_killed_with_its_group(tmp_path, monkeypatch):
    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(workers.subprocess, "Popen", Recorded)
    log = tmp_path / "worker.log"

    with pytest.raises(RuntimeError, match="not ready within 0.2 s"):
        workers.worker_start(log, workers.worker_env(), timeout=0.2)

    [proc] = started
    assert proc.returncode is not None  # ended and reaped
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # no process of its group is left
    assert proc.log.closed
