"""Window page speed: server time (wall and CPU) and query count of the
window page (its 6-hour view, its whole-stay view and that view's last page),
of the stay page's last page and of the tracks JSON, for the longest CLIF
demo stay and for a generated 1,800-hour stay with the event density of the
demo's busiest stay (the last page is the hard case, issue 35).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/window_page_bench.py

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there, ``<name>_window_page``. The pages are asked
for by a physician to whom a Gold campaign assigns both stays' Gold windows
(the role and assignment a physician has when labelling). Each figure is the
time Django's test Client takes to answer (middleware, view, queries,
template; no network, no browser rendering), over 50 requests after 3 warm-up
ones, for the middle one of the stay's Gold windows, with this process's CPU time
beside it (the database server's is not in it) and the load average after
each stay's requests. Targets: p95 <= 150 ms for every request, the
whole-stay view included; CPU p95 <= 300 ms (issue 35); query counts the same
for both stays.

Left out: the network, gzip (page_weight_bench measures bytes on the wire),
the browser's rendering and plotting, and concurrent users.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import (  # noqa: E402 - after the path
    database_create,
    database_done,
    database_name,
)
from benchmarks._page_timing import page_timed  # noqa: E402
from benchmarks._parts import clif_demo_imported, django_here  # noqa: E402
from benchmarks.percentiles import percentile  # noqa: E402 - after the path

BENCH_DB = database_name("window_page")
LONG_HOURS = 1800
MIN_HOURS_FOR_BUSIEST = 24  # a stay of minutes says little about a rate per hour


def _icu_events(stay):
    from windows.models import Event

    return Event.objects.filter(
        admission_id=stay.admission_id, time__gte=stay.intime, time__lt=stay.outtime
    )


def _busiest_stay():
    """The demo stay of at least a day with the most events per ICU hour."""
    from windows.models import Stay

    best, best_rate = None, -1.0
    for stay in Stay.objects.all():
        if stay.length_hours < MIN_HOURS_FOR_BUSIEST:
            continue
        rate = _icu_events(stay).count() / stay.length_hours
        if rate > best_rate:
            best, best_rate = stay, rate
    return best, best_rate


def _long_stay(template, hours: int):
    """A new ``hours``-long stay whose events repeat ``template``'s ICU events
    (outcomes and transfers left out) end to end, so that it has the same mix
    and events per hour."""
    from windows.event_fields import EVENT_VALUE_FIELDS
    from windows.models import (
        Admission,
        Event,
        EventKind,
        Patient,
        Source,
        Stay,
    )
    from windows.selectors_context import OUTCOME_REVEALING_CATEGORIES

    patient = Patient.objects.create(
        source=Source.CLIF,
        source_id="bench-long",
        pseudo_id="PBENCHLONG01",
        sex="Female",
        age=66,
    )
    intime = template.intime
    admission = Admission.objects.create(
        patient=patient,
        source=Source.CLIF,
        source_id="bench-long",
        admit_time=intime - timedelta(hours=6),
        discharge_time=intime + timedelta(hours=hours + 24),
        age_at_admission=66,
    )
    stay = Stay.objects.create(
        admission=admission,
        source=Source.CLIF,
        source_id="bench-long",
        care_unit=template.care_unit,
        intime=intime,
        outtime=intime + timedelta(hours=hours),
        hospital_outcome=template.hospital_outcome,
        admission_diagnosis=template.admission_diagnosis,
        disease_group=template.disease_group,
    )
    fields = ["time", "end_time", *EVENT_VALUE_FIELDS, "source_table"]
    rows = list(
        _icu_events(template)
        .exclude(kind=EventKind.OUTCOME)
        .exclude(category__in=OUTCOME_REVEALING_CATEGORIES)
        .exclude(domain="adt")
        .values_list(*fields)
    )
    period = template.outtime - template.intime
    events, n, shift = [], 0, timedelta(0)
    while shift < timedelta(hours=hours):
        for row in rows:
            values = dict(zip(fields, row, strict=True))
            when = values["time"] - template.intime + shift
            if when >= timedelta(hours=hours):
                continue
            values["time"] = intime + when
            if values["end_time"] is not None:
                values["end_time"] = (
                    values["end_time"] - template.intime + shift + intime
                )
            n += 1
            events.append(Event(admission=admission, source_key=f"bench:{n}", **values))
        shift += period
    Event.objects.bulk_create(events, batch_size=5000)
    return stay


def _prepare(stay) -> dict:
    from windows.tracks import stay_tracks_get
    from windows.windowing import windows_build, windows_sample_gold

    started = time.perf_counter()
    windows = windows_build(stay=stay, window_minutes=30, stride_hours=2)
    windows_sample_gold(stay=stay, seed=0)
    stay_tracks_get(stay=stay)
    return {"windows": len(windows), "prepare_s": time.perf_counter() - started}


def _physician_assigned(windows):
    """A physician to whom a Gold campaign assigns ``windows`` (one annotator
    a window), as when labelling them."""
    from django.contrib.auth import get_user_model

    from accounts.roles import Role, roles_ensure
    from annotation.services import campaign_create

    users = get_user_model().objects
    admin = users.create_superuser("bench-admin", password="bench pass 1")
    physician = users.create_user("bench-physician", password="bench pass 1")
    physician.groups.add(roles_ensure()[Role.PHYSICIAN])
    campaign_create(
        admin=admin,
        name="window page bench",
        windows=list(windows),
        physicians=[physician],
        annotators_per_window=1,
    )
    return physician


def main() -> None:
    from benchmarks._cpu import load, report_at_exit  # wall, CPU and load

    report_at_exit()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    django_here(database_create(BENCH_DB), "realicu-winbench-")
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from windows.models import Event, Stay, Window

    try:
        clif_demo_imported()

        longest = max(Stay.objects.all(), key=lambda s: s.length_hours)
        busiest, rate = _busiest_stay()
        print(
            f"Busiest demo stay (>= {MIN_HOURS_FOR_BUSIEST} h): stay {busiest.pk}, "
            f"{busiest.length_hours:.0f} h, {rate:.1f} events/h"
        )
        started = time.perf_counter()
        generated = _long_stay(busiest, LONG_HOURS)
        print(
            f"Generated stay {generated.pk}: {LONG_HOURS:,} h, "
            f"{Event.objects.filter(admission_id=generated.admission_id).count():,} "
            f"events in {time.perf_counter() - started:.1f} s"
        )

        # As autovacuum would after a bulk load: plans then see the real sizes.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

        stays = (("longest demo stay", longest), ("generated stay", generated))
        prepared = {stay.pk: _prepare(stay) for _, stay in stays}
        user = _physician_assigned(
            Window.objects.filter(
                stay__in=[stay for _, stay in stays], sampled_gold=True
            )
        )
        client = Client(SERVER_NAME="localhost")
        client.force_login(user)

        rows, loads = [], {}
        for label, stay in stays:
            gold = list(
                Window.objects.filter(stay=stay, sampled_gold=True)
                .order_by("index")
                .values_list("index", flat=True)
            )
            middle = gold[len(gold) // 2]
            events = Event.objects.filter(admission_id=stay.admission_id).count()
            print(
                f"{label}: stay {stay.pk}, {stay.length_hours:,.0f} h, {events:,} "
                f"admission events, {prepared[stay.pk]['windows']} windows; windows, "
                f"Gold draw and tracks in {prepared[stay.pk]['prepare_s']:.1f} s"
            )
            page = reverse("windows:window_detail", args=[stay.pk, middle])
            data = (
                reverse("windows:stay_tracks_json", args=[stay.pk])
                + f"?window={middle}"
            )
            first = client.get(data)
            assert first.status_code == 200, (data, first.status_code)
            etag = first["ETag"]
            stay_page = reverse("windows:stay_detail", args=[stay.pk])
            for what, url, headers in (
                ("window page", page, {}),
                ("window page, whole stay", page + "?scope=stay", {}),
                # Paginator.get_page: a number past the end is the last page.
                ("whole stay, last page", page + "?scope=stay&page=1000000", {}),
                ("stay page, last page", stay_page + "?page=1000000", {}),
                ("tracks JSON", data, {}),
                ("tracks JSON, 304", data, {"HTTP_IF_NONE_MATCH": etag}),
            ):
                timed = page_timed(client, url, args.requests, ok=(200, 304), **headers)
                rows.append((label, stay.length_hours, what, timed))
                loads[label] = load()

        print()
        print(
            f"{'stay':<18} {'hours':>6}  {'request':<24} {'wall p50':>8} {'p95':>7} "
            f"{'CPU p50':>7} {'p95':>7} {'queries':>7} {'bytes':>9}"
        )
        for label, hours, what, timed in rows:
            print(
                f"{label:<18} {hours:>6.0f}  {what:<24} "
                f"{statistics.median(timed.walls):>8.1f} "
                f"{percentile(timed.walls, 0.95):>7.1f} "
                f"{statistics.median(timed.cpus):>7.1f} "
                f"{percentile(timed.cpus, 0.95):>7.1f} "
                f"{timed.queries:>7} {timed.size:>9,}"
            )
        for label, measured in loads.items():
            print(f"After the {label}'s requests: {measured}")

        whole = max(percentile(t.walls, 0.95) for _, _, w, t in rows if "whole" in w)
        worst = max(percentile(t.walls, 0.95) for _, _, _, t in rows)
        worst_cpu = max(percentile(t.cpus, 0.95) for _, _, _, t in rows)
        by_request: dict[str, set[int]] = {}
        for _, _, what, timed in rows:
            by_request.setdefault(what, set()).add(timed.queries)
        same = all(len(counts) == 1 for counts in by_request.values())
        print()
        print(
            f"Window page, whole-stay view, worst p95: {whole:.1f} ms "
            f"(target <= 150 ms: {'met' if whole <= 150 else 'NOT met'})"
        )
        print(
            f"Worst p95 of every request above: {worst:.1f} ms "
            f"(target <= 150 ms: {'met' if worst <= 150 else 'NOT met'})"
        )
        print(
            f"Worst CPU p95 of every request above: {worst_cpu:.1f} ms (issue 35: "
            f"every page <= 300 ms: {'met' if worst_cpu <= 300 else 'NOT met'})"
        )
        print(f"Query counts the same for both stays: {'yes' if same else 'NO'}")
    finally:
        database_done(BENCH_DB, keep=args.keep)


if __name__ == "__main__":
    main()
