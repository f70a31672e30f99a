"""The input fuzz (tests/test_fuzz_inputs.py) and the hashed API tokens
(tests/exports/test_api_tokens.py) on SQLite, the embedded default, while the
suite runs on PostgreSQL: SQLite raises OverflowError on an integer beyond 64
bits where PostgreSQL compares it, so a 500 of one database is not one of the
other. pytest runs those modules in a process of its own with DATABASE_URL
pointing at a SQLite file under the test's tmp dir (its test database and
caches there too)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["tests/test_fuzz_inputs.py", "tests/exports/test_api_tokens.py"]


def test_the_input_fuzz_and_the_token_tests_pass_on_sqlite(tmp_path):
    if connection.vendor == "sqlite":
        pytest.skip("this run is on SQLite already: the modules run in it")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'realicu.sqlite3'}",
        "REALICU_VAR_DIR": str(tmp_path),  # the test database: var/test.sqlite3
        "CACHE_URL": f"filecache://{tmp_path / 'cache'}",
    }
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *MODULES,
            f"--ds={settings_module}",
            "-q",
            "-p",
            "no:cacheprovider",
            # The failures themselves, not pages of captured request logs that
            # would push them out of the message below.
            "--show-capture=no",
            "--tb=short",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout else ""
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert " passed" in summary and "failed" not in summary, summary
    # Every test of the modules ran on SQLite: none skipped or deselected.
    assert "skipped" not in summary and "deselected" not in summary, summary
