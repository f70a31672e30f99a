"""The embedded default, as `make run` starts it: SQLite and a real Celery worker on
the filesystem broker, no server configured. Sign in, read the stays page, have
the worker run a job queued from the page, and find one embedding model on the
machine, in the worker."""

import http.cookiejar
import os
import re
import signal
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.embedded import EMBEDDED_PASSWORD as PASSWORD
from tests.embedded import embedded_env, serve_start, server_stop


class Browser:
    """A cookie-keeping HTTP client that submits Django forms with their CSRF token."""

    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=30) as resp:
            return resp.read().decode()

    def sign_in(self, username: str) -> str:
        """Sign in through the login form; the page it lands on."""
        return self.post_form(
            "/accounts/login/",
            "/accounts/login/",
            {"username": username, "password": PASSWORD},
        )

    def post_form(self, form_path: str, path: str, data: dict) -> str:
        page = self.get(form_path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token}).encode()
        req = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + form_path}
        )
        with self.opener.open(req, timeout=30) as resp:
            return resp.read().decode()


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory, embedded_bootstrap):
    var = embedded_bootstrap.copy(tmp_path_factory, "embedded-var")
    env = embedded_env(var)
    # The supervisor restarts a worker whose loop is silent this long; the kill
    # tests below wait for it.
    env["REALICU_WORKER_HANG_SECONDS"] = "20"
    proc, base = serve_start(env, var / "serve.log")
    try:
        yield {
            "base": base,
            "bootstrap": embedded_bootstrap.stdout,
            "var": var,
            "pid": proc.pid,
        }
    finally:
        server_stop(proc)
    # Ctrl-C (SIGTERM here) stopped both the web server and the worker.
    assert proc.returncode is not None


def test_bootstrap_imports_demo_once_and_creates_accounts(embedded_server):
    out = embedded_server["bootstrap"]
    assert "100 patients" in out
    for name in ("admin", "physician1", "physician2", "physician3", "researcher"):
        assert name in out
    assert (embedded_server["var"] / "realicu.sqlite3").exists()


def test_sign_in_and_see_the_demo_stays(embedded_server):
    browser = Browser(embedded_server["base"])
    page = browser.sign_in("physician1")
    assert "Stays" in page
    stays = browser.get("/stays/")
    assert re.search(r"\b145\b", stays), "the stays page counts the demo's ICU stays"
    first = re.search(r'href="(/stays/\d+/)"', stays).group(1)
    assert "hours" in browser.get(first).lower()


def test_worker_runs_a_job_queued_from_the_page(embedded_server):
    browser = Browser(embedded_server["base"])
    browser.sign_in("admin")
    browser.post_form("/imports/", "/imports/start/", {"source": "clif", "path": ""})
    deadline = time.monotonic() + 120
    page = ""
    while time.monotonic() < deadline:
        page = browser.get("/imports/")
        if re.search(r"\bDone\b", page) or re.search(r"\bFailed\b", page):
            break
        time.sleep(1)
    assert re.search(r"\bDone\b", page), page[-2000:]
    assert "already imported" in page or "skipped" in page


def _process_tree(root: int) -> dict[int, str]:
    """pid -> command line of ``root`` and its descendants, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid]
        tree.update(children)
        frontier += children
    commands = {}
    for pid in tree:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        commands[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
    return commands


def _maps(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _maps_model(pid: int) -> bool:
    # The embedding model's weights, mapped from their file as they are read
    # (evaluation.bert_numpy, and torch's loader too).
    return _maps(pid, "model.safetensors")


def test_one_embedding_model_on_the_machine_in_the_worker(embedded_server):
    browser = Browser(embedded_server["base"])
    browser.sign_in("physician1")
    for path in ("/annotate/", "/stays/"):
        browser.get(path)
    # The worker loads the model as it starts (realicu_web.celery).
    deadline = time.monotonic() + 120
    tree = _process_tree(embedded_server["pid"])
    while time.monotonic() < deadline:
        tree = _process_tree(embedded_server["pid"])
        if any(_maps_model(pid) for pid in tree):
            break
        time.sleep(1)

    supervisor = tree.pop(embedded_server["pid"])  # its arguments name both
    assert "_supervisor.py" in supervisor and not _maps_model(embedded_server["pid"])
    with_model = [command for pid, command in tree.items() if _maps_model(pid)]
    web = [command for command in tree.values() if "gunicorn" in command]
    assert len(web) == 2, tree  # the master and serve's one web worker
    assert len(with_model) == 1, tree
    assert " worker " in with_model[0] and "--pool threads" in with_model[0]
    # The packaged model runs on numpy (issue 35): no process loads torch.
    assert not any(_maps(pid, "libtorch") for pid in tree), tree
    # beat is a thread of that worker, not a process of its own.
    assert sum("celery" in command for command in tree.values()) == 1, tree


def test_static_files_go_out_compressed_under_hashed_names(embedded_server):
    browser = Browser(embedded_server["base"])
    page = browser.get("/accounts/login/")
    css = re.search(r'href="(/static/[^"]+\.css)"', page).group(1)
    assert re.search(r"\.[0-9a-f]{12}\.css$", css), css  # the manifest's name
    request = urllib.request.Request(
        embedded_server["base"] + css, headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        assert "immutable" in resp.headers["Cache-Control"]


def _worker_pid(root: int) -> int | None:
    workers = [
        pid
        for pid, command in _process_tree(root).items()
        if "celery" in command and " worker " in command
    ]
    return workers[0] if len(workers) == 1 else None


def _sign_in_answers_within(base: str, seconds: float) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(base + "/accounts/login/", timeout=seconds) as resp:
        assert resp.status == 200
    return time.monotonic() - started


def _worker_replaced(server, old: int, timeout: float) -> int:
    """Wait for a new worker whose consumer loop passes; meanwhile the web
    answers every second."""
    alive = server["var"] / "broker" / "worker.alive"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert _sign_in_answers_within(server["base"], 5) < 5
        new = _worker_pid(server["pid"])
        if (
            new not in (None, old)
            and alive.exists()
            and time.time() - alive.stat().st_mtime < 5
        ):
            return new
        time.sleep(1)
    raise AssertionError(
        "no new worker took messages:\n"
        + (server["var"] / "serve.log").read_text()[-3000:]
    )


def _import_job_completes(server) -> None:
    browser = Browser(server["base"])
    browser.sign_in("admin")
    before = browser.get("/imports/").count("Done")
    browser.post_form("/imports/", "/imports/start/", {"source": "clif", "path": ""})
    deadline = time.monotonic() + 180
    page = ""
    while time.monotonic() < deadline:
        page = browser.get("/imports/")
        if page.count("Done") > before:
            return
        time.sleep(1)
    raise AssertionError(page[-2000:])


@pytest.mark.parametrize(
    ("sent", "timeout", "logged"),
    [
        pytest.param(
            signal.SIGKILL, 240, "worker stopped by itself (exit code -9)", id="killed"
        ),
        # A stopped worker is alive but silent: serve must see its loop stall.
        pytest.param(
            signal.SIGSTOP, 300, "its consumer loop stopped): killed", id="stopped"
        ),
    ],
)
def test_a_lost_worker_is_replaced_and_the_web_keeps_answering(
    embedded_server, sent, timeout, logged
):
    old = _worker_pid(embedded_server["pid"])
    assert old is not None
    os.kill(old, sent)
    _worker_replaced(embedded_server, old, timeout=timeout)
    _import_job_completes(embedded_server)
    log = (embedded_server["var"] / "serve.log").read_text()
    assert logged in log
