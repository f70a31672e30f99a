"""Each event file read once, whatever the number of batches: its rows of the
admissions to import are routed to their batch's spill file (parquet, in a
temporary folder, one row group per source chunk), with their file row number in
``_row``; each batch then reads only its own rows from there (``SpillTable``).
Memory is bounded by one source chunk; disk holds the selected rows once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.progress import Progress
from windows.importers.base import SourceDataError
from windows.importers.mimic.events import EventStep
from windows.importers.mimic.patients_admissions_stays import (
    NO_HADM,
    NO_HADM_PATIENT,
    NOT_IMPORTED,
)
from windows.importers.mimic.reading import MimicTable, _numbers

ROW = "_row"

# Rows per block read back from a spill file: a batch's rows are all its own, so a
# block turns wholly into events; smaller blocks than the source's keep the event
# frames (and the writes in flight) small.
SPILL_BLOCK_ROWS = 50_000

# The column of an event file that names the rows of its detail file.
DETAIL_KEYS = {"emar": "emar_id", "radiology": "note_id"}


class SpillTable:
    """The rows of one batch (or of a detail file's wanted keys) as the steps read a
    source table: ``chunks`` and ``arrow_blocks`` with the source's column types,
    and ``_row`` giving each row's line in the source file."""

    def __init__(
        self, path: Path | None, source: MimicTable, columns: list[str], *, rows: bool
    ) -> None:
        self.path, self.source, self._columns = path, source, list(columns)
        self.display, self.has_rows = source.display, rows

    @property
    def is_parquet(self) -> bool:
        return self.source.is_parquet

    def columns(self) -> list[str]:
        return list(self._columns)

    def require(self, required) -> None:
        for column in required:
            if column not in self._columns:
                raise SourceDataError(
                    "required column is missing", file=self.display, column=column
                )

    def arrow_blocks(
        self, columns: list[str], rows: int = 250_000
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        if self.path is None:
            return
        rows = min(rows, SPILL_BLOCK_ROWS)
        wanted = [*columns, ROW] if self.has_rows else list(columns)
        parts, gathered = [], 0
        for part in pq.ParquetFile(self.path).iter_batches(
            batch_size=rows, columns=wanted
        ):
            parts.append(part)
            gathered += part.num_rows
            if gathered >= rows:
                yield self._first(parts[0]), _one(parts)
                parts, gathered = [], 0
        if gathered:
            yield self._first(parts[0]), _one(parts)

    def _first(self, block: pa.RecordBatch) -> int:
        return int(block.column(ROW)[0].as_py()) if self.has_rows else 1

    def chunks(self, columns, chunksize=500_000, dtype=None, all_fields=False):
        for first, block in self.arrow_blocks(list(columns), chunksize):
            frame = block.to_pandas()
            if not self.is_parquet:  # as read_csv(dtype=str) gives it: NaN
                for name in columns:
                    frame[name] = frame[name].where(frame[name].notna(), np.nan)
            yield first, frame


def _one(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def _ids(block, name: str, rows: np.ndarray, file: str) -> np.ndarray:
    """An id column as floats (NaN where missing); a value that is not a whole
    number raises naming its row, as ``Batch.select`` does."""
    column = block.column(name)
    try:
        values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = None
    if values is None or (np.nan_to_num(values) % 1 != 0).any():
        series = pd.Series(column.to_pandas(), dtype=object)
        values = _numbers(
            series, file=file, column=name, rows=rows, integer=True
        ).to_numpy(dtype=float)
    return np.asarray(values, dtype=float)


def _lookup(index: pd.Index, values: np.ndarray) -> np.ndarray:
    out = np.full(len(values), -1, dtype="int64")
    known = ~np.isnan(values)
    if known.any():
        out[known] = index.get_indexer(values[known].astype("int64"))
    return out


class Router:
    """Routes every event file's rows once into per-batch spill files under
    ``directory``; ``tables(step, number)`` then gives the step its batch's rows."""

    def __init__(
        self,
        directory: Path,
        batches: list[list[int]],
        subjects: pd.Series,  # hadm_id -> subject_id of the admissions to import
    ) -> None:
        self.directory = Path(directory)
        hadm = [h for b in batches for h in b]
        self.hadm = pd.Index(np.asarray(hadm, dtype="int64"))
        self.batch_of = np.asarray(
            [n for n, b in enumerate(batches) for _ in b], dtype="int64"
        )
        by_subject: dict[int, set[int]] = {}
        for h, n in zip(hadm, self.batch_of):
            by_subject.setdefault(int(subjects.loc[h]), set()).add(int(n))
        self.subject_batches = {s: sorted(b) for s, b in by_subject.items()}
        self.subjects = pd.Index(np.asarray(sorted(by_subject), dtype="int64"))
        self.spills: dict[int, dict[int, SpillTable]] = {}
        self.details: dict[int, SpillTable] = {}
        self.empty: dict[int, SpillTable] = {}

    def route(self, position: int, step: EventStep, progress: Progress) -> None:
        table = step.table
        columns = list(step.columns)
        schema = table.schema(columns).append(pa.field(ROW, pa.int64()))
        writers: dict[int, pq.ParquetWriter] = {}
        key = DETAIL_KEYS.get(step.name) if getattr(step, "detail", None) else None
        keys: set = set()
        read = 0
        try:
            for first_row, block in self._blocks(table, columns, step.chunk_rows):
                rows = np.arange(first_row, first_row + block.num_rows)
                read += block.num_rows
                where, batch = self._targets(block, rows, table.display, step)
                for number in np.unique(batch):
                    take = where[batch == number]
                    part = block.take(pa.array(take))
                    arrays = [*part.columns, pa.array(rows[take], pa.int64())]
                    out = pa.RecordBatch.from_arrays(arrays, schema=schema)
                    if int(number) not in writers:
                        path = self.directory / f"{position}-{int(number)}.parquet"
                        writers[int(number)] = pq.ParquetWriter(path, schema)
                    writers[int(number)].write_batch(out)
                    if key is not None:
                        keys.update(pc.unique(part.column(key)).to_pylist())
                progress.advance(0, f"{step.name}: {read:,} rows")
        finally:
            for writer in writers.values():
                writer.close()
        self.spills[position] = {
            number: SpillTable(
                self.directory / f"{position}-{number}.parquet",
                table,
                columns,
                rows=True,
            )
            for number in writers
        }
        self.empty[position] = SpillTable(None, table, columns, rows=True)
        if key is not None:
            self._route_detail(position, step, keys)

    def _targets(self, block, rows, file, step) -> tuple[np.ndarray, np.ndarray]:
        """(row positions, batch numbers) of the block's rows to import, in file
        order within each batch; a row without hadm_id, for a file placed by time
        (``assign_by``), goes to every batch holding an admission of its subject
        (the batch's ``select`` places it or leaves it)."""
        hadm = _ids(block, "hadm_id", rows, file)
        pos = _lookup(self.hadm, hadm)
        where = np.flatnonzero(pos >= 0)
        batch = self.batch_of[pos[where]]
        orphan = np.flatnonzero(np.isnan(hadm))
        # The rows no batch takes, counted as Batch.select counts them.
        step.tally.add(NOT_IMPORTED, len(hadm) - len(where) - len(orphan))
        if not step.assign_by:
            step.tally.add(NO_HADM, len(orphan))
        if step.assign_by and len(orphan):
            subject = _ids(
                block.take(pa.array(orphan)), "subject_id", rows[orphan], file
            )
            known = _lookup(self.subjects, subject) >= 0
            step.tally.add(NO_HADM_PATIENT, int((~known).sum()))
            extra_rows, extra_batches = [], []
            for row, s in zip(orphan[known], subject[known].astype("int64")):
                for number in self.subject_batches[int(s)]:
                    extra_rows.append(row)
                    extra_batches.append(number)
            if extra_rows:
                where = np.concatenate([where, np.asarray(extra_rows, dtype="int64")])
                batch = np.concatenate([batch, np.asarray(extra_batches, "int64")])
                order = np.lexsort((where, batch))
                where, batch = where[order], batch[order]
        return where, batch

    @staticmethod
    def _blocks(table: MimicTable, columns: list[str], rows: int):
        """The file's blocks as Arrow batches; a CSV block Arrow cannot read sends
        the rest of the file to pandas' reader, whose error names the line."""
        if table.is_parquet:
            yield from table.arrow_blocks(columns, rows=rows)
            return
        table.require(columns)
        blocks = table.arrow_blocks(columns, rows=rows)
        done = 0
        schema = table.schema(columns)
        while True:
            try:
                first_row, block = next(blocks)
            except StopIteration:
                return
            except SourceDataError:
                raise
            except Exception:  # whatever Arrow says: pandas' reader words it
                for first_row, chunk in table.chunks(
                    columns, chunksize=rows, all_fields=True
                ):
                    if first_row + len(chunk) <= done + 1:
                        continue
                    if first_row <= done:
                        chunk = chunk.iloc[done + 1 - first_row :]
                        first_row = done + 1
                    yield (
                        first_row,
                        pa.RecordBatch.from_pandas(
                            chunk.reset_index(drop=True),
                            schema=schema,
                            preserve_index=False,
                        ),
                    )
                return
            done += block.num_rows
            yield first_row, block

    def _route_detail(self, position: int, step: EventStep, keys: set) -> None:
        """The detail file's rows of the wanted keys, read once into one spill."""
        detail, columns = step.detail, list(step.detail_columns)
        key = columns[0]
        path = self.directory / f"{position}-detail.parquet"
        schema = detail.schema(columns)
        with pq.ParquetWriter(path, schema) as writer:
            for _, chunk in detail.chunks(columns, chunksize=step.chunk_rows):
                chunk = chunk[chunk[key].isin(keys)]
                if len(chunk):
                    writer.write_table(
                        pa.Table.from_pandas(
                            chunk.reset_index(drop=True),
                            schema=schema,
                            preserve_index=False,
                        )
                    )
        self.details[position] = SpillTable(path, detail, columns, rows=False)

    def tables(self, position: int, step: EventStep, number: int) -> None:
        """Point the step at its rows of batch ``number``."""
        spills = self.spills.get(position)
        if spills is None:
            return
        step.table = spills.get(number) or self.empty[position]
        if position in self.details:
            step.detail = self.details[position]
