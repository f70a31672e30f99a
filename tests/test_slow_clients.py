"""Slow clients cannot stall the web server (issue 31): the web process that
``manage.py serve`` starts (its command line, its gunicorn.conf.py) on a migrated
SQLite database, with 20 connections at a time that stall in their headers or
their body, or announce a 1 GiB body; the sign-in page answers while every one
of them is still stalled, and each stalled one gets 408 (413 at once for the
body too large) or is closed once the deadline has passed
(benchmarks/slow_clients_bench.py prints the page's time, the 1 s of the
issue). Then the same server on the test
database: a researcher signs in, uploads a prediction file of nearly the upload
limit, downloads release files (whole and a Range), reads an htmx partial, and a
large static file goes out without the process holding it in memory."""

import http.cookiejar
import os
import re
import select
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from realicu_web.management.commands.serve import Command, web_command
from tests.embedded import embedded_env, server_start, server_stop

# The fixtures of a ready release (tests/exports), for the researcher's test.
from tests.exports.conftest import (
    release_dirs,
    tiny_labels,
    tiny_release,
    tiny_run,
    tiny_stays,
)

__all__ = [
    "release_dirs",
    "tiny_labels",
    "tiny_release",
    "tiny_run",
    "tiny_stays",
]

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 3.0  # the header and body deadlines of the servers below, seconds
STALLED = 20
MB = 2**20


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """The production hasher, not the suite's fast one: the researcher signs
    in to a server of its own process, which checks passwords with it."""


def _serve_defaults() -> tuple[int, int]:
    """serve's web processes and threads when given no option."""
    options = Command().create_parser("manage.py", "serve").parse_args([])
    return options.web_workers, options.web_threads


def _start_web(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    workers, threads = _serve_defaults()
    return server_start(
        lambda bind: web_command(bind=bind, workers=workers, threads=threads),
        env,
        log,
    )


def _web_worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _sign_in_page(base: str) -> None:
    """The sign-in page, whole (its form); waited for no longer than the
    stalls' deadline, after which a stalled connection would free its thread."""
    with urllib.request.urlopen(
        base + "/accounts/login/", timeout=DEADLINE
    ) as response:
        assert response.status == 200
        assert b"csrfmiddlewaretoken" in response.read()


def _stall(base: str, sent: bytes) -> socket.socket:
    host, port = urllib.parse.urlsplit(base).netloc.split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    if sent:
        sock.sendall(sent)
    return sock


def _answer(sock: socket.socket, seconds: float) -> bytes:
    """What the server says before it closes, within ``seconds``."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return received


# A CSRF cookie, so that Django reads the body for the form's token (without
# one, it refuses the POST unread).
CSRF = "a" * 32
LOGIN_HEAD = (
    "POST /accounts/login/ HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\n"
    "Content-Type: multipart/form-data; boundary=stall\r\n"
    "Content-Length: {length}\r\n"
    f"Cookie: csrftoken={CSRF}\r\n"
    "\r\n"
)
PART = b'--stall\r\nContent-Disposition: form-data; name="username"\r\n\r\nphys'

STALLS = {
    # Connected, nothing sent.
    "silent": b"",
    # Half of the request line and headers.
    "headers": b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty",
    # Headers whole, the body begun and stopped.
    "body": LOGIN_HEAD.format(length=100_000).encode() + PART,
    # A multipart login claiming 1 GiB, nothing of it sent.
    "1 GiB": LOGIN_HEAD.format(length=2**30).encode(),
}


@pytest.fixture(scope="module")
def embedded_web(tmp_path_factory):
    """serve's web process on a migrated SQLite database in a temporary
    REALICU_VAR_DIR, with a 3 s header and body deadline."""
    var = tmp_path_factory.mktemp("slow-clients-var")
    env = embedded_env(var)
    env.update(
        REALICU_REQUEST_HEADER_SECONDS=str(DEADLINE),
        REALICU_REQUEST_BODY_SECONDS=str(DEADLINE),
        # No allowance for the announced size: every body has the 3 s.
        REALICU_REQUEST_BODY_RATE="1e15",
    )
    migrate = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    # A static file larger than the process's memory figures, in place before
    # WhiteNoise indexes the static root as the process starts.
    static = var / "staticfiles"
    static.mkdir(exist_ok=True)
    with open(static / "large.bin", "wb") as handle:
        for n in range(100):
            handle.write(bytes([n]) * MB)
    proc, base = _start_web(env, var / "web.log")
    try:
        yield {"base": base, "pid": proc.pid, "log": var / "web.log"}
    finally:
        server_stop(proc)


ANSWERS = {
    "silent": b"",  # closed, nothing said
    "headers": b"HTTP/1.1 408 ",
    "body": b"HTTP/1.1 408 ",
    "1 GiB": b"HTTP/1.1 413 ",
}


def _sign_in_post_seconds(base: str) -> float:
    """A whole sign-in POST with its CSRF cookie and token (a wrong password:
    the page again, after a password hash's second of work)."""
    form = urllib.parse.urlencode(
        {"username": "nobody", "password": "x", "csrfmiddlewaretoken": CSRF}
    ).encode()
    request = urllib.request.Request(
        base + "/accounts/login/", data=form, headers={"Cookie": f"csrftoken={CSRF}"}
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    return time.monotonic() - started


@pytest.mark.parametrize("kind", [*STALLS, "all"])
def test_the_sign_in_page_answers_within_a_second_while_20_clients_stall(
    embedded_web, kind
):
    base = embedded_web["base"]
    kinds = list(STALLS) if kind == "all" else [kind]
    started = time.monotonic()
    stalled = [
        (each, _stall(base, STALLS[each])) for each in kinds for _ in range(STALLED)
    ]
    # Each of them held one of gthread's four threads; serve has four. The
    # outcome rather than a timing: the page answers again and again while
    # every stalled connection is still held, unanswered and open (a server
    # that gave them threads answers the page only once the deadline frees
    # them). The figure, "within 1 s", is benchmarks/slow_clients_bench.py's.
    sockets = [sock for each, sock in stalled if each != "1 GiB"]  # 413 at once
    pages, freed = 0, []
    while time.monotonic() - started < DEADLINE - 1:
        _sign_in_page(base)
        pages += 1
        freed += select.select(sockets, [], [], 0)[0]
    assert pages >= 2 and freed == [], (pages, len(freed))
    # A POST, whose body takes a thread once it is in, is served too.
    assert _sign_in_post_seconds(base) < 10

    answers = [(each, _answer(sock, DEADLINE + 10)) for each, sock in stalled]
    waited = time.monotonic() - started
    for each, answer in answers:
        if ANSWERS[each]:
            assert answer.startswith(ANSWERS[each]), (each, answer[:200])
        else:
            assert answer == b"", (each, answer[:200])
    assert waited < DEADLINE + 5, waited


def test_stalled_headers_and_bodies_are_answered_408_only_once_the_deadline_passed(
    embedded_web,
):
    base = embedded_web["base"]
    started = time.monotonic()
    headers = _stall(base, STALLS["headers"])
    body = _stall(base, STALLS["body"])
    for sock in (headers, body):
        answer = _answer(sock, DEADLINE + 10)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"did not arrive within 3 s" in answer
    assert DEADLINE - 0.2 <= time.monotonic() - started < DEADLINE + 5


def test_an_announced_body_above_the_upload_limit_is_refused_at_once(embedded_web):
    started = time.monotonic()
    answer = _answer(_stall(embedded_web["base"], STALLS["1 GiB"]), DEADLINE + 10)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"larger than 201 MB" in answer
    assert time.monotonic() - started < 1


def test_the_body_deadline_is_total_a_trickle_is_cut_at_it(embedded_web):
    """A byte every half second keeps every single read short: the request
    is still answered 408 (or closed) when its total time is up."""
    base = embedded_web["base"]
    started = time.monotonic()
    sock = _stall(base, LOGIN_HEAD.format(length=1000).encode())
    answer = None
    while answer is None and time.monotonic() - started < DEADLINE + 5:
        readable, _, _ = select.select([sock], [], [], 0.5)
        try:
            if readable:
                answer = sock.recv(65536)
            else:
                sock.sendall(b"x")
        except OSError:
            answer = b""
    ended = time.monotonic() - started
    sock.close()
    assert answer is not None
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert DEADLINE - 0.2 <= ended < DEADLINE + 2, ended


def test_a_slow_body_that_arrives_within_the_deadline_is_served(embedded_web):
    base = embedded_web["base"]
    form = urllib.parse.urlencode(
        {"username": "nobody", "password": "x", "csrfmiddlewaretoken": CSRF}
    ).encode()
    head = (
        "POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(form)}\r\nCookie: csrftoken={CSRF}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    sock = _stall(base, head)
    pieces = range(0, len(form), 10)
    for n in pieces:
        sock.sendall(form[n : n + 10])
        time.sleep((DEADLINE / 2) / len(pieces))
    answer = _answer(sock, 10)
    # Served by the view: the sign-in page again, for a wrong password.
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"csrfmiddlewaretoken" in answer


def test_a_large_static_file_goes_out_whole_without_being_held_in_memory(
    embedded_web,
):
    worker = _web_worker_pid(embedded_web["pid"])
    before = _rss(worker)
    peak = before
    received = 0
    with urllib.request.urlopen(
        embedded_web["base"] + "/static/large.bin", timeout=60
    ) as response:
        assert response.status == 200
        assert int(response.headers["Content-Length"]) == 100 * MB
        n = 0
        while block := response.read(MB):
            assert block == bytes([n]) * MB, n
            received += len(block)
            n += 1
            if n % 10 == 0:
                peak = max(peak, _rss(worker))
    assert received == 100 * MB
    assert peak - before < 40 * MB, (before / MB, peak / MB)


def test_the_web_process_survives_and_logs_the_refusals(embedded_web):
    _sign_in_page(embedded_web["base"])
    log = embedded_web["log"].read_text()
    assert '"POST /accounts/login/ HTTP/1.1" 408' in log
    assert '"POST /accounts/login/ HTTP/1.1" 413' in log
    assert "Traceback" not in log


# The same web server on the test database: what a researcher does.


class Browser:
    """A cookie-keeping client that sends Django's CSRF token as a form does."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar)
        )

    def open(self, path: str, data=None, headers=None, timeout=60):
        request = urllib.request.Request(
            self.base + path,
            data=data,
            headers={"Referer": self.base + "/", **(headers or {})},
        )
        try:
            return self.opener.open(request, timeout=timeout)
        except urllib.error.HTTPError as error:
            return error

    def csrf(self, path: str) -> str:
        page = self.open(path).read().decode()
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    def sign_in(self, username: str, password: str) -> None:
        token = self.csrf("/accounts/login/")
        form = {"username": username, "password": password}
        body = urllib.parse.urlencode({**form, "csrfmiddlewaretoken": token})
        response = self.open("/accounts/login/", body.encode())
        assert response.status == 200, response.read()[:2000]
        assert any(cookie.name == "sessionid" for cookie in self.jar)


def _multipart(fields: dict, file_name: str, file_body) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
            f"\r\n\r\n{value}\r\n".encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{file_name}"\r\nContent-Type: application/x-ndjson\r\n\r\n'.encode()
    )
    parts.extend(file_body)
    parts.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


@pytest.fixture
def database_web(transactional_db, tmp_path, settings):
    """serve's web command line on the test database, with the deadlines'
    defaults."""
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=(
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
            f"{db['NAME']}"
        ),
        REALICU_VAR_DIR=str(tmp_path / "var"),
        REALICU_RELEASES_DIR=str(settings.REALICU_RELEASES_DIR),
        REALICU_SUBMISSIONS_DIR=str(settings.REALICU_SUBMISSIONS_DIR),
    )
    for name in (
        "REALICU_REQUEST_HEADER_SECONDS",
        "REALICU_REQUEST_BODY_SECONDS",
        "REALICU_REQUEST_BODY_RATE",
    ):
        env.pop(name, None)
    proc, base = _start_web(env, tmp_path / "web.log")
    try:
        yield {"base": base, "pid": proc.pid}
    finally:
        server_stop(proc)


def test_a_researcher_uploads_near_the_limit_downloads_and_reads_partials(
    researcher, tiny_release, tiny_stays, database_web, settings
):
    from exports.models import Submission
    from exports.selectors import release_file_get

    browser = Browser(database_web["base"])
    browser.sign_in(researcher.username, "correct horse battery")

    # An htmx request gets the fragment, a plain one the page.
    page = browser.open("/releases/").read().decode()
    fragment = browser.open("/releases/", headers={"HX-Request": "true"})
    assert "HX-Request" in fragment.headers["Vary"]
    fragment = fragment.read().decode()
    assert "<html" in page and "<html" not in fragment
    assert "realicu-scale-v1" in fragment

    # A POST without the CSRF token is refused.
    refused = browser.open(f"/releases/{tiny_release.pk}/submit/", b"model_name=m")
    assert refused.status == 403

    # A prediction file of nearly REALICU_SUBMISSION_MAX_BYTES: one prediction
    # and blank lines, which the checker skips.
    window = tiny_stays["windows"]["B"][0]
    line = (
        f'{{"window_id": {window.pk}, "status": "improving", '
        '"acute_problems": ["Delirium"], "recommended_actions": []}\n'
    ).encode()
    padding = b" " * (MB - 1) + b"\n"
    size = settings.REALICU_SUBMISSION_MAX_BYTES - MB
    blanks = (size - len(line)) // MB
    body, content_type = _multipart(
        {
            "csrfmiddlewaretoken": browser.csrf(f"/releases/{tiny_release.pk}/"),
            "model_name": "near the limit",
            "k": "5",
        },
        "predictions.jsonl",
        [line, *([padding] * blanks)],
    )
    worker = _web_worker_pid(database_web["pid"])
    before = _rss(worker)
    answer = browser.open(
        f"/releases/{tiny_release.pk}/submit/",
        body,
        headers={"Content-Type": content_type},
        timeout=120,
    )
    assert answer.status == 200, answer.read()[:2000]
    assert "/releases/submissions/" in answer.url
    submission = Submission.objects.get()
    assert submission.prediction_count == 1
    stored = Path(settings.REALICU_SUBMISSIONS_DIR) / submission.file_path
    assert stored.stat().st_size == len(line) + blanks * MB
    # The body went to disk on its way, not into the process's memory.
    assert _rss(worker) - before < 100 * MB, (before / MB, _rss(worker) / MB)

    # A release file, whole (FileResponse) and a Range of it (streamed).
    _, path = release_file_get(
        user=researcher, release_id=tiny_release.pk, path="windows.jsonl"
    )
    whole = path.read_bytes()
    url = f"/releases/{tiny_release.pk}/files/windows.jsonl"
    response = browser.open(url)
    assert response.status == 200 and response.read() == whole
    response = browser.open(url, headers={"Range": "bytes=5-24"})
    assert response.status == 206
    assert response.headers["Content-Range"] == f"bytes 5-24/{len(whole)}"
    assert response.read() == whole[5:25]
