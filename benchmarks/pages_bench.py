"""Every slow-prone page at its hardest case (issue 35: each page's p95 <= 300
ms): the surveillance stay page of the longest stay (its first view, with the
checkpoints not yet computed: the page asks a worker for them and says so;
its views once computed; and the worker's job itself), the Oracle run page and
its labels' last page for a run over every Gold window, the calibration list
and report for a set of realistic size, and the last page of every window
table: the stay list, the event table of the longest stay, the campaign's
window table and a physician's queue.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/pages_bench.py [--requests 20] [--keep] [--reuse]

DATABASE_URL names the server: the benchmark makes its own database there,
``<name>_pages`` (``--reuse`` keeps one a ``--keep`` run left, skipping the
set-up). The set-up: the CLIF demo imported, its windows built and Gold
sampled (as ``manage.py bootstrap``), the demo accounts, a campaign over every
Gold window (two physicians a window, a third submitted), a rules-backbone
Oracle run over it, and a calibration set of 3 tasks x 3 strata x 40 pairs,
each judged by the three demo physicians.

Each figure is Django's test Client answering (middleware, view, queries,
template; no network, no browser rendering), p50 and p95 over ``--requests``
requests after 3 warm-up ones: wall milliseconds and this process's CPU
milliseconds (the database server's own CPU is not in it), then the query
count and the load average after the page's requests. On a shared machine the
CPU figure is the work a request costs; the wall figure also holds the
waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._cpu import load, report_at_exit  # noqa: E402 - after the path
from benchmarks._database import (  # noqa: E402
    database_create,
    database_done,
    database_name,
    database_url,
)
from benchmarks._page_timing import page_timed  # noqa: E402
from benchmarks.campaign_pages_bench import (  # noqa: E402
    campaign_with_work,
    demo_imported_and_built,
)
from benchmarks.percentiles import percentile  # noqa: E402

BENCH_DB = database_name("pages")
TARGET_MS = 300
LAST = "page=1000000"  # Paginator.get_page: a number past the end is the last page
PAIRS_PER_STRATUM = 40
JOB = "surveillance checkpoints, worker's job"


@dataclass
class Figures:
    page: str
    walls: list[float]
    cpus: list[float]
    queries: int
    load: str
    job: bool = False  # a worker's job, not a page: no 300 ms target


def measure(page: str, client, url: str, requests: int, before=None) -> Figures:
    """``requests`` timed requests after 3 warm-up ones; ``before`` runs before
    each (the surveillance first view empties the cache)."""
    timed = page_timed(client, url, requests, before=before)
    return Figures(page, timed.walls, timed.cpus, timed.queries, load())


def _job(runs: int) -> Figures:
    """The worker's job the surveillance page asks for: the longest stay's
    checkpoints computed into the empty cache, ``runs`` times."""
    from django.core.cache import cache

    from surveillance.tasks import stay_checkpoints_task

    stay = _longest_stay()
    walls, cpus = [], []
    for _ in range(runs):
        cache.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        stay_checkpoints_task(stay.pk)
        walls.append(1000 * (time.perf_counter() - wall))
        cpus.append(1000 * (time.process_time() - cpu))
    return Figures(JOB, walls, cpus, 0, load(), job=True)


def _longest_stay():
    from django.db.models import ExpressionWrapper, F, fields

    from windows.models import Stay

    length = ExpressionWrapper(
        F("outtime") - F("intime"), output_field=fields.DurationField()
    )
    return Stay.objects.annotate(length=length).order_by("-length", "pk").first()


def _oracle_run(admin, campaign):
    from oracle.selectors import backbone_rules_default
    from oracle.services.chunks import oracle_run_execute_inline
    from oracle.services.runs import oracle_run_create

    run = oracle_run_create(
        admin=admin,
        name="Rules over every Gold window",
        backbone=backbone_rules_default(),
        campaign=campaign,
        enqueue=False,
    )
    oracle_run_execute_inline(run_id=run.pk)
    return run


def _calibration_set(admin, campaign, physicians):
    """A set of 3 tasks x 3 strata x PAIRS_PER_STRATUM pairs, every pair
    judged by every physician, all of them invited."""
    import random

    from django.utils import timezone

    from annotation.models import (
        CalibrationInvitation,
        CalibrationJudgment,
        CalibrationPair,
        CalibrationSet,
        CalibrationStratum,
        ConsensusTask,
    )

    rng = random.Random(0)
    now = timezone.now()
    calibration_set = CalibrationSet.objects.create(
        name="Bench set",
        model_name="bench-model",
        tau_at_draw=0.8,
        band=0.05,
        created_by=admin,
    )
    calibration_set.campaigns.add(campaign)
    tasks = [
        ConsensusTask.ACUTE_PROBLEMS,
        ConsensusTask.RECOMMENDED_ACTIONS,
        ConsensusTask.RED_FLAGS,
    ]
    pairs = []
    for task in tasks:
        for stratum in CalibrationStratum.values:
            for n in range(PAIRS_PER_STRATUM):
                pairs.append(
                    CalibrationPair(
                        calibration_set=calibration_set,
                        position=len(pairs),
                        task=task,
                        text_a=f"{task} item {n} a",
                        text_b=f"{task} item {n} b",
                        cosine=rng.uniform(0.5, 0.95),
                        stratum=stratum,
                    )
                )
    pairs = CalibrationPair.objects.bulk_create(pairs)
    CalibrationInvitation.objects.bulk_create(
        CalibrationInvitation(
            calibration_set=calibration_set, judge=p, invited_by=admin, invited_at=now
        )
        for p in physicians
    )
    CalibrationJudgment.objects.bulk_create(
        CalibrationJudgment(
            pair=pair,
            judge=p,
            same=pair.cosine + rng.gauss(0, 0.05) > 0.8,
            judged_at=now,
        )
        for pair in pairs
        for p in physicians
    )
    return calibration_set


def _set_up() -> None:
    """What the database lacks of the set-up (all of it, unless --reuse)."""
    from django.core.management import call_command
    from django.db import connection

    from accounts.provisioning import demo_accounts_ensure
    from annotation.models import CalibrationSet, Campaign
    from oracle.models import OracleRun
    from windows.models import Stay

    call_command("migrate", verbosity=0)
    if not Stay.objects.exists():
        started = time.perf_counter()
        demo_imported_and_built()
        took = time.perf_counter() - started
        print(f"CLIF demo imported, windows built: {took:.0f} s")
    demo_accounts_ensure()
    admin, physicians = _accounts()
    campaign = Campaign.objects.order_by("pk").first()
    if campaign is None:
        campaign, *_ = campaign_with_work(admin, physicians)
    if not OracleRun.objects.exists():
        started = time.perf_counter()
        _oracle_run(admin, campaign)
        took = time.perf_counter() - started
        print(f"Rules Oracle run over the campaign: {took:.0f} s")
    if not CalibrationSet.objects.exists():
        _calibration_set(admin, campaign, physicians)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _accounts():
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    physicians = list(users.filter(username__startswith="physician").order_by("pk"))
    return users.get(username="admin"), physicians


def _cases(as_admin, as_doctor) -> list[tuple]:
    """(page, client, url, before) for each measured page."""
    from django.core.cache import cache
    from django.urls import reverse

    from annotation.models import CalibrationSet, Campaign
    from oracle.models import OracleRun

    longest = _longest_stay()
    campaign = Campaign.objects.order_by("pk").first()
    run = OracleRun.objects.order_by("pk").first()
    calibration_set = CalibrationSet.objects.order_by("pk").first()
    surveillance = reverse("surveillance:stay_checkpoints", args=[longest.pk])
    print(
        f"Longest stay {longest.pk}: {longest.length_hours:.0f} h; campaign "
        f"{campaign.campaign_windows.count():,} windows; Oracle run "
        f"{run.labels.count():,} labels; calibration set "
        f"{calibration_set.pairs.count()} pairs"
    )

    def computed() -> None:
        from surveillance.tasks import stay_checkpoints_task

        stay_checkpoints_task(longest.pk)

    stay_page = reverse("windows:stay_detail", args=[longest.pk])
    stay_list = reverse("windows:stay_list")
    run_page = reverse("oracle:run_detail", args=[run.pk])
    return [
        ("surveillance stay, first view", as_admin, surveillance, cache.clear),
        ("surveillance stay, computed", as_admin, surveillance, computed),
        ("Oracle run page", as_admin, run_page, None),
        (
            "Oracle run labels, last page",
            as_admin,
            reverse("oracle:run_labels", args=[run.pk]) + f"?{LAST}",
            None,
        ),
        ("calibration list", as_admin, reverse("annotation:calibration_list"), None),
        (
            "calibration report",
            as_admin,
            reverse("annotation:calibration_report", args=[calibration_set.pk]),
            None,
        ),
        ("stay list, last page", as_admin, f"{stay_list}?{LAST}", None),
        ("longest stay's events, last page", as_admin, f"{stay_page}?{LAST}", None),
        (
            "campaign windows, last page",
            as_admin,
            reverse("annotation:campaign_detail", args=[campaign.pk]) + f"?{LAST}",
            None,
        ),
        ("queue, last page", as_doctor, reverse("annotation:queue") + f"?{LAST}", None),
    ]


def main() -> None:
    report_at_exit()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--first-views", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--reuse", action="store_true", help="use the database a --keep run left"
    )
    parser.add_argument("--only", default="", help="measure the pages naming this")
    args = parser.parse_args()

    if args.reuse:
        os.environ["DATABASE_URL"] = database_url(BENCH_DB)
    else:
        os.environ["DATABASE_URL"] = database_create(BENCH_DB)
    os.environ.setdefault("REALICU_VAR_DIR", tempfile.mkdtemp(prefix="realicu-pages-"))
    os.environ["CACHE_URL"] = "locmemcache://"
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    import django

    django.setup()
    from django.test import Client

    try:
        _set_up()
        admin, physicians = _accounts()
        as_admin = Client(SERVER_NAME="localhost")
        as_admin.force_login(admin)
        as_doctor = Client(SERVER_NAME="localhost")
        as_doctor.force_login(physicians[0])
        rows = []
        for page, client, url, before in _cases(as_admin, as_doctor):
            if args.only and args.only not in page:
                continue
            first = page.endswith("first view")
            requests = args.first_views if first else args.requests
            rows.append(measure(page, client, url, requests, before))
            print(f"  measured {page}", flush=True)
        if args.only in JOB:
            rows.append(_job(args.first_views))
        _print(rows)
    finally:
        database_done(BENCH_DB, keep=args.keep)


def _print(rows: list[Figures]) -> None:
    print()
    print(
        f"{'page':<40} {'n':>3} {'wall p50':>8} {'p95':>7} {'CPU p50':>8} "
        f"{'p95':>7} {'queries':>7}  load after"
    )
    for r in rows:
        print(
            f"{r.page:<40} {len(r.walls):>3} {statistics.median(r.walls):>8.1f} "
            f"{percentile(r.walls, 0.95):>7.1f} {statistics.median(r.cpus):>8.1f} "
            f"{percentile(r.cpus, 0.95):>7.1f} {r.queries:>7}  {r.load}"
        )
    pages = [r for r in rows if not r.job]
    for figure, at in (("CPU", "cpus"), ("wall", "walls")):
        over = [r.page for r in pages if percentile(getattr(r, at), 0.95) > TARGET_MS]
        print(
            f"Pages over {TARGET_MS} ms p95, {figure}: "
            f"{', '.join(over) if over else 'none'}"
        )
    print("(On a shared machine the wall figure also holds the wait for a core.)")


if __name__ == "__main__":
    main()
