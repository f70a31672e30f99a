"""Each pytest-xdist worker on services of its own (loaded with ``-p`` from
pytest.ini, before Django reads its settings).

`make test` runs the suite in two processes (``-n 2 --dist loadfile``: a test
file stays in one process, so module fixtures such as a demo import run once).
pytest-django gives each process its own database (``test_gw0``, ``test_gw1``);
this gives each its own Redis database for the broker and its own cache folder,
so a Celery worker started by a test of one process never takes a task queued
by the other, and a cache cleared by one is not the other's."""

import os
import re

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def _own(url: str, number: int) -> str:
    """``redis://host:port/15`` -> ``/15 - number``; a filecache folder gets a
    suffix; anything else is left as it is."""
    if url.startswith(("redis://", "rediss://")):
        match = re.search(r"/(\d+)$", url)
        base = int(match.group(1)) if match else 0
        db = (base - number) % 16
        return (url[: match.start()] if match else url.rstrip("/")) + f"/{db}"
    if url.startswith("filecache://"):
        return f"{url.rstrip('/')}-{WORKER}"
    return url


if WORKER.startswith("gw"):
    _number = int(WORKER[2:]) + 1
    for _name in ("CELERY_BROKER_URL", "CACHE_URL"):
        if os.environ.get(_name):
            os.environ[_name] = _own(os.environ[_name], _number)


# Files whose tests share one `manage.py bootstrap` of the demo (minutes): in
# one process, so it is made once.
TOGETHER = {
    "tests/test_embedded_smoke.py": "embedded",
    "tests/test_sqlite_build_concurrency.py": "embedded",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with the files of TOGETHER as one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return TOGETHER.get(path, path)

    return Scheduling(config, log)
