"""A script run in a fresh Python process on the test database, as a web
process (a gunicorn worker) starts: what it printed last, as JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def _web_env() -> dict:
    """This process's environment, on the test database."""
    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
        f"{db['NAME']}"
    )
    env["DJANGO_SETTINGS_MODULE"] = "realicu_web.settings"
    return env


def web_script_result(script: str, *args: str) -> dict:
    """What ``script`` printed last (JSON), run with ``args`` in a fresh
    Python process on the test database, as a web process starts; its
    stderr's end in the failure when it exits non-zero."""
    run = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=_web_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
