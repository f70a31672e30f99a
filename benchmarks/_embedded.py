"""The embedded default as the benchmarks run it (``make run``'s setup): a var
folder bootstrapped with the CLIF demo, and ``manage.py serve`` (gunicorn and
the Celery worker under one supervisor) as a subprocess, with the memory of
its process tree."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks._server import processes
from loopback import free_port

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PASSWORD = "embedded bench pass 1"
MANAGE = [sys.executable, str(ROOT / "manage.py")]
MB = 2**20


def embedded_env(var: Path) -> dict:
    """The environment of ``make run``: nothing configured but the var folder
    and the demo passwords. This process takes it too (its own reads of the
    database go to the same SQLite file)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "DJANGO_DEBUG")
    }
    env.update(
        REALICU_VAR_DIR=str(var),
        DJANGO_SETTINGS_MODULE="realicu_web.settings",
        REALICU_ADMIN_PASSWORD=PASSWORD,
        REALICU_PHYSICIAN_PASSWORD=PASSWORD,
        REALICU_RESEARCHER_PASSWORD=PASSWORD,
    )
    os.environ.update(env)
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
        os.environ.pop(key, None)
    return env


def bootstrap(env: dict) -> float:
    """``manage.py bootstrap`` (the demo import, as ``make run`` does); its
    seconds. A failure stops the benchmark with the command's error."""
    started = time.perf_counter()
    boot = subprocess.run(
        [*MANAGE, "bootstrap"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if boot.returncode != 0:
        raise SystemExit(f"bootstrap failed:\n{boot.stderr[-3000:]}")
    return time.perf_counter() - started


def serve_start(env: dict, log, log_path: Path, *extra: str):
    """``manage.py serve`` on a free loopback port, its output to ``log``,
    once its login page answers: (the process, its base URL)."""
    import requests

    base = f"http://{HOST}:{free_port()}"
    serve = subprocess.Popen(
        [*MANAGE, "serve", "--bind", base.removeprefix("http://"), *extra],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    while True:
        if serve.poll() is not None:
            raise SystemExit(f"serve stopped; see {log_path}")
        try:
            if requests.get(f"{base}/accounts/login/", timeout=2).ok:
                return serve, base
        except requests.RequestException:
            pass
        time.sleep(0.2)


def _tree(root: int) -> dict[int, str]:
    procs = processes()
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, (ppid, _, _) in procs.items() if ppid == pid]
        tree.update(children)
        frontier += children
    return {pid: procs[pid][1] for pid in tree if pid in procs}


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


# Libraries with native code whose mapping in a process says it imported them
# (issue 35: the web should hold none, the worker only what it needs).
HEAVY_LIBRARIES = (
    "torch",
    "pandas",
    "pyarrow",
    "scipy",
    "sklearn",
    "statsmodels",
    "tokenizers",
)


def heavy_libraries(pid: int) -> list[str]:
    """Which of HEAVY_LIBRARIES the process has mapped (its /proc maps)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return [lib for lib in HEAVY_LIBRARIES if f"/site-packages/{lib}/" in maps]


def serve_libraries(serve_pid: int) -> dict[str, list[str]]:
    """The heavy libraries of serve's processes, by command (web, worker)."""
    found: dict[str, set[str]] = {"web": set(), "worker": set()}
    for pid, command in _tree(serve_pid).items():
        if pid != serve_pid:
            group = "web" if "gunicorn" in command else "worker"
            found[group].update(heavy_libraries(pid))
    return {group: sorted(libs) for group, libs in found.items()}


def serve_memory(serve_pid: int) -> dict[str, list[int]]:
    """RSS, PSS (bytes) and the number of processes of serve's web, worker and
    supervisor."""
    groups = {"web": [0, 0, 0], "worker": [0, 0, 0], "supervisor": [0, 0, 0]}
    for pid, command in _tree(serve_pid).items():
        # serve's pid is its supervisor, whose arguments name both commands.
        if pid == serve_pid:
            group = "supervisor"
        else:
            group = "web" if "gunicorn" in command else "worker"
        rss, pss = _memory(pid)
        groups[group][0] += rss
        groups[group][1] += pss
        groups[group][2] += 1
    return groups


def consensus_watch(db: Path, campaign: int, seen: dict, stop: threading.Event):
    """Record when each window's consensus row first appears."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        while not stop.is_set():
            now = time.perf_counter()
            try:
                rows = conn.execute(
                    "SELECT window_id FROM annotation_consensuslabel "
                    "WHERE campaign_id = ?",
                    [campaign],
                ).fetchall()
            except sqlite3.OperationalError:
                rows = []
            for (window_id,) in rows:
                seen.setdefault(window_id, now)
            time.sleep(0.1)
    finally:
        conn.close()


def model_loaded_at(log: Path) -> float | None:
    """When the worker logged its embedding model loaded (realicu_web.celery),
    as a time.time() value; the log's times are local."""
    from datetime import datetime

    for line in log.read_text(errors="replace").splitlines():
        if "embedding model" in line and "loaded" in line and line.startswith("["):
            try:
                return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                return None
    return None


def gold_campaign(name: str, count: int, physicians: tuple[str, ...]) -> dict:
    """A campaign of the users named ``physicians``, two a window, over the
    first ``count`` Gold windows (by stay and index), by the real service in
    this process (Django on the bench's SQLite file): its id, its window ids,
    the seconds campaign_create took and each assignment's (id, window id,
    physician's username) by window."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections

    from annotation.models import Assignment
    from annotation.services import campaign_create
    from windows.models import Window

    User = get_user_model()
    windows = list(
        Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")[:count]
    )
    started = time.perf_counter()
    campaign = campaign_create(
        admin=User.objects.get(username="admin"),
        name=name,
        windows=windows,
        physicians=list(User.objects.filter(username__in=physicians)),
        annotators_per_window=2,
        evidence_required=False,
    )
    created_s = time.perf_counter() - started
    assignments = list(
        Assignment.objects.filter(campaign=campaign)
        .order_by("window_id", "pk")
        .values_list("pk", "window_id", "annotator__username")
    )
    connections.close_all()
    return {
        "campaign": campaign.pk,
        "window_ids": [w.pk for w in windows],
        "created_s": created_s,
        "assignments": assignments,
    }


def hx_post(session, base: str, path: str, data: dict, csrf: str, timeout=60):
    """The form ``data`` POSTed to ``path`` as the page's script posts it
    (htmx, CSRF header, JSON reply); the response."""
    return session.post(
        base + path,
        data=data,
        headers={
            "X-CSRFToken": csrf,
            "HX-Request": "true",
            "Accept": "application/json",
            "Referer": base + path,
        },
        timeout=timeout,
    )
