"""The embedded default (`make run`: SQLite and the filesystem broker under
REALICU_VAR_DIR, no server configured) in tests that start its processes; the
session's bootstrapped folder is the fixture ``embedded_bootstrap``
(tests/conftest.py); and the one way those tests start a web server process on
a free loopback port and stop it."""

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from loopback import free_port

ROOT = Path(__file__).resolve().parent.parent

# The demo accounts' password in the embedded default's tests.
EMBEDDED_PASSWORD = "embedded-test-Password-1"


def embedded_env(var) -> dict:
    """The environment of the embedded default (`make run`) in the folder ``var``:
    no database, broker or cache configured, so SQLite and the filesystem broker
    under REALICU_VAR_DIR."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CACHE_URL",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    env.update(
        REALICU_VAR_DIR=str(var),
        REALICU_ADMIN_PASSWORD=EMBEDDED_PASSWORD,
        REALICU_PHYSICIAN_PASSWORD=EMBEDDED_PASSWORD,
        REALICU_RESEARCHER_PASSWORD=EMBEDDED_PASSWORD,
    )
    return env


class EmbeddedBootstrap:
    """A folder on which `manage.py bootstrap` ran (the CLIF demo imported, its
    windows, concept tracks and cohort, the demo accounts), and its output."""

    def __init__(self, folder, stdout: str):
        self.folder = folder
        self.stdout = stdout

    def copy(self, tmp_path_factory, name: str):
        """A folder of its own holding the bootstrapped database and files."""
        var = tmp_path_factory.mktemp(name)
        shutil.copytree(self.folder, var, dirs_exist_ok=True)
        return var


def server_start(
    command: Callable[[str], list[str]],
    env: dict,
    log_path: Path,
    *,
    timeout: float = 60.0,
) -> tuple[subprocess.Popen, str]:
    """The process of ``command(bind)`` (its argv, ``bind`` "127.0.0.1:<a free
    port>") run in the repository with ``env``, its output in ``log_path``, and
    its base URL, once its sign-in page answers. A process that exits first, or
    does not answer within ``timeout`` seconds (it is killed then), fails the
    test with the end of its log."""
    port = free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen(
        command(f"127.0.0.1:{port}"),
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.log = log
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + "/accounts/login/", timeout=5).read()
            return proc, base
        except OSError:
            if proc.poll() is not None:
                log.close()
                raise AssertionError(
                    f"the server exited ({proc.returncode}):\n"
                    + Path(log_path).read_text()[-3000:]
                ) from None
            time.sleep(0.3)
    server_stop(proc, timeout=0)
    raise AssertionError(
        "the server did not answer:\n" + Path(log_path).read_text()[-3000:]
    )


def serve_start(env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    """``manage.py serve`` (web server and worker) with ``env``, as server_start;
    the worker's start on a loaded machine may take a couple of minutes."""
    return server_start(
        lambda bind: [sys.executable, str(ROOT / "manage.py"), "serve", "--bind", bind],
        env,
        log_path,
        timeout=120,
    )


def server_stop(proc: subprocess.Popen, *, timeout: float = 30) -> None:
    """SIGTERM (serve stops its web server and its worker), then SIGKILL if the
    process is still running after ``timeout`` seconds; its log is closed."""
    if proc.poll() is None and timeout > 0:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    log = getattr(proc, "log", None)
    if log is not None and not log.closed:
        log.close()
