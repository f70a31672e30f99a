"""chartevents, the largest file: its transform, the fast Arrow path that a CSV file
takes into PostgreSQL, and the Temperature Site rows attached to their
temperatures."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from django.db import connection
from django.db.models import Exists, OuterRef, Subquery

from jobs.progress import Progress
from windows.importers.base import ImportSummary
from windows.importers.mimic.events import (
    DUPLICATE,
    OBS,
    EventStep,
    _events,
    _in_index_order,
    _pandas_chunk,
    row_keys,
)
from windows.importers.mimic.items import ItemLabels, _mapped, _unit
from windows.importers.mimic.labs import _gas
from windows.importers.mimic.patients_admissions_stays import (
    NO_HADM,
    NOT_IMPORTED,
    Batch,
)
from windows.importers.mimic.reading import _Columns, _row_keys
from windows.importers.mimic_mapping import (
    FRACTION_ITEMS,
    VALUE_CATEGORY_ITEMS,
    items_frame,
    value_categories,
)
from windows.importers.writing import EVENT_ARROW_SCHEMA, TEXT_LIMITS, EventWriter
from windows.models import Domain, Event

DEVICE_ITEM = 226732


# Times pandas can hold (nanoseconds in int64), in microseconds: a time outside
# them is an error on the pandas path, so the Arrow path hands it over.
_PANDAS_US = (pd.Timestamp.min.value // 1000 + 1, pd.Timestamp.max.value // 1000)


def _arrow_floats(values: pa.Array) -> np.ndarray | None:
    """Floats (NaN where missing) of a text column, None if a value is not a
    number to Arrow (the pandas path then decides, and words the error)."""
    try:
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        return None


def _arrow_ids(values: pa.Array, *, required: bool) -> np.ndarray | None:
    """Integer ids as int64 (-1 where missing), None unless every value is a
    whole number (and, if required, present)."""
    out = _arrow_floats(values)
    if out is None:
        return None
    missing = np.isnan(out)
    if (required and missing.any()) or (
        np.isinf(out) | (out % 1 != 0) & ~missing
    ).any():
        return None
    return np.where(missing, -1, out).astype("int64")


def _arrow_us(values: pa.Array, *, nulls: bool = False) -> np.ndarray | None:
    """Naive ISO times (taken as UTC) as int64 microseconds (with ``nulls``, the
    smallest int64 where missing), None if one is missing (unless ``nulls``), has
    no time of day, is not an ISO time to Arrow, or lies outside pandas' range."""
    if values.null_count and not nulls:
        return None
    if len(values) and pc.min(pc.utf8_length(values)).as_py() <= 10:
        return None  # a date without a time: the pandas path words the error
    if nulls and values.null_count:
        valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
        out = np.full(len(values), np.iinfo("int64").min, dtype="int64")
        inner = _arrow_us(values.filter(pc.is_valid(values)))
        if inner is None:
            return None
        out[valid] = inner
        return out
    try:
        us = pc.cast(values, pa.timestamp("us")).to_numpy().view("int64")
    except pa.ArrowInvalid:
        return None
    if len(us) and (us.min() < _PANDAS_US[0] or us.max() > _PANDAS_US[1]):
        return None
    return us


def _collection_times(us: np.ndarray, gas: np.ndarray) -> pa.Array:
    """The collection time of blood-gas rows (for ``_gas_specimens``), else null."""
    if not gas.any():
        return pa.nulls(len(us), pa.string())
    text = _iso_text(us)
    return pc.if_else(pa.array(gas), text, pa.scalar(None, pa.string()))


def _iso_text(us: np.ndarray) -> pa.Array:
    """UTC times as the ISO text the COPY reads, formatted once per distinct
    time (a chart time repeats over the items charted with it)."""
    codes, uniques = pd.factorize(us)
    # Whole seconds (MIMIC's times) without the fraction: less to parse.
    unit = "s" if not (uniques % 1_000_000).any() else "us"
    text = np.datetime_as_string(uniques.astype("datetime64[us]"), unit=unit)
    return pa.array(text, type=pa.string()).take(pa.array(codes))


def _dictionary_text(strings, codes: np.ndarray, limit: int | None = None) -> pa.Array:
    """Row texts from a few distinct ones (``strings``) and each row's index."""
    cut = [str(v)[:limit] if limit else str(v) for v in strings]
    return pa.array(cut, type=pa.string()).take(pa.array(codes))


def _within(values: pa.Array, limit: int | None) -> pa.Array:
    """Text cut to ``limit`` characters (str(v)[:limit], as EventWriter does)."""
    if not limit or not len(values) or pc.max(pc.utf8_length(values)).as_py() <= limit:
        return values
    encoded = pc.dictionary_encode(values)
    return _dictionary_text(
        encoded.dictionary.to_pylist(), encoded.indices.to_numpy(), limit
    )


class ChartEventsStep(EventStep):
    """chartevents, by far the largest file (over 300 million rows in MIMIC-IV).

    A CSV file imported into PostgreSQL is read by Arrow's streaming reader and
    transformed with Arrow compute and numpy: text is handled once per distinct
    item, unit or time, never as a Python object per cell (parsing into pandas
    object columns cost as much as the COPY itself). The events are those of
    ``_chartevents``. A block that the fast path cannot take exactly as the pandas
    path would (a value that is not a number or an ISO time to Arrow, a missing
    required value) goes through the pandas path, which imports it or names the
    file, row and column of the error; a line Arrow cannot read sends the rest of
    the file to pandas' reader, whose error message names it.
    """

    def __init__(self, *args, labels: ItemLabels, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.labels = labels
        self.lone_sites = 0  # temperature sites without a temperature beside them
        self.merged_sites = 0  # temperature sites put onto their temperature

    def run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        if self.table.is_parquet or connection.vendor != "postgresql":
            super().run(batch, writer, progress, summary)
        else:
            for events in self._arrow_frames(batch, progress):
                if isinstance(events, pa.Table):
                    written = writer.write_arrow(events)
                else:
                    written = writer.write(_in_index_order(events))
                summary.add_events(self.name, written)
        writer.flush()
        lone, merged = _attach_temperature_sites([int(a) for a in batch.admission_ids])
        self.lone_sites += lone
        self.merged_sites += merged
        # The summary counts the events stored: the site rows are not.
        summary.add_events(self.name, -(lone + merged))

    def _arrow_frames(self, batch: Batch, progress: Progress):
        """The batch's events of each block, as an Arrow table when the fast
        path takes the block, else as the pandas path's frame."""
        self.table.require(self.columns)
        blocks = self.table.arrow_blocks(self.columns)
        done = 0
        while True:
            try:
                first_row, block = next(blocks)
            except StopIteration:
                return
            except Exception:  # whatever Arrow says: pandas' reader words it
                yield from self.frames(batch, progress, from_row=done + 1)
                return
            events = self._arrow_events(block, first_row, batch)
            if events is None:
                events = self.chunk_events(_pandas_chunk(block), first_row, batch)
            if events is not None:
                yield events
            done += block.num_rows
            progress.advance(0, f"{self.name}: {done:,} rows")

    def _arrow_events(
        self, block: pa.RecordBatch, first_row: int, batch: Batch
    ) -> pa.Table | None:
        """The block's events of the batch's admissions, sorted as the (admission,
        time) index stores them, in EventWriter.write_arrow's form; None when the
        pandas path must decide."""
        hadm = _arrow_ids(block.column("hadm_id"), required=False)
        if hadm is None:
            return None
        pos = batch.admission_ids.index.get_indexer(hadm)
        sel = np.flatnonzero(pos >= 0)
        # Counted once the block is taken here (the pandas path counts its own).
        left_out = {
            NO_HADM: int((hadm == -1).sum()),
            NOT_IMPORTED: int(((pos < 0) & (hadm != -1)).sum()),
        }
        if not len(sel):
            for reason, n in left_out.items():
                self.tally.add(reason, n)
            return EVENT_ARROW_SCHEMA.empty_table()
        if "_row" in block.schema.names:  # rows routed from the file
            rows = block.column("_row").to_numpy()[sel]
        else:
            rows = first_row + sel
        if len(sel) < block.num_rows:
            block = block.take(pa.array(sel))
        itemid = _arrow_ids(block.column("itemid"), required=True)
        valuenum = _arrow_floats(block.column("valuenum"))
        us = _arrow_us(block.column("charttime"))
        if itemid is None or valuenum is None or us is None:
            return None
        keys = row_keys([block.column(c) for c in self.columns])
        first = self.duplicates.first(batch, keys, commit=False)
        keys = keys[first]
        left_out[DUPLICATE] = int((~first).sum())
        if left_out[DUPLICATE]:
            keep = np.flatnonzero(first)
            block, rows, sel = block.take(pa.array(keep)), rows[keep], sel[keep]
            itemid, valuenum, us = itemid[keep], valuenum[keep], us[keep]
        codes, items = pd.factorize(itemid)
        m = _mapped(
            "chartevents",
            pd.Series(items),
            self.labels.chart,
            domain=Domain.OTHER.value,
            kind=OBS,
        )
        lab = (m["domain"] == Domain.LABS.value).to_numpy()[codes]
        collected = us
        if "storetime" in block.schema.names and lab.any():
            # Labs charted here enter at their result time, as labevents do.
            stored = _arrow_us(block.column("storetime"), nulls=True)
            if stored is None:
                return None
            use = lab & (stored != np.iinfo("int64").min)
            us = np.where(use, stored, us)
        unknown = ~np.isin(items, items_frame("chartevents").index.to_numpy())
        if unknown.any():
            counts = np.bincount(codes, minlength=len(items))
            self.labels.unmapped.add(
                "chartevents", items[unknown], counts[unknown], self.labels.chart
            )
        admission = batch.admission_ids.to_numpy()[pos[sel]].astype("int64")
        value, uom = block.column("value"), block.column("valueuom")
        gas = lab & _gas(m["category"]).to_numpy()[codes]
        order = np.lexsort((us, admission))
        if (order[1:] < order[:-1]).any():
            collected, gas = collected[order], gas[order]
            itemid, valuenum, us = itemid[order], valuenum[order], us[order]
            admission, rows, codes = admission[order], rows[order], codes[order]
            value, uom = value.take(pa.array(order)), uom.take(pa.array(order))

        number = (
            valuenum * m["factor"].to_numpy()[codes] + m["offset"].to_numpy()[codes]
        )
        fraction = np.isin(itemid, list(FRACTION_ITEMS)) & (number > 1)
        number = np.where(fraction, number / 100, number)

        categories = list(m["category"])
        names = list(m["name"])
        category_codes = codes.copy()
        name_codes = codes.copy()
        by_value = np.isin(itemid, list(VALUE_CATEGORY_ITEMS))
        for item in np.unique(itemid[by_value]):
            mask = itemid == item
            texts = pc.dictionary_encode(pc.fill_null(value.filter(pa.array(mask)), ""))
            distinct = texts.dictionary.to_pylist()
            category_codes[mask] = len(categories) + texts.indices.to_numpy()
            categories.extend(value_categories(int(item), distinct))
            name_codes[mask] = len(names) + texts.indices.to_numpy()
            names.extend(v.strip() for v in distinct)

        own_unit = m["unit"].to_numpy(dtype=object)
        has_unit = (own_unit != "")[codes]
        unit = pc.fill_null(uom, "")
        if has_unit.any():
            unit = pc.if_else(
                pa.array(has_unit), _dictionary_text(own_unit, codes), unit
            )
        no_unit = m["no_unit"].to_numpy(dtype=bool)[codes]
        if no_unit.any():
            unit = pc.if_else(pa.array(no_unit), "", unit)
        keep_text = (
            np.isnan(valuenum) | np.isin(itemid, self.labels.text_items)
        ) & ~by_value
        value_text = pc.if_else(pa.array(keep_text), pc.fill_null(value, ""), "")
        trach = (itemid == DEVICE_ITEM) & np.asarray(
            pc.fill_null(
                pc.equal(pc.utf8_trim_whitespace(value), "Tracheostomy tube"), False
            )
        )
        if trach.any():
            value_text = pc.if_else(pa.array(trach), "tracheostomy", value_text)
        n = len(itemid)
        columns = {
            "admission_id": pa.array(admission, pa.int64()),
            "time": _iso_text(us),
            "end_time": _collection_times(collected, gas),
            "kind": _dictionary_text(m["kind"], codes, TEXT_LIMITS.get("kind")),
            "domain": _dictionary_text(m["domain"], codes, TEXT_LIMITS.get("domain")),
            "category": _dictionary_text(
                categories, category_codes, TEXT_LIMITS.get("category")
            ),
            "name": _dictionary_text(names, name_codes, TEXT_LIMITS.get("name")),
            "value_num": pa.array(number, pa.float64(), mask=~np.isfinite(number)),
            "unit": _within(unit, TEXT_LIMITS.get("unit")),
            "value_text": _within(value_text, TEXT_LIMITS.get("value_text")),
            "source_table": _dictionary_text(
                ["chartevents"],
                np.zeros(n, dtype="int64"),
                TEXT_LIMITS.get("source_table"),
            ),
            "source_key": _within(
                pc.binary_join_element_wise(
                    "row:", pc.cast(pa.array(rows, pa.int64()), pa.string()), ""
                ),
                TEXT_LIMITS.get("source_key"),
            ),
            "order_id": _dictionary_text([""], np.zeros(n, dtype="int64")),
        }
        self.duplicates.commit(keys)
        for reason, n in left_out.items():
            self.tally.add(reason, n)
        return pa.table(
            [columns[f.name] for f in EVENT_ARROW_SCHEMA], schema=EVENT_ARROW_SCHEMA
        )


def _attach_temperature_sites(admission_ids: list[int]) -> tuple[int, int]:
    """The Temperature Site item's text onto the temperature charted at the same
    time (CLIF's meas_site_name, kept in value_text of vitals), then the site
    rows removed; returns how many sites had no temperature beside them, and
    how many had one (merged into it)."""
    sites = Event.objects.filter(
        admission_id__in=admission_ids,
        source_table="chartevents",
        domain=Domain.VITALS.value,
        category="temp_site",
    )
    # Keyed by the outer row's admission and time alone (not also by the
    # batch's admissions): PostgreSQL then finds a temperature's site by the
    # (admission, time) index instead of scanning the batch's events for each
    # temperature (0.8 s against 0.04 s for 24 temperatures of 19 admissions).
    site_of = (
        Event.objects.filter(
            admission_id=OuterRef("admission_id"),
            time=OuterRef("time"),
            source_table="chartevents",
            domain=Domain.VITALS.value,
            category="temp_site",
        )
        .exclude(value_text="")
        .values("value_text")[:1]
    )
    temperatures = Event.objects.filter(
        admission_id__in=admission_ids,
        source_table="chartevents",
        domain=Domain.VITALS.value,
        category="temp_c",
        value_text="",
    )
    temperatures.filter(Exists(site_of)).update(value_text=Subquery(site_of))
    placed = Event.objects.filter(
        admission_id=OuterRef("admission_id"),
        time=OuterRef("time"),
        domain=Domain.VITALS.value,
        category="temp_c",
        source_table="chartevents",
    )
    lone = sites.exclude(Exists(placed)).count()
    removed, _ = sites.delete()
    return lone, removed - lone


def _chartevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Values in CLIF units (°F -> °C as CLINICAL_CONCEPTS.md section 1, FiO2
        as a fraction); devices, ventilator modes, position, code status and CRRT
        modes categorized and named by their text, as CLIF's *_category and
        *_name; the text of other text items kept, with their score when they
        have one. Labs charted here enter at their result time (storetime), as
        labevents do."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid, valuenum, value = (
            col.id("itemid"),
            col.number("valuenum"),
            col.text("value"),
        )
        m = _mapped(
            "chartevents",
            itemid,
            labels.chart,
            domain=Domain.OTHER.value,
            kind=OBS,
            unmapped=labels.unmapped,
        )
        number = valuenum * m["factor"] + m["offset"]
        fraction = itemid.isin(FRACTION_ITEMS) & (number > 1)
        number = number.where(~fraction, number / 100)
        category, name = m["category"].copy(), m["name"].copy()
        keep_text = valuenum.isna() | itemid.isin(labels.text_items)
        value_text = value.where(keep_text, "")
        by_value = itemid.isin(VALUE_CATEGORY_ITEMS).to_numpy()
        for item in np.unique(itemid[by_value]):
            mask = (itemid == item).to_numpy()
            texts = value[mask].astype(str)
            uniques = texts.unique()
            lookup = dict(zip(uniques, value_categories(int(item), list(uniques))))
            category[mask] = texts.map(lookup).to_numpy()
            name[mask] = texts.str.strip().to_numpy()
        value_text = value_text.where(~by_value, "")
        # The device item's texts only: stripping every row's text cost more
        # than the rest of the transform.
        trach = (itemid == DEVICE_ITEM).to_numpy()
        trach[trach] = value[trach].str.strip().eq("Tracheostomy tube").to_numpy()
        value_text = value_text.where(~trach, "tracheostomy")
        collected = col.time("charttime", required=True)
        time = collected
        if "storetime" in f:
            lab = (m["domain"] == Domain.LABS.value).to_numpy()
            if lab.any():
                stored = col.time("storetime")
                time = time.where(~lab | stored.isna(), stored)
        gas = _gas(category) & (m["domain"] == Domain.LABS.value)
        return _events(
            f,
            "chartevents",
            time=time,
            end_time=collected.where(gas, pd.NaT),
            kind=m["kind"],
            domain=m["domain"],
            category=category,
            name=name,
            value_num=number,
            unit=_unit(m, col.text("valueuom")),
            value_text=value_text,
            source_key=_row_keys(col.rows),
        )

    return transform
