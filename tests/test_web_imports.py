"""The web processes never import torch or sentence-transformers (issue 20,
memory): only the worker embeds texts, so a machine holds one embedding model.
A fresh Python process imports the WSGI application and serves a physician's
pages, as a gunicorn worker does."""

import pytest

from accounts.roles import Role
from tests.factories import make_user
from tests.web_process import web_script_result

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


# Libraries a web process must not hold (issue 35, memory): the data-frame and
# model stacks belong to the worker, which computes tracks, builds releases and
# embeds texts.
HEAVY = (
    "pandas",
    "pyarrow",
    "torch",
    "sentence_transformers",
    "transformers",
    "sklearn",
    "statsmodels",
    "scipy",
    "matplotlib",
)

URLCONF_SCRIPT = """
import builtins, importlib.abc, json, os, sys
heavy = sys.argv[1].split(",")
root = os.getcwd() + os.sep
imports = []


def importers():
    # The project's modules being imported or run, innermost last.
    frames, frame = [], sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(root) and os.sep + ".venv" + os.sep not in path:
            frames.append(frame.f_globals.get("__name__", path))
        frame = frame.f_back
    return frames[::-1]


def note(name):
    top = (name or "").split(".")[0]
    if top in heavy:
        chain = importers()
        if [top, chain[-4:]] not in imports:
            imports.append([top, chain[-4:]])


class Watch(importlib.abc.MetaPathFinder):
    # A first load by any means (importlib.import_module included).
    def find_spec(self, name, path, target=None):
        note(name)


real_import = builtins.__import__


def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
    # Every import statement, the module already loaded or not.
    if level == 0:
        note(name)
    return real_import(name, globals, locals, fromlist, level)


sys.meta_path.insert(0, Watch())
builtins.__import__ = watched_import

from realicu_web.wsgi import application  # noqa: F401, as gunicorn loads it
from django.urls import URLResolver, get_resolver

views = []


def walk(resolver):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            walk(pattern)
        else:
            views.append(pattern.callback)


walk(get_resolver())
builtins.__import__ = real_import
print(json.dumps({
    "views": len(views),
    "imports": imports,
    "loaded": sorted(m for m in heavy if m in sys.modules),
}))
"""


def test_the_urlconf_and_every_view_import_no_heavy_library():
    """A fresh process imports the WSGI application and its whole URLconf,
    and resolves every view callable, as a web process does before it serves:
    none of pandas, pyarrow, the model stacks or the statistics libraries is
    imported on the way; a failure names the project modules that import one."""
    result = web_script_result(URLCONF_SCRIPT, ",".join(HEAVY))
    assert result["views"] > 100
    assert result["imports"] == []
    assert result["loaded"] == []
