"""Reading MIMIC-IV files: where each table lives and the columns read from it,
the folder's files located once, and values parsed with errors that name the file,
row and column."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from windows.importers.base import SourceDataError, SourceTable, reject_first

CHUNK_ROWS = 250_000


@dataclass(frozen=True)
class TableSpec:
    """One MIMIC-IV file: where it lives and the columns the importer reads."""

    module: str
    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    @property
    def display(self) -> str:
        return f"{self.module}/{self.name}"


PATIENTS = TableSpec(
    "hosp", "patients", ("subject_id", "gender", "anchor_age", "anchor_year"), ("dod",)
)
ADMISSIONS = TableSpec(
    "hosp",
    "admissions",
    ("subject_id", "hadm_id", "admittime", "dischtime"),
    ("deathtime", "admission_type", "discharge_location", "hospital_expire_flag"),
)
ICUSTAYS = TableSpec(
    "icu",
    "icustays",
    ("subject_id", "hadm_id", "stay_id", "intime", "outtime"),
    ("first_careunit", "last_careunit"),
)
DIAGNOSES = TableSpec(
    "hosp", "diagnoses_icd", ("hadm_id", "seq_num", "icd_code", "icd_version")
)
D_ICD_DIAGNOSES = TableSpec(
    "hosp", "d_icd_diagnoses", ("icd_code", "icd_version", "long_title")
)
D_ITEMS = TableSpec("icu", "d_items", ("itemid", "label"), ("param_type",))
D_LABITEMS = TableSpec("hosp", "d_labitems", ("itemid", "label"), ("fluid",))

CHARTEVENTS = TableSpec(
    "icu",
    "chartevents",
    ("hadm_id", "charttime", "itemid", "value", "valuenum", "valueuom"),
    ("storetime",),
)


LABEVENTS = TableSpec(
    "hosp",
    "labevents",
    (
        "labevent_id",
        "subject_id",
        "hadm_id",
        "itemid",
        "charttime",
        "value",
        "valuenum",
        "valueuom",
    ),
    ("storetime",),
)
INPUTEVENTS = TableSpec(
    "icu",
    "inputevents",
    (
        "hadm_id",
        "starttime",
        "endtime",
        "itemid",
        "amount",
        "amountuom",
        "rate",
        "rateuom",
        "orderid",
    ),
    ("patientweight", "statusdescription", "linkorderid"),
)
OUTPUTEVENTS = TableSpec(
    "icu", "outputevents", ("hadm_id", "charttime", "itemid", "value", "valueuom")
)
PROCEDUREEVENTS = TableSpec(
    "icu",
    "procedureevents",
    ("hadm_id", "starttime", "endtime", "itemid", "value", "valueuom", "orderid"),
    ("location", "statusdescription"),
)
DATETIMEEVENTS = TableSpec(
    "icu", "datetimeevents", ("hadm_id", "charttime", "itemid", "value")
)
EMAR = TableSpec(
    "hosp", "emar", ("hadm_id", "emar_id", "charttime", "medication", "event_txt")
)
EMAR_DETAIL = TableSpec(
    "hosp", "emar_detail", ("emar_id", "dose_given", "dose_given_unit"), ("route",)
)
PRESCRIPTIONS = TableSpec(
    "hosp",
    "prescriptions",
    ("hadm_id", "starttime", "drug"),
    ("stoptime", "dose_val_rx", "dose_unit_rx", "route"),
)
MICROBIOLOGYEVENTS = TableSpec(
    "hosp",
    "microbiologyevents",
    (
        "microevent_id",
        "subject_id",
        "hadm_id",
        "chartdate",
        "spec_type_desc",
        "org_name",
    ),
    (
        "charttime",
        "storedate",
        "storetime",
        "test_name",
        "ab_name",
        "interpretation",
        "micro_specimen_id",
    ),
)
PROCEDURES_ICD = TableSpec(
    "hosp", "procedures_icd", ("hadm_id", "chartdate", "icd_code", "icd_version")
)
HCPCSEVENTS = TableSpec("hosp", "hcpcsevents", ("hadm_id", "chartdate", "hcpcs_cd"))
TRANSFERS = TableSpec(
    "hosp",
    "transfers",
    ("hadm_id", "eventtype", "careunit", "intime"),
    ("outtime", "transfer_id"),
)


def _numbers(
    values: pd.Series,
    *,
    file: str,
    column: str,
    rows: np.ndarray,
    required: bool = False,
    integer: bool = False,
) -> pd.Series:
    """Floats; a value that is not a number raises naming its row. ``rows`` holds
    the 1-based file row of each value."""
    where = {"file": file, "column": column, "rows": rows}
    try:
        out = values.astype("float64")
    except (TypeError, ValueError):
        out = pd.to_numeric(values, errors="coerce")
        reject_first(
            out.isna() & values.notna(),
            lambda pos: f"{values.iloc[pos]!r} is not a number",
            **where,
        )
    if required:
        reject_first(out.isna(), lambda pos: "value is missing", **where)
    if integer:
        reject_first(
            out.notna() & (out % 1 != 0),
            lambda pos: f"{values.iloc[pos]!r} is not an integer id",
            **where,
        )
    return out


def _times(
    values: pd.Series,
    *,
    file: str,
    column: str,
    rows: np.ndarray,
    required: bool = False,
) -> pd.Series:
    """UTC times from MIMIC's ISO times (naive, taken as UTC) or, for the date
    columns (``DATE_COLUMNS``: dod, chartdate, storedate), dates; an unparseable
    value, a date without a time in a time column or, if required, a missing
    value raises naming its row."""
    where = {"file": file, "column": column, "rows": rows}
    if pd.api.types.is_datetime64_any_dtype(values):
        out = values if values.dt.tz is not None else values.dt.tz_localize("UTC")
        out = out.dt.tz_convert("UTC")
    else:
        out = pd.to_datetime(values, format="ISO8601", errors="coerce", utc=True)
        reject_first(
            out.isna() & values.notna(),
            lambda pos: f"unparseable time {values.iloc[pos]!r}",
            **where,
        )
        if column not in DATE_COLUMNS:
            # "2180-07-23" parses as midnight: a time column must say its time.
            reject_first(
                values.notna() & (values.astype(str).str.len() <= 10),
                lambda pos: f"{values.iloc[pos]!r} is a date without a time",
                **where,
            )
    if required:
        reject_first(out.isna(), lambda pos: "time is missing", **where)
    return out


# Columns of MIMIC-IV that hold a date only.
DATE_COLUMNS = frozenset({"dod", "chartdate", "storedate"})


def _text(values: pd.Series) -> pd.Series:
    return values.astype("object").where(values.notna(), "")


def _keys(values: pd.Series) -> pd.Series:
    """A natural id as text: ``123``, never ``123.0``."""
    if pd.api.types.is_float_dtype(values):
        values = values.astype("Int64")
    return _text(values.astype("object")).astype(str)


def _row_keys(rows: np.ndarray) -> pd.Series:
    return "row:" + pd.Series(rows, dtype="int64").astype(str)


def _py(value):
    """A Python value for a model field: None for NaN/NaT, datetimes unwrapped."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


# --- the folder --------------------------------------------------------------------


class MimicTable(SourceTable):
    """One MIMIC-IV table where users keep it: ``name.csv``, ``name.csv.gz``,
    ``name.parquet`` or a folder of parquet files (``name/*.parquet``, or a
    folder named ``name.parquet``), read in order as one table.

    Every pass over the data (``chunks``, ``arrow_blocks``) is counted in
    ``reads`` by display name, so that a test or a benchmark can say how many
    times each file was read."""

    reads: Counter = Counter()

    @property
    def is_parquet(self) -> bool:
        return self.path.is_dir() or self.path.name.endswith(".parquet")

    def parquet_files(self) -> list[Path]:
        if not self.path.is_dir():
            return [self.path]
        files = sorted(self.path.glob("*.parquet"))
        if not files:
            raise SourceDataError("folder holds no .parquet file", file=self.display)
        return files

    def schema(self, columns: list[str]) -> pa.Schema:
        """The Arrow types of ``columns``: the parquet file's, text for CSV."""
        if not self.is_parquet:
            return pa.schema([(c, pa.string()) for c in columns])
        try:
            schema = pq.read_schema(self.parquet_files()[0])
        except SourceDataError:
            raise
        except Exception as exc:
            raise self.unreadable(exc) from exc
        return pa.schema([schema.field(c) for c in columns])

    def columns(self) -> list[str]:
        if not self.is_parquet:
            return super().columns()
        return list(self.schema_names())

    def schema_names(self) -> list[str]:
        try:
            return list(pq.read_schema(self.parquet_files()[0]).names)
        except SourceDataError:
            raise
        except Exception as exc:
            raise self.unreadable(exc) from exc

    def chunks(self, columns, chunksize=500_000, dtype=None, all_fields=False):
        MimicTable.reads[self.display] += 1
        if not self.is_parquet:
            yield from super().chunks(columns, chunksize, dtype, all_fields)
            return
        yield from self.parquet_chunks(columns, chunksize)

    def parquet_chunks(
        self, columns: list[str], chunksize: int
    ) -> Iterator[tuple[int, pd.DataFrame]]:
        for first, block in self.parquet_blocks(columns, chunksize):
            yield first, block.to_pandas()

    def parquet_blocks(
        self, columns: list[str], rows: int
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(first row, Arrow batch) of the parquet file(s), rows numbered across
        the files of a folder in name order."""
        self.require(columns)
        row = 1
        try:
            for path in self.parquet_files():
                for block in pq.ParquetFile(path).iter_batches(
                    batch_size=rows, columns=columns
                ):
                    yield row, block
                    row += block.num_rows
        except SourceDataError:
            raise
        except Exception as exc:
            raise self.unreadable(exc, row) from exc

    def arrow_blocks(self, columns, rows=250_000):
        MimicTable.reads[self.display] += 1
        if self.is_parquet:
            yield from self.parquet_blocks(columns, rows)
            return
        yield from super().arrow_blocks(columns, rows)


def find_mimic_table(directory: Path, name: str) -> MimicTable | None:
    """``name`` in ``directory`` as parquet (a file or a folder of files), csv or
    csv.gz, the first found."""
    for candidate in (
        directory / f"{name}.parquet",
        directory / f"{name}.csv",
        directory / f"{name}.csv.gz",
        directory / name,
    ):
        if candidate.exists():
            if candidate.is_dir() and candidate.name == name:
                if not any(candidate.glob("*.parquet")):
                    continue
            return MimicTable(candidate, str(candidate))
    return None


class MimicFolder:
    """The files of one MIMIC-IV folder, located once; missing required files raise."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise SourceDataError("is not a folder", file=str(self.directory))

    def table(self, spec: TableSpec, *, required: bool = False) -> SourceTable | None:
        table = find_mimic_table(self.directory / spec.module, spec.name)
        if table is None and required:
            raise SourceDataError(
                "required file is missing (looked for .csv, .csv.gz, .parquet and "
                "a folder of .parquet files)",
                file=str(self.directory / spec.display),
            )
        return table

    def columns(self, table: SourceTable, spec: TableSpec) -> list[str]:
        """The columns to read: all required ones (a missing one raises) and the
        optional ones present."""
        table.require(spec.required)
        present = set(table.columns())
        return list(spec.required) + [c for c in spec.optional if c in present]

    def read(
        self, spec: TableSpec, *, required: bool = False
    ) -> tuple[pd.DataFrame | None, str]:
        """A small table read whole, as text, with its display name."""
        table = self.table(spec, required=required)
        if table is None:
            return None, str(self.directory / spec.display)
        frame = table.read_all(self.columns(table, spec))
        return frame.reset_index(drop=True), table.display


class _Columns:
    """Typed columns of rows read from one file, whose errors name the file row
    (``rows``, by default 1, 2, ... for a table read whole); an optional column
    the file lacks reads as missing values."""

    def __init__(self, raw: pd.DataFrame, file: str, rows: np.ndarray | None = None):
        self.raw, self.file = raw, file
        self.rows = np.arange(1, len(raw) + 1) if rows is None else rows

    def _get(self, name: str) -> pd.Series:
        if name in self.raw:
            return self.raw[name]
        return pd.Series(np.nan, index=self.raw.index, dtype=object)

    def _parsed(self, parse, values: pd.Series, name: str, **options) -> pd.Series:
        """``values`` parsed by ``parse`` (_numbers, _times), whose errors name
        this file, the column and the row."""
        return parse(values, file=self.file, column=name, rows=self.rows, **options)

    def id(self, name: str) -> pd.Series:
        values = self._parsed(
            _numbers, self.raw[name], name, required=True, integer=True
        )
        return values.astype("int64")

    def number(self, name: str, *, required: bool = False) -> pd.Series:
        return self._parsed(_numbers, self._get(name), name, required=required)

    def time(self, name: str, *, required: bool = False) -> pd.Series:
        return self._parsed(_times, self._get(name), name, required=required)

    def text(self, name: str) -> pd.Series:
        return _text(self._get(name))


def _check_interval(start: pd.Series, end: pd.Series, *, file: str, rows) -> None:
    reject_first(
        (end < start) & end.notna(),
        lambda pos: f"endtime {end.iloc[pos]} is before starttime {start.iloc[pos]}",
        file=file,
        column="endtime",
        rows=rows,
    )
