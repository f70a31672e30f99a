"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL, set by `make test`).
The researchers' client (``client/``, pip-installed by researchers) is put on
the path here, so that any test may read a release as a researcher does."""

import sys
from pathlib import Path

import pytest

CLIENT_DIR = Path(__file__).resolve().parents[1] / "client"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # make_user sets a password; the production hasher costs ~1 s per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin_user(db):
    from accounts.roles import Role
    from tests.factories import make_user

    return make_user(staff=True, role=Role.ADMIN)


@pytest.fixture
def researcher(db):
    from accounts.roles import Role
    from tests.factories import make_user

    return make_user(role=Role.RESEARCHER)


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
    ``warm_up``. It takes only the messages sent from the test's start: the
    broker's queues are purged before it starts."""
    from realicu_web.celery import app
    from tests.workers import worker_env, worker_start, worker_stop

    # Messages an earlier test left on the shared test broker (sent while no
    # worker ran) would reach this test's worker before its own.
    app.control.purge()
    warm_up = request.node.get_closest_marker("warm_up") is not None
    env = worker_env(REALICU_MATCHER_WARM_UP="true" if warm_up else "false")
    proc = worker_start(tmp_path / "worker.log", env)
    try:
        yield proc
    finally:
        worker_stop(proc)


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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on a free loopback port, for the whole session."""
    import socket
    import subprocess
    import time

    from loopback import free_port

    port = free_port()
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "moto's S3 server did not start:\n" + log_path.read_text()
                ) from None
            time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def s3(s3_server, settings, monkeypatch):
    """A new bucket, chosen by settings as the object store; the same settings
    in the environment, for worker processes started by the test."""
    import uuid

    import boto3

    bucket = f"realicu-{uuid.uuid4().hex[:12]}"
    env = {
        "REALICU_S3_BUCKET": bucket,
        "REALICU_S3_ENDPOINT_URL": s3_server,
        "REALICU_S3_REGION": "us-east-1",
        "REALICU_S3_ACCESS_KEY_ID": "testing",
        "REALICU_S3_SECRET_ACCESS_KEY": "testing",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = {
        **settings.STORAGES,
        "realicu": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": s3_server,
                "region_name": "us-east-1",
                "access_key": "testing",
                "secret_key": "testing",
                "file_overwrite": True,
                "default_acl": None,
                "querystring_auth": True,
                "signature_version": "s3v4",
                "addressing_style": "path",
            },
        },
    }

    class Bucket:
        name = bucket
        environment = env

        @staticmethod
        def keys(prefix=""):
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            )
            return sorted(o["Key"] for p in pages for o in p.get("Contents", []))

        @staticmethod
        def read(key) -> bytes:
            return client.get_object(Bucket=bucket, Key=key)["Body"].read()

        @staticmethod
        def write(key, data: bytes) -> None:
            client.put_object(Bucket=bucket, Key=key, Body=data)

    return Bucket
