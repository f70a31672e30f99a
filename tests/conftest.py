"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL, set by `make test`).
The researchers' client (``client/``, pip-installed by researchers) is put on
the path here, so that any test may read a release as a researcher does."""

import sys
from pathlib import Path

import pytest

CLIENT_DIR = Path(__file__).resolve().parents[1] / "client"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))


@pytest.fixture(scope="session")
def clif_demo_dir():
    from windows.importers.clif import clif_demo_directory

    return clif_demo_directory()


@pytest.fixture(scope="session")
def embedded_bootstrap(tmp_path_factory):
    """`manage.py bootstrap` run once for the session, as `make run` runs it: the
    embedded tests each serve a copy (a bootstrap of the demo costs minutes)."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.embedded import EmbeddedBootstrap, embedded_env

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path_factory.mktemp("embedded-bootstrap")
    boot = subprocess.run(
        [sys.executable, str(root / "manage.py"), "bootstrap"],
        env=embedded_env(folder),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert boot.returncode == 0, boot.stderr[-3000:]
    return EmbeddedBootstrap(folder, boot.stdout)


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path, request):
    """A real Celery worker process on the test database and the test broker (Redis
    under `make test`), started for one test and stopped after it. It loads the
    embedding model when a task first needs it, not as it starts (seconds of a
    core per worker, a dozen workers a run), unless the test is marked
    ``warm_up``."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    )
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    env["REALICU_IMPORT_ROOTS"] = ",".join(settings.REALICU_IMPORT_ROOTS)
    warm_up = request.node.get_closest_marker("warm_up") is not None
    env["REALICU_MATCHER_WARM_UP"] = "true" if warm_up else "false"
    root = Path(__file__).resolve().parent.parent
    log_path = tmp_path / "worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "realicu_web",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    try:
        while " ready." not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the Celery worker did not start:\n" + log_path.read_text()
                )
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(autouse=True, scope="session")
def _plain_static_files(tmp_path_factory):
    """Pages name static files as written in the tests: the compressed manifest
    storage of the running app (bootstrap collects it) would otherwise switch
    to hashed names for the rest of the run as soon as a test calls bootstrap.
    The embedded smoke test checks the manifest in its own server."""
    from django.conf import settings
    from django.test.utils import override_settings

    storages = {
        **settings.STORAGES,
        "staticfiles": {
            "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        },
    }
    override = override_settings(
        STORAGES=storages, STATIC_ROOT=str(tmp_path_factory.mktemp("static"))
    )
    override.enable()
    yield
    override.disable()


@pytest.fixture(autouse=True, scope="session")
def _fresh_cache():
    """Live job progress lives in the cache; start every session without stale keys."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _no_consumer_loop():
    """Each test starts in a process without a consumer loop (jobs.liveness): a
    test that ran a broker consumer in this process (tests/test_broker_*.py)
    would otherwise leave its loop's last pass behind, and 30 s later every job
    heartbeat of a later test in the same process would be withheld."""
    from jobs.liveness import consumer_forget

    consumer_forget()
    yield
