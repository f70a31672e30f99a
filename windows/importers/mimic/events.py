"""An event file streamed for one batch of admissions: its rows selected, turned
into events in chunks by the file's transform, and written."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.progress import Progress
from windows.importers.base import ImportSummary, SourceTable
from windows.importers.mimic.patients_admissions_stays import Batch
from windows.importers.mimic.reading import CHUNK_ROWS, TableSpec
from windows.importers.writing import EventWriter
from windows.models import EventKind

OBS = EventKind.OBSERVATION.value
ACT = EventKind.ACTION.value
CODED = EventKind.CODED.value


# Why a source row is no event of its own (ImportSummary.dropped).
UNTIMED = "rows without a time"
DUPLICATE = (
    "exact duplicates of an earlier row (equal in every column read), imported once"
)


class RowTally:
    """The rows of one event file that are no event of their own, by reason,
    over every batch. A row without hadm_id placed by its time goes to each
    batch holding an admission of its patient (mimic.routing): it is outside
    every admission only if no batch placed it, so those rows are counted by
    their row numbers."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._seen: list[np.ndarray] = []
        self._placed: list[np.ndarray] = []

    def add(self, reason: str, n: int) -> None:
        if n:
            self.counts[reason] = self.counts.get(reason, 0) + int(n)

    def orphans(self, seen: np.ndarray, placed: np.ndarray) -> None:
        """Rows without hadm_id of the batch's patients (file row numbers), and
        those of them placed in an admission."""
        self._seen.append(np.asarray(seen, dtype="int64"))
        self._placed.append(np.asarray(placed, dtype="int64"))

    def outside(self) -> int:
        if not self._seen:
            return 0
        return len(
            np.setdiff1d(np.concatenate(self._seen), np.concatenate(self._placed))
        )


_HASH_KEYS = ("0123456789123456", "realicu-rows-128")
_NULL = np.array([np.iinfo("uint64").max, 0x9E3779B97F4A7C15], dtype="uint64")


def row_keys(columns: list) -> np.ndarray:
    """A 128-bit key of each row over ``columns`` (pandas Series or Arrow arrays
    of one length), from the text of each value, so that a CSV block read by
    Arrow and the same block read by pandas give the same keys. Each column's
    distinct values are hashed once (pandas' hash_array, under two keys)."""
    n = len(columns[0])
    out = np.zeros((n, 2), dtype="uint64")
    for values in columns:
        array = values if isinstance(values, pa.Array) else None
        if isinstance(values, pa.ChunkedArray):
            array = values.combine_chunks()
        if array is None:
            array = pa.array(values, from_pandas=True)
        if not pa.types.is_string(array.type):
            array = pc.cast(array, pa.string())
        encoded = pc.dictionary_encode(array)
        words = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        for k, key in enumerate(_HASH_KEYS):
            hashes = np.append(
                pd.util.hash_array(words, hash_key=key, categorize=False), _NULL[k]
            )
            out[:, k] = out[:, k] * np.uint64(1_000_003) ^ hashes[codes]
    return np.ascontiguousarray(out).view("V16").ravel()


class Duplicates:
    """The rows of one batch seen so far, by their keys (``row_keys``): exact
    duplicates share their hadm_id, so they fall in one batch."""

    def __init__(self) -> None:
        self.batch = None
        self.seen = np.empty(0, dtype="V16")

    def first(self, batch, keys: np.ndarray, *, commit: bool = True) -> np.ndarray:
        """Which rows are the first of their kind in the batch so far; with
        ``commit``, they are then seen (else ``commit(keys[first])`` does it)."""
        if batch is not self.batch:
            self.batch, self.seen = batch, np.empty(0, dtype="V16")
        first = np.zeros(len(keys), dtype=bool)
        first[np.unique(keys, return_index=True)[1]] = True
        first &= ~np.isin(keys, self.seen)
        if commit:
            self.commit(keys[first])
        return first

    def commit(self, keys: np.ndarray) -> None:
        self.seen = np.union1d(self.seen, keys)


def _in_index_order(events: pd.DataFrame) -> pd.DataFrame:
    """Events sorted as the (admission, time) index stores them: PostgreSQL then
    appends to the index instead of touching pages all over it."""
    order = np.lexsort((events["time"].array.asi8, events["admission_id"].to_numpy()))
    if (order[1:] > order[:-1]).all():
        return events
    return events.take(order)


def _events(frame: pd.DataFrame, table: str, **columns) -> pd.DataFrame:
    out = pd.DataFrame({"admission_id": frame["admission_id"].to_numpy()})
    for name, values in columns.items():
        # .array, not .to_numpy(): keeps tz-aware times as datetimes (to_numpy
        # would box every value into a Timestamp object).
        out[name] = values.array if isinstance(values, pd.Series) else values
    out["source_table"] = table
    return out


class EventStep:
    """One event file streamed for one batch: rows of the batch's admissions,
    transformed to events in chunks and written."""

    # Rows per chunk read; a file of long texts (clinical notes) reads fewer.
    chunk_rows = CHUNK_ROWS

    def __init__(
        self,
        spec: TableSpec,
        table: SourceTable,
        columns: list[str],
        transform: Callable[[pd.DataFrame, str], pd.DataFrame],
        *,
        assign_by: tuple[str, ...] = (),
    ) -> None:
        self.spec, self.table, self.columns = spec, table, columns
        self.transform, self.assign_by = transform, assign_by
        self.untimed = 0  # rows without a time, which cannot be placed
        self.tally = RowTally()
        self.duplicates = Duplicates()

    @property
    def name(self) -> str:
        return self.spec.name

    def frames(self, batch: Batch, progress: Progress, *, from_row: int = 1):
        """Event frames of the batch's rows, from file row ``from_row`` on."""
        read = 0
        for first_row, chunk in self._source_chunks():
            read += len(chunk)
            if first_row + len(chunk) <= from_row:
                continue
            if first_row < from_row:
                chunk = chunk.iloc[from_row - first_row :].reset_index(drop=True)
                first_row = from_row
            events = self.chunk_events(chunk, first_row, batch)
            if events is not None:
                yield events
            progress.advance(0, f"{self.name}: {read:,} rows")

    def _source_chunks(self):
        """(first row, frame of text columns) of the file. A CSV file is read by
        Arrow's streaming reader, which rejects a line with more fields than the
        header; from a block Arrow cannot read on, pandas reads the whole lines
        (not only the columns used, which would take such a line silently) and
        names the line in its error."""
        if self.table.is_parquet:
            yield from self.table.chunks(self.columns, chunksize=self.chunk_rows)
            return
        self.table.require(self.columns)
        blocks = self.table.arrow_blocks(self.columns, rows=self.chunk_rows)
        done = 0
        while True:
            try:
                first_row, block = next(blocks)
            except StopIteration:
                return
            except Exception:  # whatever Arrow says: pandas' reader words it
                for first_row, chunk in self.table.chunks(
                    self.columns, chunksize=self.chunk_rows, all_fields=True
                ):
                    if first_row + len(chunk) <= done + 1:
                        continue
                    if first_row <= done:
                        chunk = chunk.iloc[done + 1 - first_row :].reset_index(
                            drop=True
                        )
                        first_row = done + 1
                    yield first_row, chunk
                return
            done += block.num_rows
            yield first_row, _pandas_chunk(block)

    def chunk_events(
        self, chunk: pd.DataFrame, first_row: int, batch: Batch
    ) -> pd.DataFrame | None:
        """The events of one chunk's rows of the batch, None if it has none."""
        selected = batch.select(
            chunk,
            first_row,
            self.table.display,
            assign_by=self.assign_by,
            tally=self.tally,
        )
        if not len(selected):
            return None
        selected = self.first_rows(selected, batch)
        events = self.transform(selected, self.table.display)
        untimed = events["time"].isna().to_numpy()
        if untimed.any():
            self.untimed += int(untimed.sum())
            events = events[~untimed]
        return events

    def first_rows(self, selected: pd.DataFrame, batch: Batch) -> pd.DataFrame:
        """The selected rows without exact duplicates of an earlier row of the
        batch (counted: DUPLICATE)."""
        first = self.duplicates.first(
            batch, row_keys([selected[c] for c in self.columns])
        )
        if first.all():
            return selected
        self.tally.add(DUPLICATE, int((~first).sum()))
        return selected[first].reset_index(drop=True)

    def run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        for events in self.frames(batch, progress):
            summary.add_events(self.name, writer.write(_in_index_order(events)))


class DetailStep(EventStep):
    """An event file whose events take more from a detail file keyed by their
    ``source_key`` (emar's doses in emar_detail, radiology's exam names in
    radiology_detail), when that file is there: the batch's events are
    gathered, completed by ``with_detail``, then written."""

    def __init__(
        self, *args, detail: SourceTable | None = None, detail_columns=(), **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.detail, self.detail_columns = detail, list(detail_columns)

    def run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        parts = list(self.frames(batch, progress))
        if not parts:
            return
        events = pd.concat(parts, ignore_index=True)
        if self.detail is not None:
            events = self.with_detail(events)
        summary.add_events(self.name, writer.write(_in_index_order(events)))

    def with_detail(self, events: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError


def _pandas_chunk(block: pa.RecordBatch) -> pd.DataFrame:
    """A block of text columns as ``read_csv(dtype=str)`` gives it."""
    frame = {}
    for name, column in zip(block.schema.names, block.columns):
        values = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        frame[name] = values.where(values.notna(), np.nan)
    return pd.DataFrame(frame)
