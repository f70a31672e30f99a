"""The web worker freezes what it loaded before serving (issue 35, a page's
slow tail): realicu_web.webserver.app_loaded_freeze imports every view the
URLconf names and moves the objects alive then out of the collector's reach,
so a full collection during a request no longer walks them. Run in a fresh
process, as a gunicorn worker runs it after loading the app."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import gc, json, sys, django
django.setup()
before = gc.get_freeze_count()
from realicu_web.webserver import app_loaded_freeze
frozen = app_loaded_freeze()
tracked = len(gc.get_objects())
print(json.dumps({
    "before": before,
    "frozen": frozen,
    "tracked_after": tracked,
    "views": sorted(m for m in sys.modules if m.endswith(".views")),
}))
"""


def test_the_worker_loads_every_view_then_freezes_them():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="realicu_web.settings")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["before"] == 0
    # The URLconf's views are imported before the freeze, so they are frozen.
    for module in ("annotation.views", "oracle.views", "exports.views"):
        assert module in found["views"]
    # Tens of thousands of long-lived objects leave the collector's walk; what
    # is still tracked afterwards is what was made since (nearly nothing).
    assert found["frozen"] > 50_000
    assert found["tracked_after"] < found["frozen"] / 10
