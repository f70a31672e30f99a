"""The admin's surveillance stay page (/surveillance/stays/<id>/) on the
imported data, at its hardest case, the longest stay: the first view (the
checkpoints computed, 13 replays of the concept tracks) and the views after it
(read back from the cache until the trajectory changes, issue 35).

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


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


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
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    for stay in stays:
        url = f"/surveillance/stays/{stay.pk}/"
        cache.clear()
        walls, cpus = [], []
        for _ in range(args.repeat + 1):
            wall, cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            walls.append(1000 * (time.perf_counter() - wall))
            cpus.append(1000 * (time.process_time() - cpu))
            assert response.status_code == 200, response.status_code
        hours = stay.length.total_seconds() / 3600
        print(
            f"stay {stay.pk} ({hours:.0f} h): first view {walls[0]:.0f} ms wall, "
            f"{cpus[0]:.0f} ms CPU; next {args.repeat}: p50 "
            f"{statistics.median(walls[1:]):.1f} ms wall "
            f"({statistics.median(cpus[1:]):.1f} ms CPU), p95 {_p95(walls[1:]):.1f} ms "
            f"wall ({_p95(cpus[1:]):.1f} ms CPU)"
        )
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
