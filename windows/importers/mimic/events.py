"""An event file streamed for one batch of admissions: its rows selected, turned
into events in chunks by the file's transform, and written."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs.progress import Progress
from windows.importers.base import EventWriter, ImportSummary, SourceTable
from windows.importers.mimic.patients_admissions_stays import Batch
from windows.importers.mimic.reading import CHUNK_ROWS, TableSpec
from windows.models import EventKind

OBS = EventKind.OBSERVATION.value
ACT = EventKind.ACTION.value
CODED = EventKind.CODED.value


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
            chunk, first_row, self.table.display, assign_by=self.assign_by
        )
        if not len(selected):
            return None
        events = self.transform(selected, self.table.display)
        untimed = events["time"].isna().to_numpy()
        if untimed.any():
            self.untimed += int(untimed.sum())
            events = events[~untimed]
        return events

    def run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        for events in self.frames(batch, progress):
            summary.add_events(self.name, writer.write(_in_index_order(events)))


def _pandas_chunk(block: pa.RecordBatch) -> pd.DataFrame:
    """A block of text columns as ``read_csv(dtype=str)`` gives it."""
    frame = {}
    for name, column in zip(block.schema.names, block.columns):
        values = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        frame[name] = values.where(values.notna(), np.nan)
    return pd.DataFrame(frame)
