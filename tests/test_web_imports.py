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


@pytest.mark.django_db(transaction=True)
def test_the_wsgi_app_and_a_physicians_pages_import_no_torch():
    physician = make_user(role=Role.PHYSICIAN)
    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
        f"{db['NAME']}"
    )
    env["DJANGO_SETTINGS_MODULE"] = "realicu_web.settings"

    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, physician.username],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["statuses"] == [200, 200]
    assert result["heavy"] == []
