"""What every importer shares: locating and reading source tables in chunks,
strict time parsing with errors that name file, row and column, the import's
summary. Writing events is in windows.importers.writing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from django.core.exceptions import ValidationError

# The strings pandas' read_csv reads as missing by default (keep_default_na, as
# documented for read_csv's na_values), so both CSV readers agree on what is
# missing; tests/windows/test_import_mimic_chartevents.py checks the list against
# pandas.
_PANDAS_NA = [
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
]


class SourceDataError(ValidationError):
    """A source file cannot be imported; the message names file, row and column."""

    def __init__(
        self, message: str, *, file: str = "", row: int | None = None, column: str = ""
    ):
        where = []
        if file:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row}")
        if column:
            where.append(f"column {column}")
        full = f"{', '.join(where)}: {message}" if where else message
        super().__init__(full)
        self.file, self.row, self.column = file, row, column
        self.detail = message


@dataclass
class SourceTable:
    """One source file, read in chunks; row numbers are 1-based data rows."""

    path: Path
    display: str

    @property
    def is_parquet(self) -> bool:
        return self.path.name.endswith(".parquet")

    def columns(self) -> list[str]:
        try:
            if self.is_parquet:
                return list(pq.read_schema(self.path).names)
            return list(pd.read_csv(self.path, nrows=0).columns)
        except Exception as exc:  # a broken file, whatever the library says
            raise self.unreadable(exc) from exc

    def unreadable(self, exc: Exception, row: int | None = None) -> SourceDataError:
        """The error for this file when the library reading it raised ``exc``
        (at ``row``, where known)."""
        return SourceDataError(f"cannot be read ({exc})", file=self.display, row=row)

    def require(self, required: Iterable[str]) -> None:
        present = set(self.columns())
        for col in required:
            if col not in present:
                raise SourceDataError(
                    "required column is missing", file=self.display, column=col
                )

    def chunks(
        self,
        columns: list[str],
        chunksize: int = 500_000,
        dtype: dict | None = None,
        all_fields: bool = False,
    ) -> Iterator[tuple[int, pd.DataFrame]]:
        """Yield (first_row_number, frame) with at most ``chunksize`` rows each.

        With ``all_fields``, a CSV file is read whole and then cut to ``columns``:
        pandas reading only some columns (usecols) accepts a line with more
        fields than the header without a word; read whole, it names the line."""
        self.require(columns)
        row = 1
        try:
            if self.is_parquet:
                pf = pq.ParquetFile(self.path)
                for batch in pf.iter_batches(batch_size=chunksize, columns=columns):
                    frame = batch.to_pandas()
                    yield row, frame
                    row += len(frame)
            else:
                reader = pd.read_csv(
                    self.path,
                    usecols=None if all_fields else columns,
                    chunksize=chunksize,
                    dtype=dtype or str,
                    keep_default_na=True,
                    low_memory=False,
                )
                for frame in reader:
                    if all_fields:
                        frame = frame[columns]
                    yield row, frame
                    row += len(frame)
        except SourceDataError:
            raise
        except Exception as exc:
            raise self.unreadable(exc, row) from exc

    def arrow_blocks(
        self, columns: list[str], rows: int = 250_000
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Yield (first_row_number, batch) of about ``rows`` rows of a CSV file
        (plain or .gz) read by Arrow's streaming reader: the columns as text, with
        the values pandas' ``read_csv`` reads as missing (its default NA strings)
        as nulls, so that a batch holds the same values as the frames of
        ``chunks``, without a Python object per cell. Arrow's reader reads up to
        32 blocks ahead of its consumer, so blocks are small (2 MB: at most 64 MB
        ahead, whatever the file's size) and gathered into batches here. Arrow's
        own errors (a malformed line) propagate; callers that promise pandas'
        messages fall back to ``chunks``."""
        reader = pa_csv.open_csv(
            pa.input_stream(str(self.path), compression="detect"),
            read_options=pa_csv.ReadOptions(block_size=2 << 20, use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                include_columns=columns,
                column_types={c: pa.string() for c in columns},
                null_values=_PANDAS_NA,
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
        first, parts, gathered = 1, [], 0
        for part in reader:
            parts.append(part)
            gathered += part.num_rows
            if gathered >= rows:
                yield first, _one_batch(parts, reader.schema)
                first, parts, gathered = first + gathered, [], 0
        if gathered:
            yield first, _one_batch(parts, reader.schema)

    def read_all(self, columns: list[str], dtype: dict | None = None) -> pd.DataFrame:
        parts = [frame for _, frame in self.chunks(columns, dtype=dtype)]
        if not parts:
            return pd.DataFrame(columns=columns)
        return pd.concat(parts, ignore_index=True)


def _one_batch(parts: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    """Record batches as one, each column in one contiguous array."""
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts, schema=schema).combine_chunks().to_batches()[0]


def find_table(directory: Path, names: Iterable[str]) -> SourceTable | None:
    """The first of ``name.parquet``, ``name.csv``, ``name.csv.gz`` found in
    directory."""
    for name in names:
        for ext in (".parquet", ".csv", ".csv.gz"):
            candidate = directory / f"{name}{ext}"
            if candidate.exists():
                return SourceTable(candidate, str(candidate))
    return None


def reject_first(
    bad,
    message: Callable[[int], str],
    *,
    file: str,
    column: str,
    first_row: int = 1,
    rows: np.ndarray | None = None,
) -> None:
    """Raise SourceDataError at the first row where ``bad`` holds; ``message``
    words it from that row's position. The row named is ``first_row`` plus the
    position, or, for values no longer in file order, ``rows`` at the position."""
    mask = np.asarray(bad, dtype=bool)
    if mask.any():
        pos = int(mask.argmax())
        row = first_row + pos if rows is None else int(rows[pos])
        raise SourceDataError(message(pos), file=file, row=row, column=column)


def parse_times(
    values: pd.Series, *, file: str, column: str, first_row: int, required: bool = True
) -> pd.Series:
    """Timezone-aware UTC times; an unparseable (or, if required, missing) value
    raises with its row number. Naive times are taken as UTC, as MIMIC-IV's are."""
    if pd.api.types.is_datetime64_any_dtype(values):
        parsed = values
    else:
        parsed = pd.to_datetime(values, errors="coerce", utc=True, format="mixed")
        reject_first(
            parsed.isna() & values.notna() & (values.astype(str).str.strip() != ""),
            lambda pos: f"unparseable time {values.iloc[pos]!r}",
            file=file,
            column=column,
            first_row=first_row,
        )
    if getattr(parsed.dt, "tz", None) is None:
        parsed = parsed.dt.tz_localize("UTC")
    else:
        parsed = parsed.dt.tz_convert("UTC")
    if required:
        reject_first(
            parsed.isna(),
            lambda pos: "time is missing",
            file=file,
            column=column,
            first_row=first_row,
        )
    return parsed


def parse_whole_numbers(
    values: pd.Series,
    *,
    file: str,
    column: str,
    first_row: int,
    low: int | None = None,
    high: int | None = None,
) -> pd.Series:
    """Whole numbers as floats (missing stays NaN), for a column the importer
    stores as an integer: a value that is not a number, not whole, or outside
    [low, high] raises with its row, before anything is written, instead of a
    bare ``int()`` error in the middle of a batch."""
    parsed = pd.to_numeric(values, errors="coerce").astype("float64")
    present = values.notna() & (values.astype(str).str.strip() != "")
    problems = [
        (parsed.isna() & present, "is not a number"),
        (parsed.notna() & ~np.isfinite(parsed.fillna(0)), "is not a finite number"),
        (
            parsed.notna() & (parsed != np.floor(parsed.fillna(0))),
            "is not a whole number",
        ),
    ]
    if low is not None:
        problems.append((parsed < low, f"is below {low}"))
    if high is not None:
        problems.append((parsed > high, f"is above {high}"))
    first = None
    for bad, why in problems:
        mask = np.asarray(bad, dtype=bool)
        if mask.any():
            pos = int(mask.argmax())
            if first is None or pos < first[0]:
                first = (pos, why)
    if first is not None:
        pos, why = first
        raise SourceDataError(
            f"{values.iloc[pos]!r} {why}", file=file, row=first_row + pos, column=column
        )
    return parsed.where(present)


def check_order(
    start: pd.Series,
    end: pd.Series,
    *,
    file: str,
    first_row: int,
    start_col: str,
    end_col: str,
) -> None:
    """Raise on the first row whose end time lies before its start time."""
    reject_first(
        (end < start) & end.notna() & start.notna(),
        lambda pos: (
            f"{end_col} {end.iloc[pos]} is before {start_col} {start.iloc[pos]}"
        ),
        file=file,
        column=end_col,
        first_row=first_row,
    )


@dataclass
class ImportSummary:
    """What an import did; printed at the end of a command and kept on the run."""

    source: str
    patients: int = 0
    admissions: int = 0
    stays: int = 0
    skipped_admissions: int = 0
    events: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The keys of the data sources read (windows.datasources), linked to every
    # stay imported: their data-use terms follow the stays.
    data_sources: list[str] = field(default_factory=list)
    # Source rows that are no event of their own, by file and reason (left out,
    # merged into another event, or a duplicate imported once): file -> reason
    # -> rows.
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)

    def add_events(self, table: str, n: int) -> None:
        self.events[table] = self.events.get(table, 0) + n

    def add_dropped(self, file: str, reason: str, n: int) -> None:
        """Count ``n`` rows of ``file`` that are no event of their own."""
        if n:
            reasons = self.dropped.setdefault(file, {})
            reasons[reason] = reasons.get(reason, 0) + n

    def add_actions(self, counts: dict[str, int]) -> None:
        """Actions per domain, as ``windows.actions`` derived them."""
        for domain, n in counts.items():
            self.actions[domain] = self.actions.get(domain, 0) + n

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "patients": self.patients,
            "admissions": self.admissions,
            "stays": self.stays,
            "skipped_admissions": self.skipped_admissions,
            "events": dict(self.events),
            "total_events": self.total_events,
            "actions": dict(self.actions),
            "notes": list(self.notes),
            "data_sources": list(self.data_sources),
            "dropped": {f: dict(r) for f, r in self.dropped.items()},
        }

    def __str__(self) -> str:
        lines = [
            f"{self.source} import: {self.patients} patients, {self.admissions} "
            "admissions, "
            f"{self.stays} ICU stays, {self.total_events} events"
            + (
                f"; {self.skipped_admissions} admissions already imported, skipped"
                if self.skipped_admissions
                else ""
            ),
        ]
        for table, n in sorted(self.events.items()):
            lines.append(f"  {table:<40} {n:>10}")
        if self.actions:
            lines.append(
                f"  actions derived by windows.actions (changes of rate, device, mode, "
                f"setting, CRRT, position, code status): {sum(self.actions.values())}"
            )
            for domain, n in sorted(self.actions.items()):
                lines.append(f"    {domain:<38} {n:>10}")
        if self.dropped:
            total = sum(n for r in self.dropped.values() for n in r.values())
            lines.append(f"  source rows not imported as events of their own: {total}")
            for file, reasons in sorted(self.dropped.items()):
                for reason, n in sorted(reasons.items()):
                    lines.append(f"    {file}: {n} {reason}")
        if self.data_sources:
            lines.append(f"  data sources: {', '.join(self.data_sources)}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)
