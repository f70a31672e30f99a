"""Fast event writing for every importer: normalized event frames appended to
the Event table by PostgreSQL COPY (a bulk insert elsewhere), and the planner's
statistics kept current while an import grows the table."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.db import connection

from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import Event

EVENT_COLUMNS = [
    "admission_id",
    "time",
    "end_time",
    *EVENT_VALUE_FIELDS,
    "source_table",
    "source_key",
    "order_id",
]
_TEXT_COLUMNS = (
    "kind",
    "domain",
    "category",
    "name",
    "unit",
    "value_text",
    "source_table",
    "source_key",
    "order_id",
)
TEXT_LIMITS = {
    "category": 64,
    "name": 255,
    "unit": 32,
    "source_table": 48,
    "source_key": 128,
    "order_id": 64,
}


# KiB of SQLite page cache on an importing connection.
SQLITE_CACHE_KB = 262_144

_ARROW_SCHEMA = pa.schema(
    [
        ("admission_id", pa.int64()),
        ("time", pa.string()),
        ("end_time", pa.string()),
        ("kind", pa.string()),
        ("domain", pa.string()),
        ("category", pa.string()),
        ("name", pa.string()),
        ("value_num", pa.float64()),
        ("unit", pa.string()),
        ("value_text", pa.string()),
        ("source_table", pa.string()),
        ("source_key", pa.string()),
        ("order_id", pa.string()),
    ]
)
# The events' columns as EventWriter.write_arrow takes them.
EVENT_ARROW_SCHEMA = _ARROW_SCHEMA


def _clean_text(series: pd.Series, limit: int | None) -> pd.Categorical:
    """Text with missing values as '' and cut to the column's length, as a
    categorical: cleaned per distinct value, since most columns repeat a handful
    of values over millions of rows, and handed to Arrow without a Python string
    per row."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    cleaned = [str(v)[:limit] if limit else str(v) for v in uniques] + [""]
    # Cleaning can merge values (1 and "1"); categories must stay distinct.
    merged_codes, categories = pd.factorize(pd.Index(cleaned, dtype=object))
    codes = np.where(codes < 0, len(cleaned) - 1, codes)
    return pd.Categorical.from_codes(merged_codes[codes], categories=categories)


def events_cleaned(frame: pd.DataFrame) -> pd.DataFrame:
    """An event frame in ``EVENT_COLUMNS``, as both writers take it: text
    columns cleaned (``_clean_text``), numbers finite or missing."""
    frame = frame.reindex(columns=EVENT_COLUMNS)
    frame["admission_id"] = frame["admission_id"].astype("int64")
    for col in _TEXT_COLUMNS:
        frame[col] = _clean_text(frame[col], TEXT_LIMITS.get(col))
    values = pd.to_numeric(frame["value_num"], errors="coerce").astype("float64")
    frame["value_num"] = values.where(np.isfinite(values))
    return frame


def _arrow_time(values: pd.Series) -> pa.Array:
    """UTC times as ISO text without offset, formatted by numpy (Arrow's own
    timestamp formatting is five times slower). Django sets the PostgreSQL
    session's time zone to UTC, so the server reads them as UTC."""
    times = pd.to_datetime(values, utc=True)
    naive = times.dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
    text = np.datetime_as_string(naive, unit="us")
    return pa.array(text, type=pa.string(), mask=np.isnat(naive))


def _arrow_text(values: pd.Categorical) -> pa.Array:
    dictionary = pa.array(np.asarray(values.categories, dtype=object), type=pa.string())
    return pa.DictionaryArray.from_arrays(
        pa.array(values.codes), dictionary
    ).dictionary_decode()


class EventWriter:
    """Appends normalized event frames to the Event table inside the caller's
    transaction: PostgreSQL COPY, or a bulk insert elsewhere.

    On PostgreSQL the COPY of one frame runs in a background thread while the
    importer reads and transforms the next chunk, so the client's pandas work and
    the server's parsing overlap. At most one COPY is in flight; ``flush()`` (also
    called by the next ``write``) waits for it and raises its error, if any.
    Call ``flush()`` before the transaction ends.
    """

    def __init__(self) -> None:
        self.written = 0
        self._pending: Future | None = None
        self._executor: ThreadPoolExecutor | None = None

    def write(self, frame: pd.DataFrame) -> int:
        if frame.empty:
            return 0
        frame = events_cleaned(frame)
        if connection.vendor == "postgresql":
            self._submit(self._csv(frame))
        else:
            self._bulk(frame)
        self.written += len(frame)
        return len(frame)

    def write_arrow(self, table: pa.Table) -> int:
        """Append events already in the COPY's form (PostgreSQL only): the
        columns of ``_ARROW_SCHEMA`` in its order, times as UTC ISO text, text
        columns not null and within their length (``TEXT_LIMITS``)."""
        if not table.num_rows:
            return 0
        payload = self._arrow_csv(table.cast(_ARROW_SCHEMA))
        self._submit(payload)
        self.written += table.num_rows
        return table.num_rows

    def _submit(self, payload: memoryview) -> None:
        self.flush()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1)
        raw = connection.connection  # the psycopg connection, in this transaction
        self._pending = self._executor.submit(self._copy, raw, payload)

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, exc_type, _exc, _tb) -> None:
        if exc_type is None:
            self.close()
        else:
            # The transaction is rolling back; wait for the COPY, ignore its fate.
            try:
                self.close()
            except Exception:
                pass

    @staticmethod
    def _csv(frame: pd.DataFrame) -> memoryview:
        """CSV for COPY, by Arrow's C++ writer. Unquoted empty fields are NULL
        (times, numbers); text columns are forced not-null in the COPY, so empty
        text stays empty text."""
        arrays = []
        for spec in _ARROW_SCHEMA:
            col = frame[spec.name]
            if spec.name in _TEXT_COLUMNS:
                arrays.append(_arrow_text(col.array))
            elif spec.name in ("time", "end_time"):
                arrays.append(_arrow_time(col))
            else:
                arrays.append(
                    pa.array(col.to_numpy(), type=spec.type, from_pandas=True)
                )
        return EventWriter._arrow_csv(
            pa.Table.from_arrays(arrays, schema=_ARROW_SCHEMA)
        )

    @staticmethod
    def _arrow_csv(arrow: pa.Table) -> memoryview:
        # Unquoted when no value needs quotes: less for the server to parse.
        for quoting in ("none", "needed"):
            sink = pa.BufferOutputStream()
            try:
                pa_csv.write_csv(
                    arrow,
                    sink,
                    write_options=pa_csv.WriteOptions(
                        include_header=False, quoting_style=quoting
                    ),
                )
            except pa.ArrowInvalid:  # a comma, quote or line break in a value
                continue
            return memoryview(sink.getvalue())
        raise AssertionError("quoting 'needed' writes any value")

    @staticmethod
    def _copy(raw, payload: memoryview) -> None:
        cols = ", ".join(EVENT_COLUMNS)
        text_cols = ", ".join(c for c in EVENT_COLUMNS if c in _TEXT_COLUMNS)
        sql = (
            f"COPY {Event._meta.db_table} ({cols}) FROM STDIN "
            f"WITH (FORMAT csv, FORCE_NOT_NULL ({text_cols}))"
        )
        with raw.cursor() as cursor, cursor.copy(sql) as copy:
            copy.write(payload)

    def _bulk(self, frame: pd.DataFrame) -> None:
        # SQLite: one executemany of plain tuples (sqlite_rows).
        table = Event._meta.db_table
        marks = ", ".join(["%s"] * len(EVENT_COLUMNS))
        sql = f"INSERT INTO {table} ({', '.join(EVENT_COLUMNS)}) VALUES ({marks})"
        rows = sqlite_rows(frame)
        with connection.cursor() as cursor:
            # A page cache that holds the event index a batch touches (the
            # default 2 MB spilled its pages to the log while the index grew:
            # a fifth more CPU time for the inserts).
            cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")
            for start in range(0, len(rows), 50_000):
                cursor.executemany(sql, rows[start : start + 50_000])


def sqlite_rows(frame: pd.DataFrame) -> list[tuple]:
    """The rows of a frame cleaned by ``EventWriter.write`` as SQLite's insert
    takes them, in ``EVENT_COLUMNS`` order: Python values built column by
    column (no per-row pandas work), None for missing times and numbers, times
    in the text form Django's SQLite backend stores (naive UTC,
    "YYYY-MM-DD HH:MM:SS.ffffff")."""
    columns = []
    for col in EVENT_COLUMNS:
        values = frame[col]
        if col in ("time", "end_time"):
            columns.append(_sqlite_times(values))
        elif col == "value_num":
            numbers = values.to_numpy(dtype="float64")
            out = numbers.astype(object)
            out[np.isnan(numbers)] = None
            columns.append(out.tolist())
        elif col in _TEXT_COLUMNS:
            words = np.asarray(values.array.categories, dtype=object)
            columns.append(words[values.array.codes].tolist())
        else:
            columns.append(values.to_numpy().tolist())
    return list(zip(*columns))


def _sqlite_times(values: pd.Series) -> list:
    """UTC times as Django's SQLite backend stores them (naive, space-separated,
    microseconds), None where missing; formatted by numpy, not strftime."""
    naive = (
        pd.to_datetime(values, utc=True)
        .dt.tz_localize(None)
        .to_numpy(dtype="datetime64[us]")
    )
    text = np.datetime_as_string(naive, unit="us").astype("U26")
    chars = text.view("U1").reshape(len(text), 26)
    chars[:, 10] = " "
    out = text.astype(object)
    out[np.isnat(naive)] = None
    return out.tolist()


class EventStatistics:
    """Keeps the planner's statistics of the event table current while an
    import grows it batch by batch: ANALYZE once the rows written since the
    last one outnumber the rows the table held then (so about log2(final /
    first batch) times in all: 6 for 50 batches).

    Without it, a table that was never analyzed (autovacuum off, or behind a
    long import) is planned as nearly empty: each batch's own queries (the
    temperature sites, blood-gas specimens and derived actions of its
    admissions) ran as parallel sequential scans of the whole table, and a
    10,000-stay import's batches slowed from 7 to 20 s as it grew."""

    MIN_ROWS = 100_000

    def __init__(self) -> None:
        self.enabled = connection.vendor == "postgresql"
        self.written = 0
        self.held = 0
        if self.enabled:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
                    [Event._meta.db_table],
                )
                row = cursor.fetchone()
            self.held = max(int(row[0]), 0) if row else 0
        self.analyzed = 0

    def committed(self, rows: int) -> bool:
        """Count ``rows`` written by a committed batch; ANALYZE when due.
        Returns whether it ran."""
        if not self.enabled:
            return False
        self.written += rows
        if self.written < max(self.held, self.MIN_ROWS):
            return False
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Event._meta.db_table}")
        self.held += self.written
        self.written = 0
        self.analyzed += 1
        return True
