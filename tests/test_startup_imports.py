"""What a Django process imports at start-up (issue 20): building a release
from the command line (its modules, and writing the Parquet file) loads
neither pandas nor matplotlib (their imports were
most of build_release's fixed cost), and the Oracle's job kinds, registered
without importing its services, name the services' tasks."""

import subprocess
import sys

from django.conf import settings

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
import django
django.setup()
from django.core.management import load_command_class
command = load_command_class("exports", "build_release")
assert command.requires_system_checks == []
import exports.building, exports.datacard, exports.services
import tempfile, datetime
from exports.building.records import ParquetBatches
start = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
labels = {"status": {"value": None}, "acute_problems": [], "recommended_actions": [],
          "red_flags": []}
with tempfile.TemporaryDirectory() as folder:
    batches = ParquetBatches(os.path.join(folder, "w.parquet"))
    batches.add({"window_id": 1, "stay_id": 1, "patient_id": "P", "window_index": 0,
                 "_start": start, "_end": start, "start_hours": 0.0, "end_hours": 0.5,
                 "hindsight": {"disease_group": "sepsis"},
                 "context_file": "context/1.jsonl",
                 "window_action_event_ids": [], "window_companion_event_ids": [],
                 "labels": labels})
    batches.close()
print(sorted(m for m in ("pandas", "matplotlib", "torch") if m in sys.modules))
"""


def test_the_release_command_starts_without_pandas_or_matplotlib():
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_oracle_job_kinds_name_the_services_tasks():
    from jobs.registry import kinds
    from oracle.services.runs import CHUNK_TASK
    from oracle.services.validating import VALIDATION_TASK

    tasks = {kind.name: kind.task for kind in kinds()}
    assert tasks["oracle-run"] == CHUNK_TASK
    assert tasks["oracle-validation"] == VALIDATION_TASK
