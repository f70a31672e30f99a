"""Annotation under load: 50 simulated physicians on loopback against gunicorn on
PostgreSQL, each saving drafts every 2 s and submitting, then a check of the
database for lost or duplicated labels.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/annotate_load.py

DATABASE_URL names a database to connect to for creating and dropping the
benchmark's own, realicu_loadbench_<pid>. The script imports the CLIF demo, builds its
windows and Gold draw, creates the physicians and one Gold campaign with the real
services, starts gunicorn on 127.0.0.1 with the project's gunicorn.conf.py
(workers and threads sized to the cores; --workers/--threads override), and runs one
thread per physician with its own cookie jar. A physician logs in through the
login form, opens the queue and an assignment page, then saves a draft every
2 s as the page's script does (form-encoded payload, base_version,
active_seconds, X-CSRFToken and HX-Request headers), submits after a few drafts
with the page's submission id, and goes on to the next window.
Latencies are measured by the clients (wall time of the HTTP request on
loopback). Targets: p95 draft save <= 100 ms; zero lost or duplicated labels.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.percentiles import percentile  # noqa: E402 - after the path

ADMIN_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
# Per run: a fixed name would be dropped under a concurrent run of the benchmark.
BENCH_DB = f"realicu_loadbench_{os.getpid()}"
HOST = "127.0.0.1"
PASSWORD = "load bench pass 1"
DRAFT_INTERVAL_S = 2.0
REQUEST_TIMEOUT_S = 30
STATUSES = ("improving", "stable", "deteriorating")


def _admin_conninfo() -> str:
    return ADMIN_URL.replace("postgres://", "postgresql://", 1)


def _bench_url() -> str:
    base, _, _ = ADMIN_URL.rpartition("/")
    return f"{base}/{BENCH_DB}"


def _create_database() -> None:
    import psycopg

    with psycopg.connect(_admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _drop_database() -> None:
    import psycopg

    with psycopg.connect(_admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# Data -------------------------------------------------------------------------


def _build_data(*, physicians: int, per_physician: int) -> dict:
    """Demo stays, Gold windows, physicians and a campaign, by the real services."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from accounts.roles import Role, roles_ensure
    from annotation import services
    from windows.importers.clif import clif_import
    from windows.models import Stay, Window
    from windows.windowing import windows_build_many

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = clif_import()
    print(
        f"CLIF demo imported: {summary.total_events:,} events, {summary.stays} stays "
        f"in {time.perf_counter() - started:.1f} s"
    )
    annotators_per_window = 2
    needed = physicians * per_physician // annotators_per_window
    stays = list(Stay.objects.order_by("pk"))
    per_stay = max(10, -(-needed // max(1, len(stays))) + 5)
    started = time.perf_counter()
    built = windows_build_many(stays=stays, seed=0, per_stay=per_stay)
    print(
        f"Windows: {built.windows:,} built, {built.gold} Gold ({per_stay} per stay) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    groups = roles_ensure()
    User = get_user_model()
    admin = User.objects.create_user(
        "bench-admin", password=PASSWORD, is_staff=True, is_superuser=True
    )
    admin.groups.add(groups[Role.ADMIN])
    users = []
    for n in range(1, physicians + 1):
        user = User.objects.create_user(f"loadphys{n:02d}", password=PASSWORD)
        user.groups.add(groups[Role.PHYSICIAN])
        users.append(user)
    gold = list(
        Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")[:needed]
    )
    campaign = services.campaign_create(
        admin=admin,
        name="Load benchmark",
        windows=gold,
        physicians=users,
        annotators_per_window=annotators_per_window,
        # Load, not citing, is measured: its items cite no event (issue 13's
        # campaign setting would refuse their submits).
        evidence_required=False,
    )
    from annotation.models import Assignment

    counts = Counter(
        Assignment.objects.filter(campaign=campaign).values_list(
            "annotator__username", flat=True
        )
    )
    print(
        f"Campaign {campaign.pk}: {len(gold)} windows x {annotators_per_window} "
        "raters, "
        f"{sum(counts.values())} assignments, {min(counts.values())}-"
        f"{max(counts.values())} per physician"
    )
    return {"usernames": [u.username for u in users], "campaign": campaign.pk}


# Server -----------------------------------------------------------------------


def _start_gunicorn(
    port: int, env: dict, log_path: Path, *, workers: int | None, threads: int | None
) -> subprocess.Popen:
    """gunicorn with the project's gunicorn.conf.py (workers and threads sized
    to the machine's cores); ``workers``/``threads`` override it to compare."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "realicu_web.wsgi",
        "--config",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"{HOST}:{port}",
    ]
    if workers:
        command += ["--workers", str(workers)]
    if threads:
        command += ["--threads", str(threads)]
    proc = subprocess.Popen(
        command,
        cwd=str(ROOT),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc._bench_log = log  # type: ignore[attr-defined]
    return proc


def _gunicorn_shape(workers: int | None, threads: int | None) -> str:
    """Workers and threads the server runs with: the overrides, else the
    config file's."""
    import runpy

    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    return (
        f"{workers or conf['workers']} workers x "
        f"{threads or conf['threads']} threads, {conf['worker_class']}"
    )


# CPU accounting: who used the machine's cores during the timed run ------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return (sum(fields) - idle) / _TICK, sum(fields) / _TICK


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds used) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        out[int(entry)] = (
            int(rest[1]),
            cmd,
            (float(rest[11]) + float(rest[12])) / _TICK,
        )
    return out


def _cpu_snapshot(server_pid: int) -> dict:
    import resource

    procs = _processes()
    server = {server_pid} | {
        pid for pid, (ppid, _, _) in procs.items() if ppid == server_pid
    }
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "machine": _machine_cpu(),
        "server": {pid: procs[pid][2] for pid in server if pid in procs},
        "postgres": {
            pid: cpu
            for pid, (_, cmd, cpu) in procs.items()
            if cmd.startswith("postgres:") and f" {BENCH_DB} " in cmd
        },
        "client": usage.ru_utime + usage.ru_stime,
        "load": os.getloadavg(),
        "others_by_pid": {
            pid: (cmd[:70], cpu)
            for pid, (_, cmd, cpu) in procs.items()
            if pid not in server and pid != os.getpid()
        },
    }


def _cpu_report(before: dict, after: dict, elapsed: float) -> list[str]:
    def delta(key):
        return sum(
            max(0.0, cpu - before[key].get(pid, 0.0)) for pid, cpu in after[key].items()
        )

    busy = after["machine"][0] - before["machine"][0]
    total = after["machine"][1] - before["machine"][1]
    cores = os.cpu_count() or 1
    server, postgres = delta("server"), delta("postgres")
    client = after["client"] - before["client"]
    rest = max(0.0, busy - server - postgres - client)
    others = []
    for pid, (cmd, cpu) in after["others_by_pid"].items():
        used = cpu - before["others_by_pid"].get(pid, (cmd, 0.0))[1]
        if used >= 1.0 and pid not in after["postgres"]:
            others.append((used, cmd))
    others.sort(reverse=True)
    lines = [
        f"CPU during the run ({cores} cores, {elapsed:.0f} s): machine busy "
        f"{100 * busy / total:.0f}% ({busy:.0f} core-s); gunicorn {server:.0f}, "
        f"load generator {client:.0f}, its PostgreSQL backends {postgres:.0f}, "
        f"everything else {rest:.0f} core-s; load average "
        f"{before['load'][0]:.1f} -> {after['load'][0]:.1f}",
    ]
    if others:
        lines.append(
            "  other busy processes: "
            + "; ".join(f"{cmd} {used:.0f} s" for used, cmd in others[:5])
        )
    return lines


def _wait_until_up(base: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    import requests

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
        try:
            if requests.get(f"{base}/accounts/login/", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not answer in time")


def _stop_gunicorn(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc._bench_log.close()  # type: ignore[attr-defined]


# Clients ----------------------------------------------------------------------


@dataclass
class Results:
    lock: threading.Lock = field(default_factory=threading.Lock)
    draft_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    requests: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    # assignment id -> (last version the server acknowledged, payload sent)
    acked: dict[int, tuple[int, dict]] = field(default_factory=dict)
    # assignment id -> (version, submission id) of each acknowledged submit
    submitted: dict[int, tuple[int, str]] = field(default_factory=dict)
    login_failures: int = 0
    ready: int = 0
    go: threading.Event = field(default_factory=threading.Event)
    deadline: float = 0.0

    def error(self, what: str, detail: str) -> None:
        with self.lock:
            self.errors[what] += 1
            if len(self.error_samples) < 10:
                self.error_samples.append(f"{what}: {detail[:200]}")


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
HX_HEADERS = re.compile(r"hx-headers='([^']+)'")
ASSIGNMENT_ROW = re.compile(r'data-assignment-id="(\d+)" data-state="(\w+)"')
FORM_VERSION = re.compile(r'data-version="(\d+)" data-submission-id="([0-9a-f]+)"')
ACTION_ID = re.compile(r'data-action-id="(\d+)"')


class Physician(threading.Thread):
    def __init__(
        self, *, base, username, results, drafts_before_submit, max_assignments, seed
    ):
        super().__init__(name=username, daemon=True)
        self.base = base
        self.username = username
        self.results = results
        self.drafts_before_submit = drafts_before_submit
        self.max_assignments = max_assignments
        self.rng = random.Random(seed)

    # HTTP helpers
    def _get(self, session, path, what):
        import requests

        started = time.perf_counter()
        try:
            response = session.get(self.base + path, timeout=REQUEST_TIMEOUT_S)
        except requests.RequestException as exc:
            self.results.error(f"{what} exception", repr(exc))
            return None, 0.0
        ms = (time.perf_counter() - started) * 1000
        with self.results.lock:
            self.results.requests[what] += 1
        if response.status_code != 200:
            self.results.error(f"{what} {response.status_code}", path)
            return None, ms
        return response, ms

    def _post_json(self, session, path, data, csrf, what):
        import requests

        headers = {
            "X-CSRFToken": csrf,
            "HX-Request": "true",
            "Accept": "application/json",
            "Referer": self.base + path,
        }
        started = time.perf_counter()
        try:
            response = session.post(
                self.base + path, data=data, headers=headers, timeout=REQUEST_TIMEOUT_S
            )
        except requests.RequestException as exc:
            self.results.error(f"{what} exception", repr(exc))
            return None, None
        ms = (time.perf_counter() - started) * 1000
        with self.results.lock:
            self.results.requests[what] += 1
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or not body.get("ok"):
            self.results.error(
                f"{what} {response.status_code}", f"{path} {json.dumps(body)[:150]}"
            )
            return None, ms
        return body, ms

    def _login(self, session) -> bool:
        page, _ = self._get(session, "/accounts/login/?next=/annotate/", "login page")
        if page is None:
            return False
        match = CSRF_INPUT.search(page.text)
        if not match:
            self.results.error("login page", "no CSRF token")
            return False
        response = session.post(
            self.base + "/accounts/login/",
            data={
                "csrfmiddlewaretoken": match.group(1),
                "username": self.username,
                "password": PASSWORD,
                "next": "/annotate/",
            },
            headers={"Referer": self.base + "/accounts/login/"},
            timeout=120,
            allow_redirects=False,
        )
        with self.results.lock:
            self.results.requests["login"] += 1
        if response.status_code != 302 or "sessionid" not in session.cookies:
            self.results.error(f"login {response.status_code}", self.username)
            return False
        return True

    def _payload(self, n: int, actions: list[int], complete: bool) -> dict:
        problems = [
            {"text": f"{self.username} problem {i + 1}", "evidence": []}
            for i in range(n)
        ]
        ratings = (
            [{"event_id": a, "rating": "acceptable", "evidence": []} for a in actions]
            if complete
            else [
                {"event_id": a, "rating": "", "evidence": []} for a in actions[: n % 2]
            ]
        )
        return {
            "status": STATUSES[n % 3] if (complete or n % 4) else "",
            "status_evidence": [],
            "action_ratings": ratings,
            "acute_problems": problems,
            "added_actions": [],
            "red_flags": [],
        }

    def run(self) -> None:
        import requests

        session = requests.Session()
        try:
            self._run(session)
        except Exception as exc:  # noqa: BLE001 - one client's crash must not hide the others' figures
            self.results.error("client exception", repr(exc))
        finally:
            session.close()

    def _run(self, session) -> None:
        # Warm-up, untimed: log in and open the queue; the timed work starts
        # when every physician is ready.
        try:
            ok = self._login(session)
        finally:
            with self.results.lock:
                self.results.ready += 1
        if not ok:
            with self.results.lock:
                self.results.login_failures += 1
            return
        if not self.results.go.wait(timeout=600):
            return
        # The warm-up may outlast the server's keep-alive: a connection it is
        # closing as it is reused would be reset. A browser back after a pause
        # opens a new one; so does this client.
        for adapter in session.adapters.values():
            adapter.close()
        self.deadline = self.results.deadline
        time.sleep(self.rng.uniform(0, DRAFT_INTERVAL_S))
        queue, _ = self._get(session, "/annotate/", "queue")
        if queue is None:
            return
        todo = [
            int(pk)
            for pk, state in ASSIGNMENT_ROW.findall(queue.text)
            if state != "submitted"
        ]
        for done, assignment_id in enumerate(todo):
            if time.monotonic() >= self.deadline or done >= self.max_assignments:
                return
            self._annotate(session, assignment_id)

    def _annotate(self, session, assignment_id: int) -> None:
        path = f"/annotate/{assignment_id}/"
        page, ms = self._get(session, path, "annotate page")
        if page is None:
            return
        with self.results.lock:
            self.results.page_ms.append(ms)
        csrf_match = HX_HEADERS.search(page.text)
        form_match = FORM_VERSION.search(page.text)
        if not csrf_match or not form_match:
            self.results.error("annotate page", f"{path} lacks CSRF or version")
            return
        csrf = json.loads(csrf_match.group(1))["X-CSRFToken"]
        version = int(form_match.group(1))
        submission_id = form_match.group(2)
        actions = list(dict.fromkeys(int(a) for a in ACTION_ID.findall(page.text)))
        active = 0
        for n in range(1, self.drafts_before_submit + 2):
            next_at = time.monotonic() + DRAFT_INTERVAL_S
            if next_at > self.deadline:
                return  # out of time: the assignment stays a draft
            time.sleep(max(0.0, next_at - time.monotonic()))
            active += int(DRAFT_INTERVAL_S)
            last = n > self.drafts_before_submit
            payload = self._payload(n, actions, complete=last)
            data = {
                "payload": json.dumps(payload),
                "base_version": str(version),
                "active_seconds": str(active),
            }
            if last:
                data["submission_id"] = submission_id
            what = "submit" if last else "draft"
            body, ms = self._post_json(
                session, f"/annotate/{assignment_id}/{what}/", data, csrf, what
            )
            if ms is not None:
                with self.results.lock:
                    (self.results.submit_ms if last else self.results.draft_ms).append(
                        ms
                    )
            if body is None:
                return  # refused: a real page would show the conflict and stop
            version = int(body["version"])
            active = 0
            with self.results.lock:
                self.results.acked[assignment_id] = (version, payload)
                if last:
                    self.results.submitted[assignment_id] = (version, submission_id)
        # The browser follows the submit's redirect to the next window; the next
        # loop turn opens it.


# Checks -----------------------------------------------------------------------


def _check_database(results: Results, campaign_id: int) -> dict:
    from django.db import connection
    from django.db.models import Count

    from annotation.models import Assignment, AssignmentState, Label, LabelRevision

    connection.close()  # a fresh connection sees everything gunicorn committed
    labels = {
        label.assignment_id: label
        for label in Label.objects.filter(assignment__campaign_id=campaign_id)
    }
    states = dict(
        Assignment.objects.filter(campaign_id=campaign_id).values_list("pk", "state")
    )
    expected = set(results.submitted)
    found = {
        pk
        for pk in expected
        if pk in labels
        and states.get(pk) == AssignmentState.SUBMITTED
        and labels[pk].submitted_at is not None
    }
    submitted_in_db = {
        pk for pk, state in states.items() if state == AssignmentState.SUBMITTED
    }
    dup_labels = (
        Label.objects.filter(assignment__campaign_id=campaign_id)
        .values("assignment_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    revisions = LabelRevision.objects.filter(label__assignment__campaign_id=campaign_id)
    dup_submit_revisions = (
        revisions.filter(kind="submit")
        .values("label_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    dup_versions = (
        revisions.values("label_id", "version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    wrong_submission_id = sum(
        1
        for pk, (_, sid) in results.submitted.items()
        if pk in labels and labels[pk].submission_id != sid
    )
    by_version = {
        (r.label.assignment_id, r.version): r for r in revisions.select_related("label")
    }
    lost, content_mismatch = [], []
    for pk, (version, payload) in results.acked.items():
        label = labels.get(pk)
        if label is None or label.version < version:
            lost.append(pk)
            continue
        revision = by_version.get((pk, version))
        saved = revision.payload if revision is not None else {}
        if (
            revision is None
            or saved.get("status") != payload["status"]
            or [i["text"] for i in saved.get("acute_problems", [])]
            != [i["text"] for i in payload["acute_problems"]]
        ):
            content_mismatch.append(pk)
    # The current label of each acknowledged assignment is exactly what the
    # client last had acknowledged (no one else writes in this benchmark).
    stale_current = [
        pk
        for pk, (version, _) in results.acked.items()
        if pk in labels and labels[pk].version != version
    ]
    return {
        "expected": len(expected),
        "found": len(found),
        "missing": sorted(expected - found),
        "submitted_in_db": len(submitted_in_db),
        "submitted_not_acked": sorted(submitted_in_db - expected),
        "dup_labels": dup_labels,
        "dup_submit_revisions": dup_submit_revisions,
        "dup_versions": dup_versions,
        "wrong_submission_id": wrong_submission_id,
        "acked_assignments": len(results.acked),
        "lost": sorted(lost),
        "content_mismatch": sorted(content_mismatch),
        "stale_current": sorted(stale_current),
        "revisions": revisions.count(),
    }


# Main -------------------------------------------------------------------------


def main() -> int:
    global BENCH_DB
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--physicians", type=int, default=50)
    parser.add_argument(
        "--per-physician",
        type=int,
        default=8,
        help="assignments per physician in the campaign",
    )
    parser.add_argument(
        "--drafts", type=int, default=3, help="drafts saved before each submit"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn workers (default: gunicorn.conf.py's)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads per gunicorn worker (default: gunicorn.conf.py's)",
    )
    parser.add_argument(
        "--database",
        default=BENCH_DB,
        help="name of the benchmark's own database, dropped and "
        "made again (default realicu_loadbench_<pid>)",
    )
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.database):
        parser.error("--database: lower-case letters, digits and _ only")
    BENCH_DB = args.database
    seconds = max(1.0, min(args.seconds, 3600))

    _create_database()
    os.environ["DATABASE_URL"] = _bench_url()
    os.environ.setdefault(
        "REALICU_VAR_DIR", tempfile.mkdtemp(prefix="realicu-loadbench-")
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    import django

    django.setup()
    from django.conf import settings

    # The filesystem broker's folders, as a deployment with a worker has them:
    # a submit queues the agreement task after its commit.
    for key in ("data_folder_in", "processed_folder", "control_folder"):
        folder = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
    import requests  # noqa: F401 - fail early when missing

    proc = None
    exit_code = 1
    try:
        data = _build_data(physicians=args.physicians, per_physician=args.per_physician)
        from django.db import connections

        connections.close_all()
        port = _free_port()
        base = f"http://{HOST}:{port}"
        log_path = Path(os.environ["REALICU_VAR_DIR"]) / "gunicorn.log"
        env = dict(os.environ, DJANGO_DEBUG="0")
        proc = _start_gunicorn(
            port, env, log_path, workers=args.workers, threads=args.threads
        )
        _wait_until_up(base, proc)
        print(
            f"gunicorn ({_gunicorn_shape(args.workers, args.threads)}) up on {base}; "
            f"log {log_path}"
        )

        results = Results()
        clients = [
            Physician(
                base=base,
                username=name,
                results=results,
                drafts_before_submit=args.drafts,
                max_assignments=args.per_physician,
                seed=i,
            )
            for i, name in enumerate(data["usernames"])
        ]
        for client in clients:
            client.start()
        warm_until = time.monotonic() + 300
        while results.ready < len(clients) and time.monotonic() < warm_until:
            time.sleep(0.2)
        print(
            f"{results.ready - results.login_failures} of {len(clients)} "
            "physicians logged in (untimed warm-up)"
        )
        cpu_before = _cpu_snapshot(proc.pid)
        started = time.monotonic()
        deadline = started + seconds
        results.deadline = deadline
        results.go.set()
        for client in clients:
            client.join(
                timeout=max(0.0, deadline - time.monotonic()) + 2 * REQUEST_TIMEOUT_S
            )
        hung = sum(c.is_alive() for c in clients)
        elapsed = time.monotonic() - started
        cpu_after = _cpu_snapshot(proc.pid)
        _stop_gunicorn(proc)
        proc = None

        checks = _check_database(results, data["campaign"])
        total = sum(results.requests.values())
        print()
        print(
            f"{len(clients)} physicians for {elapsed:.1f} s ({seconds:.0f} s of work), "
            f"{total} requests ({total / elapsed:.1f}/s); hung clients: {hung}; "
            f"failed logins: {results.login_failures}"
        )
        print(
            "requests: "
            + ", ".join(f"{k} {v}" for k, v in sorted(results.requests.items()))
        )
        for line in _cpu_report(cpu_before, cpu_after, elapsed):
            print(line)
        print(f"{'request':<14} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for what, times in (
            ("draft save", results.draft_ms),
            ("submit", results.submit_ms),
            ("annotate page", results.page_ms),
        ):
            print(
                f"{what:<14} {len(times):>6} "
                f"{statistics.median(times) if times else float('nan'):>8.1f} "
                f"{percentile(times, 0.95):>8.1f} "
                f"{max(times, default=float('nan')):>8.1f}"
            )
        n_errors = sum(results.errors.values())
        print(
            f"errors: {n_errors}"
            + (
                " (" + ", ".join(f"{k} {v}" for k, v in results.errors.items()) + ")"
                if n_errors
                else ""
            )
        )
        for sample in results.error_samples:
            print(f"  {sample}")
        print()
        print(
            f"labels expected (submits acknowledged): {checks['expected']}, "
            f"found submitted: {checks['found']}, missing: {checks['missing'][:10]}"
        )
        print(
            f"assignments submitted in the database: {checks['submitted_in_db']}, "
            "of which not acknowledged to a client: "
            f"{len(checks['submitted_not_acked'])}"
        )
        print(
            f"duplicates: labels per assignment > 1: {checks['dup_labels']}, "
            f"labels with > 1 submit revision: {checks['dup_submit_revisions']}, "
            f"repeated (label, version): {checks['dup_versions']}, "
            f"submission id differs: {checks['wrong_submission_id']}"
        )
        print(
            f"lost drafts: {len(checks['lost'])} of {checks['acked_assignments']} "
            f"assignments with an acknowledged save; saved content differs: "
            f"{len(checks['content_mismatch'])}; current version != last "
            f"acknowledged: {len(checks['stale_current'])}; revisions: "
            f"{checks['revisions']}"
        )
        p95 = percentile(results.draft_ms, 0.95)
        ok = (
            p95 <= 100
            and not checks["missing"]
            and not checks["lost"]
            and not checks["content_mismatch"]
            and not checks["stale_current"]
            and checks["dup_labels"] == 0
            and checks["dup_submit_revisions"] == 0
            and checks["dup_versions"] == 0
            and checks["wrong_submission_id"] == 0
        )
        print()
        print(
            f"p95 draft save {p95:.1f} ms (target <= 100); "
            f"{'TARGETS MET' if ok else 'TARGETS NOT MET'}"
            f"{'' if n_errors == 0 else f' ({n_errors} request errors)'}"
        )
        exit_code = 0 if ok and n_errors == 0 else 1
    finally:
        if proc is not None:
            _stop_gunicorn(proc)
        from django.db import connections

        connections.close_all()
        if not args.keep:
            _drop_database()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
