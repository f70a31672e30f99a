"""Page weight of the labelling page (issue 20): for each Gold window of the CLIF
demo, assigned to one physician, the bytes of the annotation page's HTML and of
the tracks JSON its plots fetch (``?window=<index>&sources=1``), as sent with
and without gzip (``Accept-Encoding: gzip``); p50 and p95 over the windows of
each and of their sum (200 windows spread over the stays unless --windows
says otherwise). Bytes are the response bodies (headers aside), as
Django's test Client receives them through the whole middleware stack.
Target: HTML + JSON p95 under 60 KB with gzip.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \\
        python benchmarks/page_weight_bench.py [--windows N | --windows 0]

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there, named after it (``<name>_page_weight``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import (  # noqa: E402 - after the path
    database_create,
    database_done,
    database_name,
)
from benchmarks._parts import django_here  # noqa: E402
from benchmarks.percentiles import percentile  # noqa: E402

TRACKS_URL = re.compile(r'data-tracks-url="([^"]+)"')
BENCH_DB = database_name("page_weight")


def _kb(value: float) -> str:
    return f"{value / 1024:.1f} KB"


def _setup(sample: int):
    """The demo imported with its windows, and a campaign of ``sample`` of its
    Gold windows spread evenly over them by stay and index (0: all of them)
    for one physician."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from accounts.roles import Role, roles_ensure
    from annotation.models import Assignment
    from annotation.services import campaign_create
    from windows.importers.clif import clif_import
    from windows.models import Stay, Window
    from windows.tracks import stay_tracks_get
    from windows.windowing import windows_build_many

    call_command("migrate", verbosity=0)
    clif_import()
    windows_build_many(stays=Stay.objects.all(), seed=0)
    for stay in Stay.objects.all():
        stay_tracks_get(stay=stay)
    gold = Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")
    gold = list(gold)
    if 0 < sample < len(gold):
        gold = [gold[n * len(gold) // sample] for n in range(sample)]
    users = get_user_model().objects
    admin = users.create_superuser("bench-admin", password="x")
    physician = users.create_user("bench-physician", password="x")
    physician.groups.add(roles_ensure()[Role.PHYSICIAN])
    campaign = campaign_create(
        admin=admin,
        name="page weight",
        windows=gold,
        physicians=[physician],
        annotators_per_window=1,
    )
    assignments = list(
        Assignment.objects.filter(campaign=campaign)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return physician, assignments


def _measure(physician, assignments: list[int]) -> dict[str, dict[str, list[int]]]:
    from django.test import Client

    sizes: dict[str, dict[str, list[int]]] = {
        encoding: {"html": [], "json": [], "total": []}
        for encoding in ("identity", "gzip")
    }
    client = Client(SERVER_NAME="localhost")
    client.force_login(physician)
    for pk in assignments:
        for encoding, figures in sizes.items():
            page = client.get(f"/annotate/{pk}/", HTTP_ACCEPT_ENCODING=encoding)
            assert page.status_code == 200, (pk, page.status_code)
            html = page.content
            if encoding == "gzip":
                import gzip

                assert page.get("Content-Encoding") == "gzip", "page not compressed"
                html = gzip.decompress(page.content)
            url = TRACKS_URL.search(html.decode()).group(1).replace("&amp;", "&")
            url += ("&" if "?" in url else "?") + "sources=1"
            tracks = client.get(url, HTTP_ACCEPT_ENCODING=encoding)
            assert tracks.status_code == 200, (url, tracks.status_code)
            figures["html"].append(len(page.content))
            figures["json"].append(len(tracks.content))
            figures["total"].append(len(page.content) + len(tracks.content))
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--windows",
        type=int,
        default=200,
        help="Gold windows measured, spread evenly over all of them (0: all)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    django_here(database_create(BENCH_DB), "realicu-pageweight-")

    try:
        physician, assignments = _setup(args.windows)
        sizes = _measure(physician, assignments)
        print(f"page weight over {len(assignments)} Gold windows of the CLIF demo:")
        for encoding, figures in sizes.items():
            print(
                f"{encoding:>8}: "
                + "; ".join(
                    f"{part} p50 {_kb(percentile(v, 0.5))} p95 "
                    f"{_kb(percentile(v, 0.95))}"
                    for part, v in figures.items()
                )
            )
        total = percentile(sizes["gzip"]["total"], 0.95)
        print(
            f"HTML + JSON with gzip, p95: {_kb(total)} "
            f"({'within' if total < 60 * 1024 else 'over'} the 60 KB target)"
        )
    finally:
        database_done(BENCH_DB, keep=args.keep)


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
