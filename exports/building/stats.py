"""The statistics of a release's windows and stays, gathered while its files are
written, for the manifest and the data card."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evaluation.metrics import hours_bin
from exports.building.labels import SET_TASKS


@dataclass
class ReleaseStats:
    windows: int = 0
    context_events: int = 0
    stays: dict[int, dict] = field(default_factory=dict)
    status: Counter = field(default_factory=Counter)
    items: dict[str, Counter] = field(
        default_factory=lambda: {task: Counter() for task in SET_TASKS}
    )
    item_totals: Counter = field(default_factory=Counter)
    provenance: Counter = field(default_factory=Counter)
    hours_bins: Counter = field(default_factory=Counter)
    disease_group_windows: Counter = field(default_factory=Counter)

    def add_window(self, record: dict) -> None:
        self.windows += 1
        labels = record["labels"]
        self.status[labels["status"]["value"] or "none"] += 1
        self.provenance[f"status:{labels['status']['provenance']['source']}"] += 1
        for task in SET_TASKS:
            self.items[task][len(labels[task])] += 1
            self.item_totals[task] += len(labels[task])
            for entry in labels[task]:
                self.provenance[f"{task}:{entry['provenance']['source']}"] += 1
        self.hours_bins[hours_bin(record["start_hours"])] += 1
        self.disease_group_windows[record["hindsight"]["disease_group"]] += 1

    def as_dict(self) -> dict:
        return {
            "windows": self.windows,
            "stays": len(self.stays),
            "context_events": self.context_events,
            "status": dict(self.status),
            "items": dict(self.item_totals),
            "items_per_window": {
                task: {str(n): c for n, c in sorted(counter.items())}
                for task, counter in self.items.items()
            },
            "provenance": dict(sorted(self.provenance.items())),
            "windows_by_hours_since_admit": dict(self.hours_bins),
            "windows_by_disease_group": dict(self.disease_group_windows),
            "stays_by_disease_group": dict(
                Counter(s["disease_group"] for s in self.stays.values())
            ),
            "stays_by_outcome": dict(
                Counter(s["outcome"] for s in self.stays.values())
            ),
        }
