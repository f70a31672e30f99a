"""The admin's surveillance stay page (/surveillance/stays/<id>/) on the
imported data, at its hardest case, the longest stay: the first view (the
checkpoints not computed yet: the page asks a worker and says so), the
worker's job (13 replays of the concept tracks, run here) and the views after
it (read back from the cache until the trajectory changes, issue 35).

    python benchmarks/surveillance_page_bench.py [--repeat 20] [--stays 1]

Needs a database with imported stays (the CLIF demo: manage.py import_clif
--demo). Prints wall and CPU milliseconds of each view (p50, p95) and the load
average, so a figure on a loaded machine can be told from the load."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")


def _timed(step, *args) -> tuple[float, float]:
    """Wall and CPU milliseconds of ``step(*args)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    step(*args)
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def _view(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 200, response.status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--stays", type=int, default=1, help="longest stays measured")
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db.models import ExpressionWrapper, F, fields
    from django.test import Client

    from accounts.roles import Role, roles_ensure
    from benchmarks._cpu import load
    from benchmarks.percentiles import percentile
    from surveillance.tasks import stay_checkpoints_task
    from windows.models import Stay

    admin, _ = get_user_model().objects.get_or_create(
        username="surveillance-bench", defaults={"is_staff": True}
    )
    admin.groups.add(roles_ensure()[Role.ADMIN])
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(admin)
    length = ExpressionWrapper(
        F("outtime") - F("intime"), output_field=fields.DurationField()
    )
    stays = list(Stay.objects.annotate(length=length).order_by("-length")[: args.stays])
    if not stays:
        sys.exit("No stays: import the CLIF demo first (manage.py import_clif --demo).")
    # The process's first request imports and compiles what every later one
    # reuses (and its first message connects to the broker): not the page's.
    _view(client, f"/surveillance/stays/{Stay.objects.order_by('pk').first().pk}/")
    print(f"At start: {load()}")
    for stay in stays:
        url = f"/surveillance/stays/{stay.pk}/"
        cache.clear()
        first = _timed(_view, client, url)
        job = _timed(stay_checkpoints_task, stay.pk)
        views = [_timed(_view, client, url) for _ in range(args.repeat)]
        walls, cpus = [w for w, _ in views], [c for _, c in views]
        hours = stay.length.total_seconds() / 3600
        print(
            f"stay {stay.pk} ({hours:.0f} h): first view {first[0]:.0f} ms wall, "
            f"{first[1]:.0f} ms CPU; the worker's job {job[0]:.0f} ms wall, "
            f"{job[1]:.0f} ms CPU; next {args.repeat} views: p50 "
            f"{statistics.median(walls):.1f} ms wall "
            f"({statistics.median(cpus):.1f} ms CPU), p95 "
            f"{percentile(walls, 0.95):.1f} ms wall ({percentile(cpus, 0.95):.1f} ms "
            f"CPU); {load()}"
        )
    print(f"At end: {load()}")


if __name__ == "__main__":
    main()
