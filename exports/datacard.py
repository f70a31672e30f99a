"""A release's data card: cohort statistics and label distributions (as the
paper's Figures 8-10) with SVG plots, and the label schema of its records."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from evaluation.matcher import tau_source_of
from exports.data_use import data_use_markdown, release_data_use_section
from exports.svgplots import bars_svg, grouped_bars_svg, histogram_svg
from windows.models import DiseaseGroup, Outcome

STATUS_ORDER = ("improving", "stable", "deteriorating", "none")
TASK_TITLES = {
    "acute_problems": "Acute problems",
    "recommended_actions": "Recommended actions",
    "red_flags": "Red flags",
}


def _bar(path: Path, counts: list[tuple[str, int]], title: str, xlabel: str):
    labels = [name for name, _ in counts]
    values = [n for _, n in counts]
    path.write_text(bars_svg(labels, values, title, xlabel), encoding="utf-8")


def _histogram(path: Path, values: list[float], title: str, xlabel: str):
    path.write_text(histogram_svg(values, title, xlabel, "stays"), encoding="utf-8")


def _items_plot(path: Path, items_per_window: dict[str, Counter]):
    groups = {TASK_TITLES[task]: counter for task, counter in items_per_window.items()}
    path.write_text(
        grouped_bars_svg(groups, "Items per window", "items per window", "windows"),
        encoding="utf-8",
    )


def _table(rows: list[tuple], header: tuple) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f} %" if total else "-"


def _named_counts(values, names: dict) -> list[tuple[str, int]]:
    """How often each value stands in ``values``, most common first, under its
    display name."""
    return [(names.get(v, v), n) for v, n in Counter(values).most_common()]


def _shares(counts: list[tuple[str, int]], total: int, header: tuple) -> str:
    """A table of counts with each one's share of ``total``."""
    return _table([(name, n, _pct(n, total)) for name, n in counts], (*header, "Share"))


LABEL_SCHEMA = """\
Each line of `windows.jsonl` (and each row of `windows.parquet`, where `labels`
is the JSON string `labels_json` and the item texts are also list columns) is:

```
{
  "window_id": int,            # stable id of the window on the platform
  "stay_id": int,              # the ICU stay; its context is context/<stay_id>.jsonl
  "patient_id": str,           # pseudonymous patient id
  "window_index": int,         # 0 = the window at ICU admission
  "start", "end": ISO 8601,    # the window is [start, end)
  "start_hours", "end_hours": float,   # hours since ICU admission
  "context_file": "context/<stay_id>.jsonl",
  "window_action_event_ids": [int],    # the window's own recorded actions
  "window_companion_event_ids": [int], # the other rows of those decisions: the
                                       # same order at the same time (a drug's
                                       # carrier or diluent line)
  "hindsight": {               # known only after discharge: for score breakdowns,
    "disease_group": str       # never model input. ICD chapter of the first-ranked
  },                           # diagnosis, sepsis apart (parquet:
                               # hindsight_disease_group)
  "labels": {
    "status": {"value": "improving"|"stable"|"deteriorating"|null,
               "evidence": [event ids], "provenance": {...}},
    "acute_problems":      [{"text", "evidence": [event ids], "provenance"}],
    "recommended_actions": [{"text", "evidence": [event ids], "provenance"}],
    "red_flags":           [{"text", "evidence": [event ids], "provenance"}]
  }
}
```

Provenance: `{"source": "consensus" | "adjudicated", "raters": [pseudonymous rater
ids], "texts": [the raters' phrasings]}` for Gold; `{"source": "oracle",
"oracle_run_id", "backbone_kind", "model", "prompt_version"}` for Scale. Evidence
ids refer to charted events of the stay's admission, never to a record coded
after discharge; hindsight labellers saw the whole trajectory, so evidence may
point after the window.

**Bedside context of a window** (spec sections 1-2): the lines of its stay's
context file with `time` before the window's `end`. Outcome-revealing events
(discharges, death, discharge summary and disposition) are not in the files, nor
is anything coded after discharge: ICD procedure codes billed with a date only,
ICD diagnoses (the admission diagnosis among them) and DRGs. Hindsight labellers
saw coded records, marked as such; labels never cite them.
Interval end times are left out, since an infusion's end lies in the future.
For the Recommended Actions task, also drop the events listed in
`window_action_event_ids` and `window_companion_event_ids`: the window's own
decisions, with every row of the same order at the same time, are the answer.
`hindsight` and `labels` are never model input.

Each context line: `{"event_id", "time", "hours_since_admit", "kind"
("observation" | "action"), "domain", "category", "name", "concept",
"value_num", "unit", "value_text", "source_table"}`. `category` is the CLIF
category; `concept` names it (one name per category, with the source's product
or device name where it adds to it); `name` is the source's own label, which
may name another unit than the value's ("Temperature Fahrenheit" for a value in
°C): `unit` is the unit of `value_num`.
"""


def _score_intervals(release) -> str:
    """Scale: what its scores' intervals mean and which windows correct them."""
    from exports.scoring_ppi import rectifier_manifest, rectifier_markdown

    return rectifier_markdown(rectifier_manifest(release))


def datacard_write(*, release, stats, folder: Path) -> None:
    """Writes ``DATACARD.md`` and ``plots/*.svg`` (exports.svgplots) from the
    build's statistics."""
    plots = folder / "plots"
    plots.mkdir()
    stays = list(stats.stays.values())
    n_stays = len(stays)
    by_group = _named_counts(
        (s["disease_group"] for s in stays), dict(DiseaseGroup.choices)
    )
    _bar(plots / "disease_groups.svg", by_group, "Stays by disease group", "stays")
    lengths = [s["length_hours"] for s in stays]
    _histogram(plots / "stay_lengths.svg", lengths, "ICU stay length", "hours")
    by_outcome = _named_counts((s["outcome"] for s in stays), dict(Outcome.choices))
    _bar(plots / "outcomes.svg", by_outcome, "Hospital outcome", "stays")
    status = [(s, stats.status.get(s, 0)) for s in STATUS_ORDER if stats.status.get(s)]
    _bar(plots / "status.svg", status, "Patient status labels", "windows")
    _items_plot(plots / "items_per_window.svg", stats.items)

    source = (
        f"the consensus of Gold campaign {release.campaign.name!r}"
        if release.kind == "gold"
        else f"Oracle run {release.oracle_run.pk} ({release.oracle_run.name!r})"
    )
    parts = [
        f"# {release.get_kind_display()} v{release.version}: data card",
        "",
        f"Built from {source}. Test-only: do not train on it. Matcher for scoring: "
        f"`{release.matcher_model}` with tau = {release.tau:g}, from "
        f"{tau_source_of(release.matcher_model, release.tau)}. Its polarity guard "
        "keeps two items that point in opposite directions (start / stop, give / "
        "avoid, escalate / wean, 'do not ...') from matching, whatever their "
        "cosine. A model's tau comes from the reference calibration (clinical "
        "pairs shipped with the code, swept from tau 0.1, below the paper's 0.3) "
        "until an admin adopts one from physicians' judgments.",
        "",
        data_use_markdown(
            release_data_use_section(release, stay_ids=list(stats.stays))
        ),
        _score_intervals(release),
        "## Cohort",
        "",
        f"{n_stays} ICU stays, {stats.windows} windows, "
        f"{stats.context_events} bedside-context events.",
        "",
    ]
    if lengths:
        parts += [
            f"Stay length (hours): median {statistics.median(lengths):.1f}, "
            f"min {min(lengths):.1f}, max {max(lengths):.1f}.",
            "",
        ]
    parts += [
        _shares(by_group, n_stays, ("Disease group", "Stays")),
        "",
        "![Stays by disease group](plots/disease_groups.svg)",
        "![Stay lengths](plots/stay_lengths.svg)",
        "",
        _shares(by_outcome, n_stays, ("Outcome", "Stays")),
        "",
        "![Outcomes](plots/outcomes.svg)",
        "",
        "## Labels",
        "",
        _shares(status, stats.windows, ("Patient status", "Windows")),
        "",
        "![Status distribution](plots/status.svg)",
        "",
        _table(
            [
                (
                    TASK_TITLES[task],
                    stats.item_totals.get(task, 0),
                    f"{stats.item_totals.get(task, 0) / stats.windows:.2f}"
                    if stats.windows
                    else "-",
                )
                for task in TASK_TITLES
            ],
            ("Task", "Items", "Per window"),
        ),
        "",
        "![Items per window](plots/items_per_window.svg)",
        "",
        _table(
            sorted(stats.hours_bins.items()),
            ("Hours since ICU admission", "Windows"),
        ),
        "",
        _table(sorted(stats.provenance.items()), ("Task:provenance", "Labels")),
        "",
        "## Label schema",
        "",
        LABEL_SCHEMA,
        "",
        "## Files",
        "",
        "`windows.jsonl`, `windows.parquet`, `context/<stay_id>.jsonl`, "
        "`manifest.json` (counts, settings, agreement or validation report, and the "
        "sha256 of every other file), `DATACARD.md`, `plots/*.svg`.",
        "",
        "Physicians appear only as pseudonymous rater ids, stable within this release.",
        "",
    ]
    (folder / "DATACARD.md").write_text("\n".join(parts), encoding="utf-8")
