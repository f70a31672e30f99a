"""manage.py oracle_rules_report [--cohort ID] [--hours 12] [--checks]: how the
rules backbone (oracle.backbones.rules) labels the end of ICU stays, stays that
end in death against survivors, labelled in this process and stored nowhere.

A stay *ends in death* when the patient's death time falls inside the ICU stay
or within ``DEATH_AFTER_DISCHARGE_HOURS`` after its ICU discharge (deaths right
after a transfer out are usually of withdrawal or comfort care). *Survivors*
left the hospital alive (``Stay.hospital_outcome``). Stays of patients who died
later in the hospital are counted apart. The final hours are the windows whose
end lies within ``--hours`` of ICU discharge, as the issue measured them; those
starting after the recorded death are counted too (charting of a dead patient).

``--checks`` labels every window of the stays and counts what the rules must
never do: shock on vasopressors below the dose threshold, AKI switching on and
off, a fluid challenge beside an hourly mean MAP >= 70, raw charting names
among the added actions; and the recorded actions the rules rate as
recommended whose event names are raw charting (how windows name actions).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_row
from oracle.backbones import rules
from oracle.context import window_contexts_build
from windows.models import Cohort, Outcome, Stay, Window

DEATH_AFTER_DISCHARGE_HOURS = 24.0
BATCH = 200
STATUSES = ("improving", "stable", "deteriorating")
GROUPS = (
    ("death", "ends in death"),
    ("survived", "survivors"),
    ("died_later", "died later in hospital"),
)
# Charting vocabulary that is not a clinical action (issue 11).
RAW_CHARTING = re.compile(r"(_set\b|\bset\b$|^endotracheal tube$)", re.IGNORECASE)


def stay_group(stay: Stay) -> str:
    """death, survived or died_later (see the module docstring)."""
    death = stay.admission.patient.death_time
    if death is not None and stay.intime <= death <= stay.outtime + timedelta(
        hours=DEATH_AFTER_DISCHARGE_HOURS
    ):
        return "death"
    if stay.hospital_outcome == Outcome.SURVIVED:
        return "survived"
    return "died_later"


def _label(windows: list[Window]):
    """(window, context, status, payload) of each window, in batches."""
    for start in range(0, len(windows), BATCH):
        chunk = windows[start : start + BATCH]
        contexts = window_contexts_build(windows=chunk)
        for window, context in zip(chunk, contexts):
            status, payload = rules.rules_label(context)
            yield window, context, status, payload


def _table(counts: dict[str, Counter]) -> list[str]:
    lines = [f"{'':26} {'windows':>8} " + " ".join(f"{s:>15}" for s in STATUSES)]
    for key, label in GROUPS:
        row = counts[key]
        total = sum(row[s] for s in STATUSES)
        cells = " ".join(
            f"{row[s]:>6} ({100 * row[s] / total if total else 0:4.1f} %)"
            for s in STATUSES
        )
        lines.append(
            f"{label + ' (' + str(row['stays']) + ' stays)':26} {total:>8} {cells}"
        )
    return lines


class Command(BaseCommand):
    help = (
        "Status distribution of the rules Oracle in the last hours of ICU stays "
        "that end in death vs survivors (nothing is stored)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--cohort", type=int, help="Cohort id (default: every stay)."
        )
        parser.add_argument(
            "--hours", type=float, default=12.0, help="Final hours of each stay (12)."
        )
        parser.add_argument(
            "--checks",
            action="store_true",
            help="Also label every window and count the rules' known failure modes.",
        )

    def handle(self, *args, cohort=None, hours=12.0, checks=False, **options):
        stays = Stay.objects.select_related("admission__patient").order_by("pk")
        if cohort is not None:
            stays = stays.filter(cohorts=command_row(Cohort, cohort, "cohort"))
        stays = list(stays)
        groups = {s.pk: stay_group(s) for s in stays}
        by_pk = {s.pk: s for s in stays}
        windows = list(
            Window.objects.filter(stay__in=stays).order_by("stay_id", "index")
        )
        if not windows:
            raise CommandError(
                "No windows: build them first (manage.py build_windows)."
            )
        final = [
            w
            for w in windows
            if w.end > by_pk[w.stay_id].outtime - timedelta(hours=hours)
        ]
        counts = {key: Counter() for key, _ in GROUPS}
        seen: dict[str, set] = {key: set() for key, _ in GROUPS}
        after_death = Counter()
        for window, _context, status, _payload in _label(final):
            stay = by_pk[window.stay_id]
            group = groups[stay.pk]
            counts[group][status] += 1
            seen[group].add(stay.pk)
            death = stay.admission.patient.death_time
            if death is not None and window.start >= death:
                after_death[status] += 1
        for key, _ in GROUPS:
            counts[key]["stays"] = len(seen[key])
        self.stdout.write(
            f"Rules Oracle ({rules.MODEL}): status in the last {hours:g} h of "
            f"{len(stays)} ICU stays"
        )
        for line in _table(counts):
            self.stdout.write(line)
        if after_death:
            self.stdout.write(
                f"  of which windows starting after the recorded death: "
                f"{sum(after_death.values())} ("
                + ", ".join(f"{s} {after_death[s]}" for s in STATUSES)
                + ")"
            )
        if checks:
            self._checks(windows)

    def _checks(self, windows: list[Window]) -> None:
        shock_low = shock = fluid = fluid_map70 = raw = 0
        raw_rated: Counter = Counter()
        flips: Counter = Counter()
        previous: dict[int, bool] = {}
        for window, context, _status, payload in _label(windows):
            facts = rules._Window(context)
            ned = facts.value("ned", "last")
            # The hourly means of the hours the window overlaps.
            window_map = facts.numbers("map", facts.rows(facts.start_h, facts.last_h))
            for item in payload["acute_problems"]:
                if "shock on vasopressors" in item["text"]:
                    shock += 1
                    if ned is not None and ned <= rules.SHOCK_NED_MIN:
                        shock_low += 1
            for item in payload["added_actions"]:
                text = item["text"]
                if "fluid challenge" in text.lower():
                    fluid += 1
                    if window_map and sum(window_map) / len(window_map) >= 70:
                        fluid_map70 += 1
                if RAW_CHARTING.search(text.strip()):
                    raw += 1
            # Rated recorded actions join the recommended set under their event
            # names (annotation.consensus._label_items).
            names = {
                e["id"]: str(e.get("name") or "") for e in context.recorded_actions
            }
            for rating in payload["action_ratings"]:
                name = names.get(rating["event_id"], "")
                if rating["rating"] != "potentially_harmful" and RAW_CHARTING.search(
                    name
                ):
                    raw_rated[name.lower()] += 1
            aki = any(p["text"].startswith("AKI") for p in payload["acute_problems"])
            last = previous.get(window.stay_id)
            if last is not None and last != aki:
                flips[window.stay_id] += 1
            previous[window.stay_id] = aki
        self.stdout.write(f"Checks over {len(windows)} windows:")
        self.stdout.write(
            f"  shock on vasopressors: {shock} windows, {shock_low} at a "
            f"norepinephrine equivalent <= {rules.SHOCK_NED_MIN} mcg/kg/min"
        )
        self.stdout.write(
            f"  AKI problem switched on or off {sum(flips.values())} times "
            f"in {len(flips)} stays"
        )
        self.stdout.write(
            f"  fluid challenge: {fluid} windows, {fluid_map70} with hourly mean "
            "MAP >= 70"
        )
        self.stdout.write(f"  added actions named by raw charting: {raw}")
        self.stdout.write(
            f"  recommended recorded actions named by raw charting: "
            f"{sum(raw_rated.values())}"
            + "".join(f"; {name} {n}" for name, n in raw_rated.most_common(5))
        )
