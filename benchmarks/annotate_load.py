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
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import database_create, database_done  # noqa: E402
from benchmarks._parts import clif_demo_imported  # noqa: E402
from benchmarks._physicians import (  # noqa: E402
    PASSWORD,
    REQUEST_TIMEOUT_S,
    Physician,
    Results,
)
from benchmarks._server import (  # noqa: E402
    HOST,
    cpu_report,
    cpu_snapshot,
    gunicorn_shape,
    start_gunicorn,
    stop_gunicorn,
    wait_until_up,
)
from benchmarks.percentiles import percentile  # noqa: E402 - after the path
from loopback import free_port  # noqa: E402

BENCH_DB = f"realicu_loadbench_{os.getpid()}"


# Data -------------------------------------------------------------------------


def _build_data(*, physicians: int, per_physician: int) -> dict:
    """Demo stays, Gold windows, physicians and a campaign, by the real services."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from accounts.roles import Role, roles_ensure
    from annotation import services
    from windows.models import Stay, Window
    from windows.windowing import windows_build_many

    clif_demo_imported()
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


# Clients ----------------------------------------------------------------------


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

    os.environ["DATABASE_URL"] = database_create(BENCH_DB)
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
        port = free_port()
        base = f"http://{HOST}:{port}"
        log_path = Path(os.environ["REALICU_VAR_DIR"]) / "gunicorn.log"
        env = dict(os.environ, DJANGO_DEBUG="0")
        proc = start_gunicorn(
            port, env, log_path, workers=args.workers, threads=args.threads
        )
        wait_until_up(base, proc)
        print(
            f"gunicorn ({gunicorn_shape(args.workers, args.threads)}) up on {base}; "
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
        cpu_before = cpu_snapshot(proc.pid, BENCH_DB)
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
        cpu_after = cpu_snapshot(proc.pid, BENCH_DB)
        stop_gunicorn(proc)
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
        for line in cpu_report(cpu_before, cpu_after, elapsed):
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
            stop_gunicorn(proc)
        database_done(BENCH_DB, keep=args.keep)
    return exit_code


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    sys.exit(main())
