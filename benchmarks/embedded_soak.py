"""The embedded default kept running (issue 29): ``manage.py serve`` on SQLite
and the filesystem broker, with three simulated physicians labelling, a rules
Oracle run and a surveillance release build every 15 minutes, and housekeeping
(the reaper, the outbox) running, for an hour (``--hours 24`` for a day).

    python benchmarks/embedded_soak.py [--hours 1] [--var DIR]

It prints, at the end (and a progress line every minute): crashes (worker
"Unrecoverable error" and tracebacks in serve's log), restarts by serve's
supervisor, 5xx answers and refused connections, lost or duplicated messages
and labels, and draft-save latency (p50, p95) overall and while a build runs,
with CPU time of the whole process tree and the load average beside the wall
time.

- A physician opens an assignment (page and tracks JSON), saves a draft every
  2 s three times, as the page does while one types, then submits; then the
  next. Two of the three physicians are on each window, so every window that
  both submitted must get its agreement row: one missing two minutes after the
  last submit counts as a lost message.
- Lost labels: a submit the server answered with ``ok`` whose label is not
  submitted in the database. Duplicated: more than one agreement row per
  window, or a label revision counted twice for one submit.
- Every 15 minutes (``--every``), ``oracle_run --campaign`` (rules backbone,
  queued to the worker, followed to its end) and ``build_release --kind
  surveillance`` run as the admin would start them from a shell; the draft
  saves made while either runs are "during builds". A sign-in is timed every
  30 s.

Left out: the browser's own work; reading pages other than the labelling page;
physicians' think time beyond the 2 s draft cadence (the load is heavier than
three people typing); the clients share the machine's two cores with the
server. ``--var`` reuses a bootstrapped folder (the demo import, about a minute
and a half, is skipped).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from embedded_pipeline_bench import (  # noqa: E402 - after the path
    PHYSICIANS,
    Figures,
    _login,
    _open,
    _payload,
)

from benchmarks._cpu import tree_cpu  # noqa: E402
from benchmarks._embedded import (  # noqa: E402 - after the path
    bootstrap,
    embedded_env,
    gold_campaign,
    hx_post,
    serve_start,
)
from benchmarks._server import process_stop  # noqa: E402
from benchmarks.percentiles import percentile  # noqa: E402

DRAFTS_PER_WINDOW = 3
DRAFT_EVERY_S = 2.0
SIGN_IN_EVERY_S = 30.0


@dataclass
class Soak:
    lock: threading.Lock = field(default_factory=threading.Lock)
    drafts: list[tuple[float, bool]] = field(default_factory=list)  # (ms, building)
    sign_ins: list[tuple[float, bool]] = field(default_factory=list)
    five_xx: int = 0
    refused: int = 0
    other_errors: list[str] = field(default_factory=list)
    submitted: dict[int, int] = field(default_factory=dict)  # assignment -> window
    last_submit_at: float = 0.0
    builds: list[str] = field(default_factory=list)
    building: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def error(self, what: str, error: Exception | None = None, status=None) -> None:
        with self.lock:
            if status is not None and status >= 500:
                self.five_xx += 1
                self.other_errors.append(f"{what}: HTTP {status}")
            elif error is not None and "refused" in str(error).lower():
                self.refused += 1
            else:
                self.other_errors.append(f"{what}: {status or error}")


def _campaign(windows: int) -> dict:
    made = gold_campaign(
        f"Embedded soak {time.strftime('%Y-%m-%d %H:%M:%S')}", windows, PHYSICIANS
    )
    work: dict[str, list] = {name: [] for name in PHYSICIANS}
    for assignment_id, window_id, username in made["assignments"]:
        work[username].append((assignment_id, window_id))
    return {"campaign": made["campaign"], "work": work}


def _post(session, base, path, data, csrf, soak: Soak, what: str):
    response = hx_post(session, base, path, data, csrf)
    if response.status_code != 200:
        soak.error(what, status=response.status_code)
        return None
    body = response.json() if response.content else {}
    if not body.get("ok"):
        soak.error(what, status=f"{response.status_code} {str(body)[:120]}")
        return None
    return body


def _physician(base: str, name: str, work: list, soak: Soak) -> None:
    import json

    import requests

    session = _login(base, name)
    for assignment_id, window_id in work:
        if soak.stop.is_set():
            return
        try:
            form = _open(session, base, assignment_id, Figures())
            version = form["version"]
            payload = _payload(window_id, form["actions"])
            for n in range(DRAFTS_PER_WINDOW):
                payload["acute_problems"][0]["text"] = f"Septic shock, draft {n}"
                building = soak.building.is_set()
                started = time.perf_counter()
                body = _post(
                    session,
                    base,
                    f"/annotate/{assignment_id}/draft/",
                    {
                        "payload": json.dumps(payload),
                        "base_version": str(version),
                        "active_seconds": "2",
                    },
                    form["csrf"],
                    soak,
                    "draft",
                )
                ms = (time.perf_counter() - started) * 1000
                if body is None:
                    break
                version = int(body["version"])
                with soak.lock:
                    soak.drafts.append((ms, building or soak.building.is_set()))
                soak.stop.wait(DRAFT_EVERY_S)
            payload = _payload(window_id, form["actions"])
            body = _post(
                session,
                base,
                f"/annotate/{assignment_id}/submit/",
                {
                    "payload": json.dumps(payload),
                    "base_version": str(version),
                    "active_seconds": "30",
                    "submission_id": form["submission_id"],
                },
                form["csrf"],
                soak,
                "submit",
            )
            if body is not None:
                with soak.lock:
                    soak.submitted[assignment_id] = window_id
                    soak.last_submit_at = time.time()
        except requests.RequestException as error:
            soak.error(f"{name} window {window_id}", error)
            soak.stop.wait(2)
            try:
                session = _login(base, name)
            except Exception as again:  # noqa: BLE001 - counted
                soak.error(f"{name} sign-in", again)
        except Exception as error:  # noqa: BLE001 - counted and shown
            soak.error(f"{name} window {window_id}", error)


def _sign_ins(base: str, soak: Soak) -> None:
    import requests

    while not soak.stop.wait(SIGN_IN_EVERY_S):
        building = soak.building.is_set()
        started = time.perf_counter()
        try:
            _login(base, "researcher")
        except (requests.RequestException, SystemExit) as error:
            soak.error("sign-in", error)
            continue
        with soak.lock:
            soak.sign_ins.append(((time.perf_counter() - started) * 1000, building))


def _builds(env: dict, campaign: int, every_s: float, soak: Soak) -> None:
    manage = [sys.executable, str(ROOT / "manage.py")]
    jobs = [
        ("oracle_run", [*manage, "oracle_run", "--campaign", str(campaign)]),
        (
            "surveillance release",
            [*manage, "build_release", "--kind", "surveillance", "--user", "admin"],
        ),
    ]
    while not soak.stop.is_set():
        for what, argv in jobs:
            soak.building.set()
            started = time.perf_counter()
            result = subprocess.run(
                argv, env=env, cwd=ROOT, capture_output=True, text=True
            )
            soak.building.clear()
            took = time.perf_counter() - started
            outcome = "ok" if result.returncode == 0 else f"exit {result.returncode}"
            line = f"{time.strftime('%H:%M:%S')} {what}: {outcome} in {took:.1f} s"
            if result.returncode:
                line += " :: " + (result.stderr or result.stdout).strip()[-300:]
            with soak.lock:
                soak.builds.append(line)
            print("  " + line, flush=True)
        soak.stop.wait(every_s)


def _ms(values: list[float]) -> str:
    if not values:
        return "no data"
    return (
        f"p50 {statistics.median(values):.1f} ms, p95 {percentile(values, 0.95):.1f}"
        f" ms, max {max(values):.0f} ms (n={len(values)})"
    )


def _database_check(campaign: int, submitted: dict[int, int]) -> dict:
    from django.db import connections
    from django.db.models import Count

    from annotation.models import Assignment, Label, WindowAgreement

    submitted_ids = set(submitted)
    in_db = set(
        Label.objects.filter(
            assignment_id__in=submitted_ids, submitted_at__isnull=False
        ).values_list("assignment_id", flat=True)
    )
    per_window: dict[int, set[int]] = {}
    for assignment_id, window_id in submitted.items():
        per_window.setdefault(window_id, set()).add(assignment_id)
    both = {
        w
        for w, ids in per_window.items()
        if Assignment.objects.filter(window_id=w, campaign_id=campaign).count()
        == len(ids)
    }
    agreements = dict(
        WindowAgreement.objects.filter(campaign_id=campaign, window_id__in=both)
        .values_list("window_id")
        .annotate(n=Count("id"))
        .values_list("window_id", "n")
    )
    connections.close_all()
    return {
        "labels_lost": len(submitted_ids - in_db),
        "windows_due": len(both),
        "agreement_missing": len([w for w in both if w not in agreements]),
        # One row per window is a constraint; counted all the same.
        "agreement_duplicated": len([w for w, n in agreements.items() if n > 1]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument(
        "--every", type=float, default=15.0, help="minutes between build rounds"
    )
    parser.add_argument("--var", type=Path, help="a bootstrapped var folder to reuse")
    parser.add_argument("--windows", type=int, default=1388)
    args = parser.parse_args()

    var = args.var or Path(tempfile.mkdtemp(prefix="realicu-soak-"))
    var.mkdir(parents=True, exist_ok=True)
    env = embedded_env(var)
    print(f"bootstrap in {bootstrap(env):.0f} s ({var})")
    data = _campaign(args.windows)

    log_path = var / "serve.log"
    log = open(log_path, "ab")  # noqa: SIM115 - closed below
    serve, base = serve_start(env, log, log_path)

    soak = Soak()
    wall0, cpu0, own0 = time.perf_counter(), tree_cpu(serve.pid), os.times()
    threads = [
        threading.Thread(
            target=_physician, args=(base, name, data["work"][name], soak), daemon=True
        )
        for name in PHYSICIANS
    ]
    threads.append(threading.Thread(target=_sign_ins, args=(base, soak), daemon=True))
    threads.append(
        threading.Thread(
            target=_builds,
            args=(env, data["campaign"], args.every * 60, soak),
            daemon=True,
        )
    )
    for thread in threads:
        thread.start()
    end_at = time.perf_counter() + args.hours * 3600
    try:
        while time.perf_counter() < end_at:
            time.sleep(min(60, max(0, end_at - time.perf_counter())))
            with soak.lock:
                drafts = [ms for ms, _ in soak.drafts]
                print(
                    f"  {(time.perf_counter() - wall0) / 60:5.1f} min: "
                    f"{len(soak.submitted)} submits, drafts {_ms(drafts)}, "
                    f"5xx {soak.five_xx}, refused {soak.refused}, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    except KeyboardInterrupt:
        print("interrupted: figures so far")
    soak.stop.set()
    for thread in threads:
        thread.join(timeout=600)
    # Two minutes for the last agreements.
    settle_until = max(time.time(), soak.last_submit_at + 120)
    time.sleep(max(0.0, settle_until - time.time()))
    wall = time.perf_counter() - wall0
    cpu = tree_cpu(serve.pid) - cpu0
    own = os.times()
    # The bench's clients and the commands it ran (oracle_run, build_release).
    own_cpu = sum(
        getattr(own, f) - getattr(own0, f)
        for f in ("user", "system", "children_user", "children_system")
    )
    load = os.getloadavg()
    process_stop(serve, timeout=60)
    log.close()

    text = log_path.read_text(errors="replace")
    crashes = len(re.findall(r"Unrecoverable error", text))
    tracebacks = text.count("Traceback (most recent call last)")
    restarts = len(re.findall(r"serve: (?:web|worker) .*starting it again", text))
    bad = var / "broker" / "bad"
    decode_errors = len(list(bad.iterdir())) if bad.exists() else 0
    figures = _database_check(data["campaign"], dict(soak.submitted))
    all_drafts = [ms for ms, _ in soak.drafts]
    building_drafts = [ms for ms, building in soak.drafts if building]
    print()
    print(
        f"soak: {wall / 3600:.2f} h wall; serve's process tree CPU {cpu:.0f} s "
        f"({100 * cpu / wall:.0f} % of one core), the clients' and the build "
        f"commands' CPU {own_cpu:.0f} s; "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    print(
        f"crashes (worker 'Unrecoverable error'): {crashes}; tracebacks in serve's "
        f"log: {tracebacks}"
    )
    print(f"restarts by serve's supervisor: {restarts}")
    print(
        f"5xx answers: {soak.five_xx}; refused connections: {soak.refused}; "
        f"other errors: {len(soak.other_errors)}"
    )
    for line in soak.other_errors[:10]:
        print(f"  {line}")
    print(
        f"submits answered ok: {len(soak.submitted)}; labels lost: "
        f"{figures['labels_lost']}"
    )
    print(
        f"windows fully submitted: {figures['windows_due']}; agreement missing "
        f"(lost messages): {figures['agreement_missing']}; duplicated: "
        f"{figures['agreement_duplicated']}; broker messages that could not be "
        f"decoded: {decode_errors}"
    )
    print(f"draft save, overall: {_ms(all_drafts)}")
    print(f"draft save, during builds: {_ms(building_drafts)}   (target p95 <= 300 ms)")
    print(f"sign-in, overall: {_ms([ms for ms, _ in soak.sign_ins])}")
    print(f"sign-in, during builds: {_ms([ms for ms, b in soak.sign_ins if b])}")
    print(f"build rounds: {len(soak.builds)} jobs")
    for line in soak.builds:
        print(f"  {line}")
    failed = (
        crashes
        or soak.five_xx
        or figures["labels_lost"]
        or figures["agreement_missing"]
        or decode_errors
    )
    return 1 if failed else 0


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    sys.exit(main())
