"""The embedded default end to end (issue 20): SQLite, the filesystem broker and
``manage.py serve`` (gunicorn and the Celery worker) started as a subprocess in a
temporary var/ folder with the CLIF demo, and three physicians over a 160-window
Gold campaign.

    python benchmarks/embedded_pipeline_bench.py

Steps: ``manage.py bootstrap`` (the demo import, as ``make run`` does, about a
minute and a half), a campaign of 170 demo Gold windows with two of the three
demo physicians on each (160 to submit, 10 kept as drafts), then serve starts
and, as soon as its login page answers (the worker still loading its model),
the three physicians open and submit all 320 assignments of the 160 windows as
fast as they can, one thread each. Then draft saves, back to back, by 1 and by
10 clients, a Gold release by ``manage.py build_release``, and the memory of
the process tree. Each figure is printed on its own line with its target, and
each step with its wall time, its CPU time (serve's processes, the clients;
the build command and its children) and the load average (issue 35): on a
shared machine the wall time holds other processes' work too.

Measured by the clients on loopback: an open is the annotation page plus its
tracks JSON, fetched one after the other with ``Accept-Encoding: gzip``; bytes
are the bodies as sent (compressed), headers left out. The consensus lag is
read from the SQLite file every 0.1 s: for each window, from the answer to its
last submit to its consensus row. RSS is each process's resident set, summed
(shared pages counted in each process, as ``ps`` does; PSS beside it shares
them out).

Left out: logins are untimed; payloads are short (one problem, the recorded
critical actions rated, no evidence: the campaign does not require it), so
the matching is light; drafts are saved back to back, not every 2 s as the
page does, to measure the server rather than the clients' pauses; one
machine runs the clients and the server, so they share its cores; the
browser's own work (scripts, plots) is not measured; the release is built
while serve still runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks._cpu import (  # noqa: E402 - after the path
    ServeStep,
    clock,
    command_timed,
    load,
    report_at_exit,
    since,
    tree_cpu,
)
from benchmarks._embedded import (  # noqa: E402
    MANAGE,
    MB,
    PASSWORD,
    bootstrap,
    consensus_watch,
    embedded_env,
    gold_campaign,
    hx_post,
    model_loaded_at,
    serve_libraries,
    serve_memory,
    serve_start,
)
from benchmarks._physicians import (  # noqa: E402
    ACTION_ID,
    CSRF_INPUT,
    FORM_VERSION,
    HX_HEADERS,
)
from benchmarks._server import process_stop  # noqa: E402
from benchmarks.percentiles import percentile  # noqa: E402 - after the path

PHYSICIANS = ("physician1", "physician2", "physician3")
SUBMIT_WINDOWS = 160
DRAFT_WINDOWS = 10
STATUSES = ("improving", "stable", "deteriorating")
TIMEOUT_S = 60
TRACKS_URL = re.compile(r'data-tracks-url="([^"]+)"')


def _line(what: str, value: str, target: str = "") -> None:
    print(f"{what}: {value}" + (f"   (target {target})" if target else ""))
    sys.stdout.flush()


def _ms(values: list[float]) -> str:
    if not values:
        return "no data"
    return (
        f"p50 {statistics.median(values):.1f} ms, "
        f"p95 {percentile(values, 0.95):.1f} ms (n={len(values)})"
    )


# Data -------------------------------------------------------------------------


def _campaign_create() -> dict:
    """The campaign; returns its id and the assignments to work on."""
    made = gold_campaign(
        "Embedded pipeline benchmark", SUBMIT_WINDOWS + DRAFT_WINDOWS, PHYSICIANS
    )
    submit_ids = set(sorted(made["window_ids"])[:SUBMIT_WINDOWS])
    work: dict[str, dict[str, list]] = {
        name: {"submit": [], "draft": []} for name in PHYSICIANS
    }
    for assignment_id, window_id, username in made["assignments"]:
        kind = "submit" if window_id in submit_ids else "draft"
        work[username][kind].append((assignment_id, window_id))
    return {
        "campaign": made["campaign"],
        "created_s": made["created_s"],
        "windows": len(made["window_ids"]),
        "work": work,
    }


# HTTP -------------------------------------------------------------------------


@dataclass
class Figures:
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    page_bytes: list[int] = field(default_factory=list)
    tracks_bytes: list[int] = field(default_factory=list)
    submit_ms: list[tuple[float, float]] = field(default_factory=list)  # (at, ms)
    last_submit: dict[int, float] = field(default_factory=dict)  # window -> at
    errors: list[str] = field(default_factory=list)


def _fetch(session, url: str) -> tuple[float, int, str]:
    """(ms, bytes on the wire, decoded text) of a GET asking for gzip."""
    started = time.perf_counter()
    response = session.get(
        url, headers={"Accept-Encoding": "gzip"}, stream=True, timeout=TIMEOUT_S
    )
    raw = response.raw.read(decode_content=False)
    ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    body = gzip.decompress(raw) if response.headers.get("Content-Encoding") else raw
    return ms, len(raw), body.decode()


def _login(base: str, username: str):
    import requests

    session = requests.Session()
    page = session.get(f"{base}/accounts/login/", timeout=TIMEOUT_S).text
    token = CSRF_INPUT.search(page).group(1)
    response = session.post(
        f"{base}/accounts/login/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": PASSWORD},
        headers={"Referer": f"{base}/accounts/login/"},
        allow_redirects=False,
        timeout=TIMEOUT_S,
    )
    if response.status_code != 302:
        raise SystemExit(f"{username} could not sign in ({response.status_code})")
    return session


def _payload(window_id: int, actions: list[int]) -> dict:
    # Both raters of a window agree, so its consensus is releasable.
    return {
        "status": STATUSES[window_id % 3],
        "status_evidence": [],
        "action_ratings": [
            {"event_id": a, "rating": "acceptable", "evidence": []} for a in actions
        ],
        "acute_problems": [
            {"text": f"Septic shock with lactate {window_id % 7}", "evidence": []}
        ],
        "added_actions": [],
        "red_flags": [],
    }


def _open(session, base: str, assignment_id: int, figures: Figures) -> dict:
    """Open the annotation page and its tracks JSON; the form's state."""
    page_ms, page_bytes, html = _fetch(session, f"{base}/annotate/{assignment_id}/")
    form = FORM_VERSION.search(html)
    csrf = json.loads(HX_HEADERS.search(html).group(1))["X-CSRFToken"]
    tracks = TRACKS_URL.search(html)
    tracks_ms, tracks_bytes = 0.0, 0
    if tracks:
        tracks_ms, tracks_bytes, _ = _fetch(session, base + unescape(tracks.group(1)))
    with figures.lock:
        figures.open_ms.append(page_ms + tracks_ms)
        figures.page_ms.append(page_ms)
        figures.page_bytes.append(page_bytes)
        figures.tracks_bytes.append(tracks_bytes)
    return {
        "csrf": csrf,
        "version": int(form.group(1)),
        "submission_id": form.group(2),
        "actions": list(dict.fromkeys(int(a) for a in ACTION_ID.findall(html))),
    }


def _post(session, base: str, path: str, data: dict, csrf: str) -> dict:
    response = hx_post(session, base, path, data, csrf, timeout=TIMEOUT_S)
    body = response.json() if response.content else {}
    if response.status_code != 200 or not body.get("ok"):
        raise RuntimeError(f"{path}: {response.status_code} {str(body)[:200]}")
    return body


def _physician_submits(base, session, assignments, figures: Figures) -> None:
    for assignment_id, window_id in assignments:
        try:
            form = _open(session, base, assignment_id, figures)
            data = {
                "payload": json.dumps(_payload(window_id, form["actions"])),
                "base_version": str(form["version"]),
                "active_seconds": "30",
                "submission_id": form["submission_id"],
            }
            started = time.perf_counter()
            _post(
                session, base, f"/annotate/{assignment_id}/submit/", data, form["csrf"]
            )
            done = time.perf_counter()
        except Exception as error:  # noqa: BLE001 - counted and shown
            with figures.lock:
                figures.errors.append(f"submit {assignment_id}: {error}")
            continue
        with figures.lock:
            figures.submit_ms.append((done, (done - started) * 1000))
            figures.last_submit[window_id] = max(
                done, figures.last_submit.get(window_id, 0.0)
            )


def _drafts(base, clients: list[tuple], seconds: float) -> tuple[list[float], int]:
    """Each client saves drafts of its own assignment back to back for
    ``seconds``; returns the latencies and the saves."""
    times: list[float] = []
    lock = threading.Lock()
    errors = []
    stop_at = time.perf_counter() + seconds

    def client(session, assignment_id, window_id):
        figures = Figures()
        form = _open(session, base, assignment_id, figures)
        version = form["version"]
        n = 0
        while time.perf_counter() < stop_at:
            n += 1
            payload = _payload(window_id, [])
            payload["acute_problems"][0]["text"] += f" draft {n}"
            data = {
                "payload": json.dumps(payload),
                "base_version": str(version),
                "active_seconds": "2",
            }
            started = time.perf_counter()
            try:
                body = _post(
                    session,
                    base,
                    f"/annotate/{assignment_id}/draft/",
                    data,
                    form["csrf"],
                )
            except Exception as error:  # noqa: BLE001 - counted and shown
                errors.append(str(error))
                return
            ms = (time.perf_counter() - started) * 1000
            version = int(body["version"])
            with lock:
                times.append(ms)

    threads = [threading.Thread(target=client, args=c) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        print(f"  draft errors: {len(errors)}, e.g. {errors[0]}")
    return times, len(times)


# Memory -------------------------------------------------------------------------


def _memory_report(serve_pid: int) -> None:
    groups = serve_memory(serve_pid)
    for name, (rss, pss, n) in groups.items():
        _line(
            f"RSS {name}",
            f"{rss / MB:.0f} MB in {n} processes (PSS {pss / MB:.0f} MB)",
        )
    web_worker = groups["web"][0] + groups["worker"][0]
    total = web_worker + groups["supervisor"][0]
    _line(
        "RSS web + worker",
        f"{web_worker / MB:.0f} MB; with serve's supervisor {total / MB:.0f} MB",
        "<= 1024 MB",
    )
    pss = sum(group[1] for group in groups.values())
    count = sum(group[2] for group in groups.values())
    _line(
        "PSS of all serve's processes after the run",
        f"{pss / MB:.0f} MB in {count} processes (RSS {total / MB:.0f} MB); {load()}",
        "<= 500 MB (issue 35; Label Studio 464-485 MB)",
    )
    for name, libraries in serve_libraries(serve_pid).items():
        _line(f"heavy libraries in the {name}", ", ".join(libraries) or "none")


# Main ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the var folder")
    parser.add_argument("--draft-seconds", type=float, default=10.0)
    parser.add_argument(
        "--web-workers",
        type=int,
        default=None,
        help="serve's web worker processes (default: serve's)",
    )
    parser.add_argument(
        "--web-threads",
        type=int,
        default=None,
        help="threads of each web process (default: serve's)",
    )
    args = parser.parse_args()
    report_at_exit()

    var = Path(tempfile.mkdtemp(prefix="realicu-embedded-bench-"))
    env = embedded_env(var)
    manage = MANAGE
    serve = None
    log = None
    try:
        started = clock()
        print(f"bootstrap (demo import) in {bootstrap(env):.0f} s: {since(started)}")
        started = clock()
        data = _campaign_create()
        _line(
            "campaign creation",
            f"{data['created_s']:.2f} s for {data['windows']} windows x 2 raters; "
            f"the step: {since(started)}",
        )

        log = open(var / "serve.log", "wb")  # noqa: SIM115 - closed below
        serve_started = time.perf_counter()
        serve_wall = time.time()
        serve, base = serve_start(
            env,
            log,
            var / "serve.log",
            *(["--web-workers", str(args.web_workers)] if args.web_workers else []),
            *(["--web-threads", str(args.web_threads)] if args.web_threads else []),
        )
        up_s = time.perf_counter() - serve_started
        sessions = {name: _login(base, name) for name in PHYSICIANS}
        print(
            f"serve answered {up_s:.1f} s after its start; physicians signed in; "
            f"serve's processes used {tree_cpu(serve.pid):.1f} s CPU so far; {load()}"
        )

        # Submits from a cold worker start, consensus watched meanwhile.
        figures = Figures()
        seen: dict[int, float] = {}
        stop = threading.Event()
        watcher = threading.Thread(
            target=consensus_watch,
            args=(var / "realicu.sqlite3", data["campaign"], seen, stop),
            daemon=True,
        )
        watcher.start()
        phase_started = time.perf_counter()
        step = ServeStep(serve.pid)
        threads = [
            threading.Thread(
                target=_physician_submits,
                args=(base, sessions[name], data["work"][name]["submit"], figures),
            )
            for name in PHYSICIANS
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        phase_s = time.perf_counter() - phase_started
        windows = set(figures.last_submit)
        deadline = time.perf_counter() + 180
        while not windows <= set(seen) and time.perf_counter() < deadline:
            time.sleep(0.1)
        stop.set()
        watcher.join()
        submit_step = step.line()

        submits = [ms for _, ms in figures.submit_ms]
        print(
            f"{len(submits)} submits of {len(windows)} windows in {phase_s:.1f} s "
            f"from serve's start + {up_s:.1f} s; errors: {len(figures.errors)}"
        )
        for error in figures.errors[:5]:
            print(f"  {error}")
        print(f"  the submit phase, consensus included: {submit_step}")
        _line("open, page + tracks JSON", _ms(figures.open_ms))
        _line("open, page HTML alone", _ms(figures.page_ms))
        _line(
            "bytes per open, p95 (HTML + JSON, gzip)",
            f"{percentile(figures.page_bytes, 0.95) / 1024:.0f} + "
            f"{percentile(figures.tracks_bytes, 0.95) / 1024:.0f} KB",
            "< 60 KB together",
        )
        cold = [ms for at, ms in figures.submit_ms if at - serve_started <= up_s + 15]
        loaded = model_loaded_at(var / "serve.log")
        first = min((at for at, _ in figures.submit_ms), default=None)
        if loaded is not None and first is not None:
            print(
                f"the worker had its model {loaded - serve_wall:.1f} s after serve's "
                f"start; the first submit was answered at "
                f"{first - serve_started:.1f} s"
            )
        _line(
            "longest submit after a cold worker start",
            f"{max(submits, default=float('nan')):.0f} ms over the run; "
            f"{max(cold, default=float('nan')):.0f} ms in its first 15 s; "
            f"submit {_ms(submits)}",
            "no wait on the model: ~ a normal submit",
        )
        lags = [seen[w] - at for w, at in figures.last_submit.items() if w in seen]
        missing = len(windows - set(seen))
        last = max(figures.last_submit.values(), default=0.0)
        last_consensus = max((seen[w] for w in windows if w in seen), default=0.0)
        _line(
            "consensus lag, last window's consensus after the last submit",
            f"{max(0.0, last_consensus - last):.1f} s; per window max "
            f"{max(lags, default=float('nan')):.1f} s, p50 "
            f"{statistics.median(lags) if lags else float('nan'):.1f} s; "
            f"{missing} windows without consensus",
            "<= 5 s",
        )

        # Draft saves: 1 client, then 10, each on an assignment of its own.
        drafts = [
            (name, assignment)
            for name in PHYSICIANS
            for assignment in data["work"][name]["draft"]
        ]
        step = ServeStep(serve.pid)
        single, count = _drafts(
            base, [(sessions[drafts[0][0]], *drafts[0][1])], args.draft_seconds
        )
        _line(
            "draft save, 1 client",
            f"{_ms(single)}; {count / args.draft_seconds:.0f} saves per s; "
            f"{step.line()}",
        )
        ten = [(_login(base, name), *assignment) for name, assignment in drafts[:10]]
        step = ServeStep(serve.pid)
        many, count = _drafts(base, ten, args.draft_seconds)
        _line(
            f"draft save, {len(ten)} clients",
            f"{_ms(many)}; {count / args.draft_seconds:.0f} saves per s; {step.line()}",
            "p95 <= 100 ms",
        )

        # A Gold release of the campaign, by the command.
        step = ServeStep(serve.pid)
        build, command_s, command_cpu = command_timed(
            [
                *manage,
                "build_release",
                "--campaign",
                str(data["campaign"]),
                "--user",
                "admin",
            ],
            env,
        )
        build_step = step.line()
        if build.returncode != 0:
            print(f"build_release failed: {build.stderr.strip()[-500:]}")
        built = (
            sqlite3.connect(f"file:{var / 'realicu.sqlite3'}?mode=ro", uri=True)
            .execute(
                "SELECT (julianday(finished_at) - julianday(started_at)) * 86400, "
                "window_count FROM exports_release ORDER BY id DESC LIMIT 1"
            )
            .fetchone()
        )
        _line(
            "release build, 160-window Gold",
            f"{built[0]:.2f} s in the build" if built and built[0] else "no build",
            "< 0.5 s",
        )
        _line("build_release command", f"{command_s:.2f} s", "< 2 s")
        windows_built = built[1] if built and built[1] else 0
        _line(
            "build_release CPU, the command and its children",
            f"{command_cpu:.2f} s, "
            f"{1000 * command_cpu / max(windows_built, 1):.2f} ms per window "
            f"({windows_built} windows); the step: {build_step}",
            "<= 2 ms per window (Label Studio's export: 2.2-2.5 ms)",
        )

        _memory_report(serve.pid)
        return 0 if not figures.errors else 1
    finally:
        if serve is not None:
            process_stop(serve, timeout=30)
        if log is not None:
            log.close()
        if args.keep:
            print(f"var folder kept: {var}")
        else:
            shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
