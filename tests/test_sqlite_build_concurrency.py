"""The embedded default (SQLite, one writer at a time, and the filesystem broker)
keeps answering while a release is built (issue 29, item 3): a physician signs
in and saves drafts again and again through HTTP while the worker builds the
CLIF demo's surveillance release (94 stays), and each draft save answers
2xx/3xx within a second, each sign-in within a second or three times its time
before the build (its password hash shares the cores with the build); the
release is built.

A build in one write transaction (as before) held SQLite's write lock for its
whole length (70 s here): a sign-in meanwhile waited up to the 30 s busy
timeout, then answered 500 "database is locked".

A sign-in's password hash alone takes about 0.2 s of a core (Argon2id); on a
machine so busy with other work that a sign-in takes 0.8 of the bound before
any build, the test is skipped with the figures (REALICU_TEST_ANSWER_SECONDS names
another bound)."""

import http.cookiejar
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.embedded import EMBEDDED_PASSWORD as PASSWORD
from tests.embedded import embedded_env, serve_start, server_stop

ROOT = Path(__file__).resolve().parent.parent
# A request of the physician must answer within this long (issue 29: 1 s); a
# slower machine may name its own bound.
ANSWER_SECONDS = float(os.environ.get("REALICU_TEST_ANSWER_SECONDS", "1.0"))
# The demo's surveillance release builds in about 70 s on an idle machine.
BUILD_SECONDS = 420

CAMPAIGN_SCRIPT = """
from django.contrib.auth import get_user_model
from annotation.models import Assignment
from annotation.services.campaigns import campaign_create
from windows.models import Cohort, Window

users = get_user_model().objects
admin = users.get(username="admin")
doctors = [users.get(username="physician1"), users.get(username="physician2")]
windows = list(
    Window.objects.filter(sampled_gold=True).order_by("pk").values_list("pk", flat=True)[:4]
)
campaign = campaign_create(
    admin=admin, name="concurrency", windows=windows, physicians=doctors,
    annotators_per_window=2,
)
assignment = Assignment.objects.filter(
    campaign=campaign, annotator=doctors[0]
).order_by("pk").first()
print("ASSIGNMENT", assignment.pk)
print("COHORT", Cohort.objects.get(name="CLIF demo").pk)
"""


class Answer(Exception):
    """A response that is not 2xx/3xx."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    """A cookie-keeping HTTP client that does not follow redirects (a sign-in's
    answer is its 302, timed alone); each call returns (status, body,
    seconds)."""

    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
            _NoRedirect(),
        )

    def request(self, path: str, data: dict | None = None, headers=None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        started = time.monotonic()
        try:
            with self.opener.open(req, timeout=60) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode(errors="replace")
        return status, text, time.monotonic() - started

    def token(self, path: str) -> str:
        status, page, _ = self.request(path)
        assert status == 200, (path, status)
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        found = found or re.search(r'"X-CSRFToken": "([^"]+)"', page)
        return found.group(1)

    def sign_in(self, username: str):
        token = self.token("/accounts/login/")
        return self.request(
            "/accounts/login/",
            {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
            {"Referer": self.base + "/accounts/login/"},
        )


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, embedded_bootstrap):
    """A copy of the session's ``manage.py bootstrap`` (the CLIF demo, its cohort
    of 94 stays, the demo accounts) and a Gold campaign for physician1, then
    ``manage.py serve``: one web worker and one Celery worker, SQLite, the
    filesystem broker."""
    var = embedded_bootstrap.copy(tmp_path_factory, "concurrency-var")
    env = embedded_env(var)
    manage = [sys.executable, str(ROOT / "manage.py")]
    done = subprocess.run(
        [*manage, "shell", "-c", CAMPAIGN_SCRIPT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assignment = int(re.search(r"ASSIGNMENT (\d+)", done.stdout).group(1))
    cohort = int(re.search(r"COHORT (\d+)", done.stdout).group(1))
    proc, base = serve_start(env, var / "serve.log")
    try:
        yield {
            "base": base,
            "var": var,
            "assignment": assignment,
            "cohort": cohort,
        }
    finally:
        server_stop(proc)


def _release_state(database: Path, release_id: int) -> str:
    """The release's state, read as a page would (WAL: a reader never waits)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as db:
        row = db.execute(
            "SELECT state FROM exports_release WHERE id = ?", (release_id,)
        ).fetchone()
    return row[0] if row else ""


def test_sign_ins_and_draft_saves_answer_within_a_second_during_a_release_build(
    embedded,
):
    base, database = embedded["base"], embedded["var"] / "realicu.sqlite3"
    # Before the build: a sign-in's password hash (Argon2id, 100 MiB) is most
    # of its answer. On a machine already busy with other work it alone can
    # take most of a second, and the bound then tells nothing of the
    # build: the test is skipped, saying so.
    Browser(base).sign_in("physician2")  # the web worker's first request
    quiet = sorted(Browser(base).sign_in("physician2")[2] for _ in range(5))[2]
    print(f"sign-in before the build: median of 5 {quiet:.3f} s")
    if quiet > 0.8 * ANSWER_SECONDS:
        pytest.skip(
            f"a sign-in takes {quiet:.2f} s here before any build (load average "
            f"{os.getloadavg()[0]:.1f}): the machine is too busy to test the bound"
        )
    admin = Browser(base)
    status, _, _ = admin.sign_in("admin")
    assert status == 302
    token = admin.token("/releases/")
    status, _, _ = admin.request(
        "/releases/build/",
        {
            "kind": "surveillance",
            "cohort": embedded["cohort"],
            "csrfmiddlewaretoken": token,
        },
        {"Referer": base + "/releases/"},
    )
    assert status == 302  # to the list: the release is queued
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        release_id = db.execute(
            "SELECT max(id) FROM exports_release WHERE kind = 'surveillance'"
        ).fetchone()[0]

    assignment = embedded["assignment"]
    version = 0
    answers = []  # (what, status, seconds, release state before, after)
    deadline = time.monotonic() + BUILD_SECONDS
    state = _release_state(database, release_id)
    while state not in ("ready", "failed") and time.monotonic() < deadline:
        physician = Browser(base)
        status, _, seconds = physician.sign_in("physician1")
        after = _release_state(database, release_id)
        answers.append(("sign-in", status, seconds, state, after))
        state = after
        if status != 302:  # not signed in (a 500: "database is locked")
            continue
        csrf = physician.token(f"/annotate/{assignment}/")
        for _ in range(3):
            payload = {"status": "stable", "acute_problems": [{"text": "Septic shock"}]}
            status, body, seconds = physician.request(
                f"/annotate/{assignment}/draft/",
                {
                    "payload": json.dumps(payload),
                    "base_version": version,
                    "active_seconds": 1,
                },
                {"X-CSRFToken": csrf, "Referer": base + f"/annotate/{assignment}/"},
            )
            after = _release_state(database, release_id)
            answers.append(("draft", status, seconds, state, after))
            state = after
            if status == 200:
                version = json.loads(body)["version"]
            time.sleep(0.2)
    state = _release_state(database, release_id)
    print(f"release {state} after {time.monotonic() - deadline + BUILD_SECONDS:.0f} s")

    during = [a for a in answers if a[3] == a[4] == "building"]
    # A sign-in is its password hash, CPU: while the worker builds on one core
    # (and, under `make test`, another test process runs on the other) its
    # share of a core falls to a third. Its bound is three times its quiet
    # time, at least the second; a draft save, no hash, keeps the second. A
    # build holding SQLite's write lock made both wait up to 30 s, then 500.
    sign_in_bound = max(ANSWER_SECONDS, 3 * quiet)
    print(f"sign-in bound {sign_in_bound:.2f} s, draft bound {ANSWER_SECONDS} s")
    slow_or_failed = [
        a
        for a in answers
        if not 200 <= a[1] < 400
        or a[2] > (sign_in_bound if a[0] == "sign-in" else ANSWER_SECONDS)
    ]
    for what in ("sign-in", "draft"):
        times = sorted(a[2] for a in during if a[0] == what)
        if times:
            print(
                f"{what} during the build: {len(times)}, median "
                f"{times[len(times) // 2]:.3f} s, slowest {times[-1]:.3f} s"
            )
    print(f"failed or slower than {ANSWER_SECONDS} s: {slow_or_failed[:5]}")
    assert state == "ready", (
        state,
        (embedded["var"] / "serve.log").read_text()[-3000:],
    )
    assert len([a for a in during if a[0] == "sign-in"]) >= 5, answers
    assert len([a for a in during if a[0] == "draft"]) >= 15, answers
    assert not slow_or_failed
    assert (Path(embedded["var"]) / "releases" / "realicu-surveillance-v1").is_dir()
