"""The web processes never import torch or sentence-transformers (issue 20,
memory): only the worker embeds texts, so a machine holds one embedding model.
A fresh Python process imports the WSGI application and serves a physician's
pages, as a gunicorn worker does."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from accounts.roles import Role
from tests.factories import make_user

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys
from realicu_web.wsgi import application  # noqa: F401, as gunicorn loads it
from django.contrib.auth import get_user_model
from django.test import Client

client = Client(HTTP_HOST="127.0.0.1")
client.force_login(get_user_model().objects.get(username=sys.argv[1]))
statuses = [client.get(path).status_code for path in ("/annotate/", "/stays/")]
heavy = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
print(json.dumps({"statuses": statuses, "heavy": heavy}))
"""


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


@pytest.mark.django_db(transaction=True)
def test_the_wsgi_app_and_a_physicians_pages_import_no_torch():
    physician = make_user(role=Role.PHYSICIAN)

    result = web_script_result(SCRIPT, physician.username)
    assert result["statuses"] == [200, 200]
    assert result["heavy"] == []


DRAW_SCRIPT = """
import json, sys
from realicu_web.wsgi import application  # noqa: F401, as gunicorn loads it
from django.contrib.auth import get_user_model
from django.test import Client

client = Client(HTTP_HOST="127.0.0.1")
client.force_login(get_user_model().objects.get(username=sys.argv[1]))
draw = client.post(
    "/annotate/calibration/draw/",
    {"name": "Draw", "campaigns": [sys.argv[2]], "per_stratum": "2", "band": "0.15"},
)
progress = client.get(draw["Location"])
reference = client.get("/annotate/calibration/reference/")
assert "not embedded with" in reference.content.decode(), reference.content[-2000:]
heavy = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
print(json.dumps({"statuses": [draw.status_code, progress.status_code,
                               reference.status_code],
                  "location": draw["Location"], "heavy": heavy}))
"""


@pytest.mark.django_db(transaction=True)
def test_an_admins_calibration_pages_load_no_model():
    """The draw embeds items: a worker runs it (issue 35); the web request
    that asks for it and the page that follows it import no model, nor does
    the reference calibration, which reads what a worker embedded (nothing
    yet here: the page says so)."""
    from annotation.models import CalibrationDraw, Campaign

    admin = make_user(role=Role.ADMIN)
    # No labels: the draw fails in the worker, but the request queues it.
    campaign = Campaign.objects.create(name="Gold", created_by=admin)
    result = web_script_result(DRAW_SCRIPT, admin.username, str(campaign.pk))
    draw = CalibrationDraw.objects.get(name="Draw")
    assert result["statuses"] == [302, 200, 200]
    assert result["location"] == f"/annotate/calibration/draw/{draw.pk}/"
    assert result["heavy"] == []
