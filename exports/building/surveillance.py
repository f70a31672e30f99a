"""The files of a CodeClinic surveillance release (spec section 10): one record
per checkpoint (t = 0, 4, ..., 48 h, or to discharge) with its decision and
findings, each stay's bedside context up to its last checkpoint (the context of
a checkpoint is the events with ``time`` strictly before it, the same events
its labels were computed from), a data card with the finding frequencies and
a manifest with every file's checksum."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from exports.building.batches import ReleaseRows
from exports.building.context import _EventLines, _stay_events
from exports.building.manifest import folder_files, manifest_head, manifest_write
from exports.data_use import data_use_markdown, release_data_use_section
from exports.models import Release
from surveillance.checkpoints import (
    ACTIONS,
    CHECKPOINT_STEP_HOURS,
    FAMILIES,
    FINDINGS,
    HORIZON_HOURS,
    PRIORITIES,
)
from surveillance.selectors import stay_checkpoints_get, surveillance_end

_MICROSECOND = timedelta(microseconds=1)


def checkpoint_id(stay_id: int, hours: int) -> int:
    """A checkpoint's id in the release: unique, and readable as stay and hour."""
    return stay_id * 1000 + hours


@dataclass
class SurveillanceStats:
    windows: int = 0  # checkpoints: the release's records
    context_events: int = 0
    stays: int = 0
    findings: Counter = field(default_factory=Counter)
    stays_with: dict[str, set] = field(default_factory=dict)
    families: Counter = field(default_factory=Counter)
    actions: Counter = field(default_factory=Counter)
    priorities: Counter = field(default_factory=Counter)
    by_hour: Counter = field(default_factory=Counter)

    def add(self, stay_id: int, point) -> None:
        self.windows += 1
        self.actions[point.global_action] += 1
        self.priorities[point.priority] += 1
        self.by_hour[point.hours_since_admit] += 1
        for family in {f.family for f in point.findings}:
            self.families[family] += 1
        for finding in point.findings:
            self.findings[finding.name] += 1
            self.stays_with.setdefault(finding.name, set()).add(stay_id)

    def as_dict(self) -> dict:
        return {
            "checkpoints": self.windows,
            "stays": self.stays,
            "context_events": self.context_events,
            "global_action": {a: self.actions[a] for a in ACTIONS},
            "priority": {p: self.priorities[p] for p in PRIORITIES},
            "checkpoints_by_hour": {str(h): c for h, c in sorted(self.by_hour.items())},
            "family_checkpoints": {f: self.families[f] for f in FAMILIES},
            "finding_checkpoints": {s.name: self.findings[s.name] for s in FINDINGS},
            "finding_stays": {
                s.name: len(self.stays_with.get(s.name, ())) for s in FINDINGS
            },
        }


def _definitions() -> list[dict]:
    return [
        {
            "name": s.name,
            "family": s.family,
            "level": s.level,
            "temporal": s.temporal,
            "definition": " ".join((s.rule.__doc__ or "").split()),
        }
        for s in FINDINGS
    ]


def _write_context(stay, folder: Path, end, lines: _EventLines) -> int:
    """The stay's bedside events before ``end`` into context/<stay_id>.jsonl."""
    with open(folder / "context" / f"{stay.pk}.jsonl", "w", encoding="utf-8") as out:
        count, _ = lines.write(out, _stay_events(stay, end), stay.intime)
    return count


def _datacard(release: Release, stats: SurveillanceStats) -> str:
    counts = stats.as_dict()
    total = max(stats.windows, 1)
    out = [
        f"# {release.get_kind_display()} v{release.version}",
        "",
        "A fully automatic benchmark of longitudinal ICU surveillance (RealICU spec",
        "section 10, after CodeClinic): a decision every "
        f"{CHECKPOINT_STEP_HOURS} h from ICU admission to {HORIZON_HOURS} h (or to",
        "discharge) over eight clinical families. Labels are computed by rules from",
        "the concept tracks; each checkpoint's labels use only the events recorded",
        "strictly before it, which are exactly its context. Test only.",
        "",
        f"- Cohort: {release.cohort.name} (id {release.cohort_id})",
        f"- Stays: {stats.stays}; checkpoints: {stats.windows}; context events: "
        f"{stats.context_events}",
        f"- Global action: {counts['global_action']}",
        f"- Priority: {counts['priority']}",
        "",
        data_use_markdown(release_data_use_section(release)),
        "## Finding frequencies",
        "",
        "| finding | family | level | temporal | checkpoints | % | stays |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for spec in FINDINGS:
        n = counts["finding_checkpoints"][spec.name]
        out.append(
            f"| {spec.name} | {spec.family} | {spec.level} | {spec.temporal} | {n} "
            f"| {100 * n / total:.1f} | {counts['finding_stays'][spec.name]} |"
        )
    out += [
        "",
        "## Checkpoints with a finding of each family",
        "",
        "| family | checkpoints |",
        "| --- | ---: |",
        *(f"| {f} | {counts['family_checkpoints'][f]} |" for f in FAMILIES),
        "",
        "## Definitions",
        "",
        *(
            f"- **{d['name']}** ({d['level']}): {d['definition']}"
            for d in _definitions()
        ),
        "",
        "Infection and sepsis are unknown, never inferred from antibiotics, when the",
        "source records no microbiology cultures (windows.concepts, section 10);",
        "oliguria is unknown, never active, without urine output chartings and a",
        "weight. A finding counted 0 may mean its data are not in the source.",
        "",
        "## Files",
        "",
        "- `checkpoints.jsonl`: one record per checkpoint (id, stay, hours since",
        "  admission, time, context file, labels with each finding's evidence).",
        "- `context/<stay_id>.jsonl`: the stay's bedside events before its last",
        "  checkpoint; a checkpoint's context is the events with `time` < its `time`.",
        "- `manifest.json`: counts, settings, definitions, every file's sha256.",
        "",
    ]
    return "\n".join(out)


def surveillance_release_write(
    *, release: Release, folder: Path, rows_out: ReleaseRows, progress
) -> tuple[SurveillanceStats, dict, list[dict]]:
    """Writes the release's files into ``folder`` and hands its checkpoint
    records to ``rows_out`` (committed in batches, between stays: no query is
    open then); returns the statistics, the manifest and the files' list (as
    build._release_write)."""
    from django.core.exceptions import ValidationError

    stays = list(
        release.cohort.stays.select_related("admission__patient").order_by("pk")
    )
    if not stays:
        raise ValidationError(f"Cohort {release.cohort.name!r} has no stays.")
    (folder / "context").mkdir(parents=True)
    stats = SurveillanceStats()
    lines = _EventLines()
    progress.start(len(stays) + 2, "checkpoints")
    with open(folder / "checkpoints.jsonl", "w", encoding="utf-8") as out:
        for stay in stays:
            end = surveillance_end(stay)
            stats.context_events += _write_context(stay, folder, end, lines)
            stats.stays += 1
            rows = []
            for point in stay_checkpoints_get(stay=stay):
                stats.add(stay.pk, point)
                when = stay.intime + timedelta(hours=point.hours_since_admit)
                record = {
                    "checkpoint_id": checkpoint_id(stay.pk, point.hours_since_admit),
                    "stay_id": stay.pk,
                    "patient_id": stay.admission.patient.pseudo_id,
                    "hours_since_admit": point.hours_since_admit,
                    "time": when.isoformat(),
                    "context_file": f"context/{stay.pk}.jsonl",
                    "labels": point.as_dict(),
                    # Hindsight (ICD-derived): for stratifying, never an input.
                    "hindsight": {"disease_group": stay.disease_group},
                }
                text = json.dumps(record, ensure_ascii=False, allow_nan=False)
                out.write(text)
                out.write("\n")
                rows.append(
                    (
                        record["checkpoint_id"],
                        stay.pk,
                        stay.disease_group,
                        point.hours_since_admit,
                        text,
                    )
                )
            rows_out.windows(rows)
            progress.advance(1, f"stay {stay.pk}")
    rows_out.flush()
    (folder / "DATACARD.md").write_text(_datacard(release, stats), encoding="utf-8")
    progress.advance(1, "checksums")
    files = folder_files(folder)
    manifest = {
        **manifest_head(release),
        "source": {
            "kind": "cohort",
            "cohort_id": release.cohort_id,
            "cohort_name": release.cohort.name,
        },
        "data_use": release_data_use_section(release),
        "counts": stats.as_dict(),
        "settings": {
            "checkpoint_step_hours": CHECKPOINT_STEP_HOURS,
            "horizon_hours": HORIZON_HOURS,
            "context": (
                "events of the stay's hospital admission with time < the "
                "checkpoint's time; outcome-revealing events and records coded "
                "after discharge removed"
            ),
            "decision": (
                "global_action is escalate iff alerts is not empty; priority is "
                "high with an alert, medium with a suspected condition only, "
                "else low"
            ),
        },
        "findings": _definitions(),
        "files": files,
    }
    manifest_write(folder, manifest, files)
    return stats, manifest, files
