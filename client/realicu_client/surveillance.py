"""Checkpoints of a downloaded surveillance release (RealICU spec section 10,
the CodeClinic companion) with their context, and their predictions.

The context of a checkpoint is its stay's events whose ``time`` is strictly
before the checkpoint's ``time``: the same leak-free rule as a window's
(realicu_client.context), with the checkpoint's moment as the end. Its labels
were computed from exactly those events.

    from realicu_client import Client
    from realicu_client.surveillance import iterate_checkpoints, prediction

    api = Client(url, token=key)
    folder = api.download(release_id, "data")
    lines = [prediction(c.record, global_action="continue_monitoring",
                        priority="low") for c in iterate_checkpoints(folder)]
    submission = api.submit(release_id, lines, model_name="mine")
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from realicu_client.context import stays_in_release


@dataclass(frozen=True)
class Checkpoint:
    record: dict
    context: list[dict] = field(repr=False)

    @property
    def checkpoint_id(self) -> int:
        return self.record["checkpoint_id"]

    @property
    def hours_since_admit(self) -> int:
        return self.record["hours_since_admit"]

    @property
    def labels(self) -> dict:
        return self.record["labels"]


def iterate_checkpoints(
    folder: str | Path, *, stay_ids: Iterable[int] | None = None
) -> Iterator[Checkpoint]:
    """Every checkpoint of a downloaded surveillance release folder with its
    context, stay by stay and in time order; each context file read once."""
    for stay, records in stays_in_release(
        Path(folder), "checkpoints.jsonl", "time", stay_ids
    ):
        for record in records:
            yield Checkpoint(
                record=record,
                context=stay.for_window(
                    {"start": record["time"], "end": record["time"]}
                ),
            )


def prediction(
    record: dict,
    *,
    global_action: str,
    priority: str,
    suspected_conditions: Iterable[str] = (),
    alerts: Iterable[str] = (),
) -> dict:
    """One line of a surveillance prediction file for the checkpoint
    ``record``; finding names are those of the release's manifest."""
    return {
        "checkpoint_id": record["checkpoint_id"],
        "global_action": global_action,
        "priority": priority,
        "suspected_conditions": sorted(set(suspected_conditions)),
        "alerts": sorted(set(alerts)),
    }
