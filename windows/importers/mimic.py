"""MIMIC-IV importer: a MIMIC-IV v2.x folder (``hosp/``, ``icu/``) into patients,
admissions, ICU stays and their events in CLIF's vocabulary, in batches of stays,
streaming each event file in chunks so that memory does not grow with its size."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Subquery

from jobs.progress import Progress
from windows.importers.base import (
    EVENT_ARROW_SCHEMA,
    TEXT_LIMITS,
    EventWriter,
    ImportSummary,
    SourceDataError,
    reject_first,
    SourceTable,
    find_table,
)
from windows.importers.mimic_mapping import (
    ADT_LOCATION_CATEGORIES,
    ADMISSION_TYPE_CATEGORIES,
    DISCHARGE_CATEGORIES,
    DISCHARGE_EXPIRED,
    DISCHARGE_MISSING,
    FRACTION_ITEMS,
    MEDICATION_WORDS,
    RATE_CONVERSIONS,
    SEX_CATEGORIES,
    TEMPERATURE_SITE_ITEM,
    VALUE_CATEGORY_ITEMS,
    items_frame,
    value_categories,
)
from windows.actions import actions_derive
from windows.models import (
    Admission,
    Domain,
    Event,
    EventKind,
    Outcome,
    Patient,
    Source,
    Stay,
)
from windows.services import (
    DEATH_GRACE,
    admission_died,
    outcome_events_frame,
    patient_pseudo_id,
    stay_diagnosis_fields,
)

CHUNK_ROWS = 250_000

OBS = EventKind.OBSERVATION.value
ACT = EventKind.ACTION.value
CODED = EventKind.CODED.value


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
DEVICE_ITEM = 226732
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

# emar event_txt of a dose given or an infusion changed (actions); the rest
# (Not Given, Hold Dose, Assessed, ...) are kept as observations.
_EMAR_ACTION = (
    r"^(?:Delayed )?(?:Administered|Partial Administered|Started|Restarted|Stopped"
    r"|Rate Change|Bolus from IV Drip|Applied|Removed|Flushed|Confirmed)"
)


# --- parsing with row numbers ----------------------------------------------------


def _reject_rows(bad, message, *, file: str, column: str, rows: np.ndarray) -> None:
    """Raise SourceDataError at the first value where ``bad`` holds, naming the
    file row ``rows`` gives for it; ``message(pos)`` words the error."""
    mask = np.asarray(bad, dtype=bool)
    if mask.any():
        pos = int(mask.nonzero()[0][0])
        raise SourceDataError(message(pos), file=file, row=int(rows[pos]), column=column)


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
        _reject_rows(out.isna() & values.notna(),
                     lambda pos: f"{values.iloc[pos]!r} is not a number", **where)
    if required:
        _reject_rows(out.isna(), lambda pos: "value is missing", **where)
    if integer:
        _reject_rows(out.notna() & (out % 1 != 0),
                     lambda pos: f"{values.iloc[pos]!r} is not an integer id", **where)
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
        _reject_rows(out.isna() & values.notna(),
                     lambda pos: f"unparseable time {values.iloc[pos]!r}", **where)
        if column not in DATE_COLUMNS:
            # "2180-07-23" parses as midnight: a time column must say its time.
            _reject_rows(values.notna() & (values.astype(str).str.len() <= 10),
                         lambda pos: f"{values.iloc[pos]!r} is a date without a time",
                         **where)
    if required:
        _reject_rows(out.isna(), lambda pos: "time is missing", **where)
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


class MimicFolder:
    """The files of one MIMIC-IV folder, located once; missing required files raise."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise SourceDataError("is not a folder", file=str(self.directory))

    def table(self, spec: TableSpec, *, required: bool = False) -> SourceTable | None:
        table = find_table(self.directory / spec.module, [spec.name])
        if table is None and required:
            raise SourceDataError(
                "required file is missing (looked for .csv, .csv.gz, .parquet)",
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


# --- patients, admissions, stays ------------------------------------------------------


@dataclass
class PatientsAdmissionsStays:
    """patients, admissions and icustays, parsed and checked against each other."""

    patients: pd.DataFrame  # index subject_id
    admissions: pd.DataFrame  # index hadm_id
    stays: pd.DataFrame
    deaths: pd.Series  # subject_id -> death time (deathtime, else dod)
    first_admit: pd.Series = field(default_factory=pd.Series)  # of the new admissions


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

    def id(self, name: str) -> pd.Series:
        values = _numbers(
            self.raw[name],
            file=self.file,
            column=name,
            rows=self.rows,
            required=True,
            integer=True,
        )
        return values.astype("int64")

    def number(self, name: str, *, required: bool = False) -> pd.Series:
        return _numbers(
            self._get(name),
            file=self.file,
            column=name,
            rows=self.rows,
            required=required,
        )

    def time(self, name: str, *, required: bool = False) -> pd.Series:
        return _times(
            self._get(name),
            file=self.file,
            column=name,
            rows=self.rows,
            required=required,
        )

    def text(self, name: str) -> pd.Series:
        return _text(self._get(name))


def _read_cohort(folder: MimicFolder) -> PatientsAdmissionsStays:
    """Read and validate the three small tables completely before anything is
    written: ids, times, stay order, and every stay's admission and patient."""
    raw, file = folder.read(PATIENTS, required=True)
    col = _Columns(raw, file)
    patients = pd.DataFrame(
        {
            "subject_id": col.id("subject_id"),
            "gender": col.text("gender"),
            "anchor_age": col.number("anchor_age", required=True),
            "anchor_year": col.number("anchor_year", required=True),
            "dod": col.time("dod"),
        }
    )
    _check_unique(patients["subject_id"], file=file, column="subject_id")
    # Ages go into a whole-number column: a fraction, a negative age or one past
    # any human's (MIMIC-IV caps at 91) is a data error, named before any write.
    for column, low, high in (("anchor_age", 0, 130), ("anchor_year", 1800, 2500)):
        values = patients[column].to_numpy(dtype=float)
        reject_first(
            (values != np.floor(values)) | (values < low) | (values > high),
            lambda pos, column=column: f"{patients[column].iloc[pos]!r} is not a whole "
            f"number from {low} to {high}",
            file=file,
            column=column,
        )
    patients = patients.set_index("subject_id")

    raw, admissions_file = folder.read(ADMISSIONS, required=True)
    col = _Columns(raw, admissions_file)
    admissions = pd.DataFrame(
        {
            "subject_id": col.id("subject_id"),
            "hadm_id": col.id("hadm_id"),
            "admittime": col.time("admittime", required=True),
            "dischtime": col.time("dischtime", required=True),
            "deathtime": col.time("deathtime"),
            "admission_type": col.text("admission_type"),
            "discharge_location": col.text("discharge_location"),
            "expired": col.number("hospital_expire_flag").fillna(0).astype(bool),
            "_row": col.rows,
        }
    )
    _check_unique(admissions["hadm_id"], file=admissions_file, column="hadm_id")
    admissions = admissions.set_index("hadm_id")

    raw, file = folder.read(ICUSTAYS, required=True)
    col = _Columns(raw, file)
    stays = pd.DataFrame(
        {
            "subject_id": col.id("subject_id"),
            "hadm_id": col.id("hadm_id"),
            "stay_id": col.id("stay_id"),
            "intime": col.time("intime", required=True),
            "outtime": col.time("outtime", required=True),
            "first_careunit": col.text("first_careunit"),
            "last_careunit": col.text("last_careunit"),
        }
    )
    _check_unique(stays["stay_id"], file=file, column="stay_id")
    _check_stays(
        stays, admissions, patients, file=file, admissions_file=admissions_file
    )

    # A death time for each patient: the recorded in-hospital death time if
    # there is one, else the date of death at midnight (UTC).
    deathtimes = (
        admissions.dropna(subset=["deathtime"]).groupby("subject_id")["deathtime"].max()
    )
    deaths = patients["dod"].copy()
    deaths.loc[deathtimes.index.intersection(deaths.index)] = deathtimes
    return PatientsAdmissionsStays(
        patients=patients, admissions=admissions, stays=stays, deaths=deaths
    )


def _check_unique(ids: pd.Series, *, file: str, column: str) -> None:
    reject_first(ids.duplicated(), lambda pos: f"{column} {ids.iloc[pos]} appears twice",
                 file=file, column=column)


def _check_stays(
    stays, admissions, patients, *, file: str, admissions_file: str
) -> None:
    """ICU stays end after they start and point at a known admission and patient."""
    reject_first(
        stays["outtime"] <= stays["intime"],
        lambda pos: f"outtime {stays['outtime'].iloc[pos]} is not after intime "
        f"{stays['intime'].iloc[pos]}",
        file=file, column="outtime",
    )
    reject_first(
        ~stays["hadm_id"].isin(admissions.index),
        lambda pos: f"hadm_id {stays['hadm_id'].iloc[pos]} is not in admissions",
        file=file, column="hadm_id",
    )
    reject_first(
        ~stays["subject_id"].isin(patients.index),
        lambda pos: f"subject_id {stays['subject_id'].iloc[pos]} is not in patients",
        file=file, column="subject_id",
    )
    owner = admissions.loc[stays["hadm_id"], "subject_id"].to_numpy()
    reject_first(
        owner != stays["subject_id"].to_numpy(),
        lambda pos: f"subject_id {stays['subject_id'].iloc[pos]} differs from admission "
        f"{stays['hadm_id'].iloc[pos]}'s subject_id {owner[pos]}",
        file=file, column="subject_id",
    )
    with_stays = admissions.loc[stays["hadm_id"].unique()]
    unknown = ~with_stays["subject_id"].isin(patients.index).to_numpy()
    if unknown.any():
        pos = int(unknown.argmax())
        raise SourceDataError(
            f"subject_id {with_stays['subject_id'].iloc[pos]} is not in patients",
            file=admissions_file,
            row=int(with_stays["_row"].iloc[pos]),
            column="subject_id",
        )


def _read_diagnoses(
    folder: MimicFolder, hadm_ids: np.ndarray, summary: ImportSummary
) -> dict[int, list[dict]]:
    """ICD diagnoses of the admissions to import, in seq_num order, with titles."""
    table = folder.table(DIAGNOSES)
    if table is None:
        summary.notes.append(f"{DIAGNOSES.display} not found: stays have no diagnosis")
        return {}
    titles: dict[tuple[str, int], str] = {}
    raw, file = folder.read(D_ICD_DIAGNOSES)
    if raw is not None:
        col = _Columns(raw, file)
        versions = col.number("icd_version")
        codes = col.text("icd_code").str.strip()
        titles = {
            (code, int(v)): title
            for code, v, title in zip(codes, versions, col.text("long_title"))
            if pd.notna(v)
        }
    parts = []
    for first_row, chunk in table.chunks(
        folder.columns(table, DIAGNOSES), chunksize=CHUNK_ROWS
    ):
        rows = np.arange(first_row, first_row + len(chunk))
        hadm = _numbers(
            chunk["hadm_id"],
            file=table.display,
            column="hadm_id",
            rows=rows,
            required=True,
        )
        keep = hadm.isin(hadm_ids).to_numpy()
        if not keep.any():
            continue
        rows = rows[keep]
        part = pd.DataFrame(
            {
                "hadm_id": hadm[keep].astype("int64"),
                "seq_num": _numbers(
                    chunk["seq_num"][keep],
                    file=table.display,
                    column="seq_num",
                    rows=rows,
                ),
                "code": chunk["icd_code"][keep].astype(str).str.strip(),
                "version": _numbers(
                    chunk["icd_version"][keep],
                    file=table.display,
                    column="icd_version",
                    rows=rows,
                    integer=True,
                ),
            }
        )
        parts.append(part)
    out: dict[int, list[dict]] = {}
    if not parts:
        return out
    dx = pd.concat(parts, ignore_index=True).sort_values(
        ["hadm_id", "seq_num"], kind="stable"
    )
    for hadm, code, version, rank in zip(
        dx["hadm_id"], dx["code"], dx["version"], dx["seq_num"]
    ):
        version = None if pd.isna(version) else int(version)
        out.setdefault(int(hadm), []).append(
            {
                "code": code,
                "version": version,
                "rank": None if pd.isna(rank) else int(rank),
                "title": titles.get((code, version), ""),
            }
        )
    return out


# --- one batch ---------------------------------------------------------------------


@dataclass
class Batch:
    """The admissions imported in one transaction, for filtering event rows."""

    admission_ids: pd.Series  # hadm_id -> Admission pk
    windows: pd.DataFrame  # subject_id, admittime, dischtime, admission_id
    subject_ids: np.ndarray = field(default_factory=lambda: np.array([], dtype="int64"))

    def select(
        self,
        chunk: pd.DataFrame,
        first_row: int,
        file: str,
        *,
        assign_by: tuple[str, ...] = (),
    ) -> pd.DataFrame:
        """The rows of the batch's admissions, with ``_row`` (file row number) and
        ``admission_id``. With ``assign_by``, rows without hadm_id go to the
        subject's admission whose [admittime, dischtime] holds their time: the
        first of those time columns that has a value."""
        rows = np.arange(first_row, first_row + len(chunk))
        hadm = _numbers(
            chunk["hadm_id"], file=file, column="hadm_id", rows=rows, integer=True
        )
        keep = hadm.isin(self.admission_ids.index).to_numpy()
        out = chunk.loc[keep].reset_index(drop=True)
        out["_row"] = rows[keep]
        out["admission_id"] = (
            hadm[keep].astype("int64").map(self.admission_ids).to_numpy()
        )
        if not assign_by:
            return out
        orphan = hadm.isna().to_numpy()
        if not orphan.any():
            return out
        subject = _numbers(
            chunk["subject_id"][orphan],
            file=file,
            column="subject_id",
            rows=rows[orphan],
        )
        mine = subject.isin(self.subject_ids).to_numpy()
        if not mine.any():
            return out
        candidates = chunk.loc[orphan].loc[mine].reset_index(drop=True)
        candidates["_row"] = rows[orphan][mine]
        when = None
        for column in assign_by:
            if column in candidates:
                t = _times(
                    candidates[column],
                    file=file,
                    column=column,
                    rows=candidates["_row"].to_numpy(),
                )
                when = t if when is None else when.fillna(t)
        match = pd.DataFrame(
            {
                "_pos": np.arange(len(candidates)),
                "subject_id": subject[mine].astype("int64").to_numpy(),
                "t": when,
            }
        ).merge(self.windows, on="subject_id")
        match = match[
            (match["t"] >= match["admittime"]) & (match["t"] <= match["dischtime"])
        ]
        match = match.drop_duplicates("_pos")
        picked = candidates.iloc[match["_pos"].to_numpy()].reset_index(drop=True)
        picked["admission_id"] = match["admission_id"].to_numpy()
        return pd.concat([out, picked], ignore_index=True)


def _write_cohort(
    hadm_ids: list[int],
    cohort: PatientsAdmissionsStays,
    diagnoses: dict[int, list[dict]],
    summary: ImportSummary,
    writer: EventWriter,
) -> Batch:
    """Patients (new ones), admissions and stays of one batch, and their outcome
    events (ICU discharge, hospital discharge, death)."""
    adm = cohort.admissions.loc[hadm_ids]
    stays = cohort.stays[cohort.stays["hadm_id"].isin(hadm_ids)]
    subjects = [int(s) for s in adm["subject_id"].unique()]
    patients = {
        p.source_id: p
        for p in Patient.objects.filter(
            source=Source.MIMIC, source_id__in=[str(s) for s in subjects]
        )
    }
    # Age at the first admission imported for the patient: anchor_age shifted by
    # the years between anchor_year and that admission.
    first_admit = cohort.first_admit
    new = []
    for subject in subjects:
        if str(subject) in patients:
            continue
        p = cohort.patients.loc[subject]
        age = int(p["anchor_age"] + first_admit[subject].year - p["anchor_year"])
        new.append(
            Patient(
                source=Source.MIMIC,
                source_id=str(subject),
                pseudo_id=patient_pseudo_id(
                    source=Source.MIMIC, source_id=str(subject)
                ),
                sex=SEX_CATEGORIES.get(p["gender"], p["gender"]),
                age=max(age, 0),
                death_time=_py(cohort.deaths.get(subject)),
            )
        )
    Patient.objects.bulk_create(new)
    patients.update({p.source_id: p for p in new})
    summary.patients += len(new)

    admissions: dict[int, Admission] = {}
    for hadm, row in adm.iterrows():
        patient = patients[str(row["subject_id"])]
        p = cohort.patients.loc[row["subject_id"]]
        admissions[int(hadm)] = Admission(
            patient=patient,
            source=Source.MIMIC,
            source_id=str(hadm),
            admit_time=_py(row["admittime"]),
            discharge_time=_py(row["dischtime"]),
            discharge_disposition=_disposition(
                row["discharge_location"], expired=row["expired"]
            )[:64],
            admission_type=ADMISSION_TYPE_CATEGORIES.get(
                row["admission_type"], row["admission_type"]
            )[:64],
            age_at_admission=max(
                int(p["anchor_age"] + row["admittime"].year - p["anchor_year"]), 0
            ),
            diagnoses=diagnoses.get(int(hadm), []),
        )
    Admission.objects.bulk_create(admissions.values())
    summary.admissions += len(admissions)

    deaths: dict[int, object] = {}
    for hadm, admission in admissions.items():
        death = _admission_death(
            admission,
            deathtime=_py(adm.at[hadm, "deathtime"]),
            patient_death=admission.patient.death_time,
        )
        if death is not None:
            deaths[admission.pk] = death
    stay_objects = []
    for row in stays.itertuples(index=False):
        admission = admissions[row.hadm_id]
        stay_objects.append(
            Stay(
                admission=admission,
                source=Source.MIMIC,
                source_id=str(row.stay_id),
                source_ids={
                    "stay_id": int(row.stay_id),
                    "first_careunit": row.first_careunit,
                    "last_careunit": row.last_careunit,
                },
                care_unit=row.first_careunit[:128],
                intime=_py(row.intime),
                outtime=_py(row.outtime),
                hospital_outcome=Outcome.DIED
                if admission.pk in deaths
                else Outcome.SURVIVED,
                **stay_diagnosis_fields(admission=admission),
            )
        )
    Stay.objects.bulk_create(stay_objects)
    summary.stays += len(stay_objects)

    for table, frame in (
        (
            "icustays",
            outcome_events_frame(
                admissions=[], stays=stay_objects, deaths={}, source_table="icustays"
            ),
        ),
        (
            "admissions",
            outcome_events_frame(
                admissions=list(admissions.values()),
                stays=[],
                deaths=deaths,
                source_table="admissions",
            ),
        ),
    ):
        summary.add_events(table, writer.write(frame))

    ids = pd.Series({hadm: a.pk for hadm, a in admissions.items()}, dtype="int64")
    windows = adm[["subject_id", "admittime", "dischtime"]].copy()
    windows["admission_id"] = ids.loc[windows.index].to_numpy()
    return Batch(
        admission_ids=ids,
        windows=windows.reset_index(drop=True),
        subject_ids=np.asarray(subjects, dtype="int64"),
    )


def _disposition(location: str, *, expired: bool) -> str:
    """CLIF's discharge_category of an admission: Expired for a death in hospital,
    Missing when MIMIC-IV records no discharge location."""
    if expired:
        return DISCHARGE_EXPIRED
    if not location:
        return DISCHARGE_MISSING
    return DISCHARGE_CATEGORIES.get(location, location)


def _admission_death(admission: Admission, *, deathtime, patient_death):
    """When the patient died in this admission, or None: the admission's
    deathtime, else the patient's death time if it falls within the admission
    (services.admission_died), else the discharge time when only the disposition
    says so."""
    if deathtime is not None:
        return deathtime
    if not admission_died(admission=admission, death_time=patient_death):
        return None
    if (
        patient_death is not None
        and admission.admit_time
        <= patient_death
        <= admission.discharge_time + DEATH_GRACE
    ):
        return patient_death
    return admission.discharge_time


# --- events ------------------------------------------------------------------------


class ItemLabels:
    """Item labels from d_items / d_labitems, for event names."""

    def __init__(self, folder: MimicFolder, summary: ImportSummary) -> None:
        self.chart = pd.Series(dtype=object)
        self.lab = pd.Series(dtype=object)
        self.unmapped = Unmapped()
        self.text_items = np.array([], dtype="int64")
        raw, file = folder.read(D_ITEMS)
        if raw is None:
            summary.notes.append(
                f"{D_ITEMS.display} not found: ICU items are named by itemid"
            )
        else:
            col = _Columns(raw, file)
            self.chart = self._unique(col.text("label"), col.id("itemid"))
            # Scored text items (GCS, RASS) carry both a score and a text worth
            # keeping ("No Response-ETT").
            param = col.text("param_type")
            self.text_items = col.id("itemid")[
                (param != "") & (param != "Numeric")
            ].to_numpy()
        raw, file = folder.read(D_LABITEMS)
        if raw is None:
            summary.notes.append(
                f"{D_LABITEMS.display} not found: labs are named by itemid"
            )
        else:
            col = _Columns(raw, file)
            label, fluid = col.text("label"), col.text("fluid")
            other = (fluid != "") & (fluid != "Blood")
            label = label.where(~other, label + " (" + fluid + ")")
            self.lab = self._unique(label, col.id("itemid"))

    @staticmethod
    def _unique(labels: pd.Series, itemids: pd.Series) -> pd.Series:
        out = pd.Series(labels.to_numpy(), index=itemids.to_numpy())
        return out[~out.index.duplicated()]

    @staticmethod
    def name(itemid: pd.Series, labels: pd.Series) -> pd.Series:
        """Each row's item label; an item without one is named "itemid N"."""
        pos = labels.index.get_indexer(itemid.to_numpy())
        name = np.append(labels.to_numpy(dtype=object), "")[
            np.where(pos < 0, len(labels), pos)
        ]
        missing = name == ""
        if missing.any():
            name[missing] = ("itemid " + itemid[missing].astype(str)).to_numpy()
        return pd.Series(name, index=itemid.index)


def _mapped(
    table: str,
    itemid: pd.Series,
    labels: pd.Series,
    *,
    domain: str,
    kind: str,
    unmapped: Unmapped | None = None,
    rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """The mapping of each row's itemid (mimic_mapping) and its label as name;
    unmapped items get the given domain and kind and an empty category, and are
    counted in ``unmapped`` (``rows``: rows per itemid, default one)."""
    items = items_frame(table)
    pos = items.index.get_indexer(itemid.to_numpy())
    if unmapped is not None and (pos < 0).any():
        unknown = pos < 0
        counts = np.ones(len(pos), dtype="int64") if rows is None else rows
        unmapped.add(table, itemid.to_numpy()[unknown], counts[unknown], labels)
    pos = np.where(pos < 0, len(items), pos)
    defaults = {
        "domain": domain,
        "category": "",
        "kind": kind,
        "unit": "",
        "factor": 1.0,
        "offset": 0.0,
        "delivery": "",
        "no_unit": False,
    }
    out = pd.DataFrame(
        {c: np.append(items[c].to_numpy(), d)[pos] for c, d in defaults.items()},
        index=itemid.index,
    )
    out["name"] = ItemLabels.name(itemid, labels)
    return out


def _unit(m: pd.DataFrame, source: pd.Series) -> pd.Series:
    """Each row's unit: the mapping's, else the source's; none where CLIF has none."""
    unit = m["unit"].where(m["unit"] != "", source)
    return unit.where(~m["no_unit"].astype(bool), "")


class Unmapped:
    """Rows of itemids the mapping does not know, per file, for the summary."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, int]] = {}
        self.names: dict[int, str] = {}

    def add(self, table: str, itemids, counts, labels: pd.Series) -> None:
        per_table = self.rows.setdefault(table, {})
        for itemid, n in zip(itemids, counts):
            itemid = int(itemid)
            per_table[itemid] = per_table.get(itemid, 0) + int(n)
            if itemid not in self.names:
                self.names[itemid] = str(labels.get(itemid, "")) if len(labels) else ""

    def notes(self, shown: int = 20) -> list[str]:
        out = []
        for table, counts in sorted(self.rows.items()):
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            listed = ", ".join(
                f"{itemid} {self.names.get(itemid) or '(no label)'} ({n:,} rows)"
                for itemid, n in ranked[:shown]
            )
            more = f", and {len(ranked) - shown} more" if len(ranked) > shown else ""
            out.append(
                f"{table}: {sum(counts.values()):,} rows of {len(ranked)} unknown "
                f"itemids (not in the mapping) imported under their label without a "
                f"CLIF category: {listed}{more}"
            )
        return out


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
            yield from self.table.chunks(self.columns, chunksize=CHUNK_ROWS)
            return
        self.table.require(self.columns)
        blocks = self.table.arrow_blocks(self.columns, rows=CHUNK_ROWS)
        done = 0
        while True:
            try:
                first_row, block = next(blocks)
            except StopIteration:
                return
            except Exception:  # whatever Arrow says: pandas' reader words it
                for first_row, chunk in self.table.chunks(
                    self.columns, chunksize=CHUNK_ROWS, all_fields=True
                ):
                    if first_row + len(chunk) <= done + 1:
                        continue
                    if first_row <= done:
                        chunk = chunk.iloc[done + 1 - first_row :].reset_index(drop=True)
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
    if (required and missing.any()) or (np.isinf(out) | (out % 1 != 0) & ~missing).any():
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


def _pandas_chunk(block: pa.RecordBatch) -> pd.DataFrame:
    """A block of text columns as ``read_csv(dtype=str)`` gives it."""
    frame = {}
    for name, column in zip(block.schema.names, block.columns):
        values = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        frame[name] = values.where(values.notna(), np.nan)
    return pd.DataFrame(frame)


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

    def run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        self._run(batch, writer, progress, summary)
        writer.flush()
        self.lone_sites += _attach_temperature_sites(
            [int(a) for a in batch.admission_ids]
        )

    def _run(
        self,
        batch: Batch,
        writer: EventWriter,
        progress: Progress,
        summary: ImportSummary,
    ) -> None:
        if self.table.is_parquet or connection.vendor != "postgresql":
            super().run(batch, writer, progress, summary)
            return
        self.table.require(self.columns)
        blocks = self.table.arrow_blocks(self.columns)
        done = 0
        while True:
            try:
                first_row, block = next(blocks)
            except StopIteration:
                return
            except Exception:  # whatever Arrow says: pandas' reader words it
                for events in self.frames(batch, progress, from_row=done + 1):
                    summary.add_events(self.name, writer.write(_in_index_order(events)))
                return
            events = self._arrow_events(block, first_row, batch)
            if events is None:
                events = self.chunk_events(_pandas_chunk(block), first_row, batch)
                if events is not None:
                    summary.add_events(self.name, writer.write(_in_index_order(events)))
            else:
                summary.add_events(self.name, writer.write_arrow(events))
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
        if not len(sel):
            return EVENT_ARROW_SCHEMA.empty_table()
        if len(sel) < block.num_rows:
            block = block.take(pa.array(sel))
        itemid = _arrow_ids(block.column("itemid"), required=True)
        valuenum = _arrow_floats(block.column("valuenum"))
        us = _arrow_us(block.column("charttime"))
        if itemid is None or valuenum is None or us is None:
            return None
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
        rows = first_row + sel
        value, uom = block.column("value"), block.column("valueuom")
        gas = lab & _gas(m["category"]).to_numpy()[codes]
        order = np.lexsort((us, admission))
        if (order[1:] < order[:-1]).any():
            collected, gas = collected[order], gas[order]
            itemid, valuenum, us = itemid[order], valuenum[order], us[order]
            admission, rows, codes = admission[order], rows[order], codes[order]
            value, uom = value.take(pa.array(order)), uom.take(pa.array(order))

        number = valuenum * m["factor"].to_numpy()[codes] + m["offset"].to_numpy()[codes]
        fraction = np.isin(itemid, list(FRACTION_ITEMS)) & (number > 1)
        number = np.where(fraction, number / 100, number)

        categories = list(m["category"])
        names = list(m["name"])
        category_codes = codes.copy()
        name_codes = codes.copy()
        by_value = np.isin(itemid, list(VALUE_CATEGORY_ITEMS))
        for item in np.unique(itemid[by_value]):
            mask = itemid == item
            texts = pc.dictionary_encode(
                pc.fill_null(value.filter(pa.array(mask)), "")
            )
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
                ["chartevents"], np.zeros(n, dtype="int64"), TEXT_LIMITS.get("source_table")
            ),
            "source_key": _within(
                pc.binary_join_element_wise(
                    "row:", pc.cast(pa.array(rows, pa.int64()), pa.string()), ""
                ),
                TEXT_LIMITS.get("source_key"),
            ),
            "order_id": _dictionary_text([""], np.zeros(n, dtype="int64")),
        }
        return pa.table([columns[f.name] for f in EVENT_ARROW_SCHEMA], schema=EVENT_ARROW_SCHEMA)


def _attach_temperature_sites(admission_ids: list[int]) -> int:
    """The Temperature Site item's text onto the temperature charted at the same
    time (CLIF's meas_site_name, kept in value_text of vitals), then the site
    rows removed; returns how many sites had no temperature beside them."""
    sites = Event.objects.filter(
        admission_id__in=admission_ids,
        source_table="chartevents",
        domain=Domain.VITALS.value,
        category="temp_site",
    )
    site_of = sites.filter(
        admission_id=OuterRef("admission_id"), time=OuterRef("time")
    ).exclude(value_text="").values("value_text")[:1]
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
    sites.delete()
    return lone


class EmarStep(EventStep):
    """emar, with the dose given from emar_detail when that file is there."""

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
            events = self._with_doses(events)
        summary.add_events(self.name, writer.write(_in_index_order(events)))

    def _with_doses(self, events: pd.DataFrame) -> pd.DataFrame:
        """The dose given (and route) of each administration, from the first
        emar_detail row of its emar_id that has one."""
        wanted = set(events["source_key"])
        doses = []
        for _, chunk in self.detail.chunks(self.detail_columns, chunksize=CHUNK_ROWS):
            chunk = chunk[chunk["emar_id"].isin(wanted) & chunk["dose_given"].notna()]
            if len(chunk):
                doses.append(chunk)
        if not doses:
            return events
        dose = pd.concat(doses).drop_duplicates("emar_id").set_index("emar_id")
        dose = dose.reindex(events["source_key"].to_numpy())
        has = dose["dose_given"].notna().to_numpy()
        given = pd.to_numeric(dose["dose_given"][has], errors="coerce")
        events.loc[has, "value_num"] = given.to_numpy()
        events.loc[has, "unit"] = _text(dose["dose_given_unit"])[has].to_numpy()
        if "route" in dose:
            route = _text(dose["route"]).to_numpy()
            text = events["value_text"].to_numpy()
            events["value_text"] = np.where(route != "", text + ", " + route, text)
        return events


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
        trach = (itemid == DEVICE_ITEM) & value.str.strip().eq("Tracheostomy tube")
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


def _labevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Time: storetime when present, else charttime: a lab enters the
        trajectory when its result is available, as CLIF's lab_result_dttm. A
        blood-gas result keeps its collection time in end_time until
        ``_gas_specimens`` has read its specimen."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid, valuenum = col.id("itemid"), col.number("valuenum")
        m = _mapped(
            "labevents",
            itemid,
            labels.lab,
            domain=Domain.LABS.value,
            kind=OBS,
            unmapped=labels.unmapped,
        )
        collected = col.time("charttime", required=True)
        return _events(
            f,
            "labevents",
            time=col.time("storetime").fillna(collected),
            end_time=collected.where(_gas(m["category"]), pd.NaT),
            kind=m["kind"],
            domain=m["domain"],
            category=m["category"],
            name=m["name"],
            value_num=valuenum * m["factor"] + m["offset"],
            unit=_unit(m, col.text("valueuom")),
            value_text=col.text("value").where(valuenum.isna(), ""),
            source_key=_keys(f["labevent_id"]),
        )

    return transform


def _inputevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """One event per row, from starttime to endtime; ``InputEventsStep`` turns
        the continuous medications into CLIF's MAR records. value_num is the rate
        when there is one, converted for vasoactives as in CLINICAL_CONCEPTS.md
        section 5 (mcg/kg/min, vasopressin units/hour), else the amount.
        Medications CLIF records as both continuous and intermittent are
        continuous when they have a rate. A medication's order is its
        linkorderid (the order across rate changes), else its orderid."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid, rate, rateuom = (
            col.id("itemid"),
            col.number("rate"),
            col.text("rateuom"),
        )
        start, end = col.time("starttime", required=True), col.time("endtime")
        _check_interval(start, end, file=file, rows=col.rows)
        weight = col.number("patientweight")
        m = _mapped(
            "inputevents",
            itemid,
            labels.chart,
            domain=Domain.INPUT.value,
            kind=ACT,
            unmapped=labels.unmapped,
        )
        for (category, unit), conv in RATE_CONVERSIONS.items():
            mask = (m["category"] == category) & (rateuom == unit) & rate.notna()
            if not mask.any():
                continue
            factor = pd.Series(conv.factor, index=f.index)
            if conv.weight_one_unchanged:
                factor = factor.where(weight != 1, 1.0)
            converted = rate * factor
            if conv.per_weight:
                converted = converted / weight
            rate = rate.where(~mask, converted)
            rateuom = rateuom.where(~mask, conv.unit)
        has_rate = rate.notna()
        continuous = np.where(
            has_rate, Domain.MED_CONTINUOUS.value, Domain.MED_INTERMITTENT.value
        )
        order = _keys(f["linkorderid"]) if "linkorderid" in f else _keys(f["orderid"])
        order = order.where(order != "", _keys(f["orderid"]))
        domain = m["domain"].where(m["delivery"] != "both", continuous)
        medication = domain.isin([Domain.MED_CONTINUOUS.value,
                                  Domain.MED_INTERMITTENT.value])
        events = _events(
            f,
            "inputevents",
            time=start,
            end_time=end,
            kind=m["kind"],
            domain=domain,
            category=m["category"],
            name=m["name"],
            value_num=rate.where(has_rate, col.number("amount")),
            unit=rateuom.where(has_rate, col.text("amountuom")),
            value_text=col.text("statusdescription"),
            source_key=_keys(f["orderid"]),
            order_id=order.where(medication, ""),
        )
        events["_rate"] = has_rate.to_numpy()
        return events

    return transform


def _check_interval(start: pd.Series, end: pd.Series, *, file: str, rows) -> None:
    _reject_rows((end < start) & end.notna(),
                 lambda pos: f"endtime {end.iloc[pos]} is before starttime {start.iloc[pos]}",
                 file=file, column="endtime", rows=rows)


# statusdescription of an intermittent row that records no administration.
_NOT_GIVEN = {"Rewritten"}


def _medication_records(events: pd.DataFrame) -> pd.DataFrame:
    """inputevents rows as CLIF's MAR records (the consortium's conversion).

    A continuous medication with a rate becomes point records per order and
    item: ``start`` at the first starttime (and after a gap), ``dose_change`` where
    the next row of the order starts at the end of the previous one with its
    rate (``going`` after a Paused row: paused and restarted at once), and
    ``stop`` (value 0) at the end of the order's last row or before a gap. A row
    without a rate is one record at its starttime: an intermittent dose
    (``given``, or ``not_given`` for a rewritten order) or, for an infusion
    item, a ``bolus``. Fluids and other inputs keep their interval."""
    is_med = events["domain"].isin(
        [Domain.MED_CONTINUOUS.value, Domain.MED_INTERMITTENT.value]
    ).to_numpy()
    rate = events.pop("_rate").to_numpy(dtype=bool)
    others = events[~is_med]
    points = events[is_med & ~rate].copy()
    status = points["value_text"].astype(str)
    points["value_text"] = np.where(
        points["domain"] == Domain.MED_CONTINUOUS.value,
        "bolus",
        np.where(status.isin(_NOT_GIVEN), "not_given", "given"),
    )
    points["kind"] = np.where(points["value_text"] == "not_given", OBS, ACT)
    points["end_time"] = pd.NaT

    runs = events[is_med & rate]
    if runs.empty:
        return pd.concat([others, points], ignore_index=True)
    runs = runs.assign(_item=runs["name"].astype(str)).sort_values(
        ["admission_id", "order_id", "_item", "time", "end_time"], kind="stable"
    )
    key = runs[["admission_id", "order_id", "_item"]]
    first = (key != key.shift(1)).any(axis=1).to_numpy()
    prev_end = runs["end_time"].shift(1)
    prev_status = runs["value_text"].shift(1).astype(object)
    gap = (runs["time"] > prev_end).fillna(True).to_numpy()
    starts = first | gap
    action = np.where(
        starts, "start", np.where(prev_status.eq("Paused"), "going", "dose_change")
    )
    ends = np.append(starts[1:], True)
    begin = runs.drop(columns="_item").assign(
        value_text=action, end_time=pd.NaT,
        kind=np.where(action == "going", OBS, ACT),
    )
    stop = runs.loc[ends].drop(columns="_item")
    stop = stop.assign(
        time=stop["end_time"].fillna(stop["time"]),
        end_time=pd.NaT,
        value_num=0.0,
        value_text="stop",
        kind=ACT,
        source_key=stop["source_key"].astype(str) + ":stop",
    )
    return pd.concat([others, points, begin, stop], ignore_index=True)


def _gas(category: pd.Series) -> pd.Series:
    """Blood-gas results (CLIF *_arterial and *_venous categories) and the blood
    gas's Specimen Type (52033): their specimen is read per collection."""
    text = category.astype(str)
    return (
        text.str.endswith("_arterial")
        | text.str.endswith("_venous")
        | (text == "specimen_type")
    )


# Specimen Type (52033) values -> specimen.
_SPECIMEN_TYPES = {"ART.": "arterial", "VEN.": "venous", "MIX.": "venous",
                   "CENTRAL VENOUS": "venous"}


def _gas_specimens(admission_ids: list[int]) -> None:
    """Each numeric blood-gas result's specimen in its value_text, as the CLIF
    importer keeps it (windows.importers.clif._labs; a venous pO2 gives no P/F,
    CLINICAL_CONCEPTS.md section 7): the Specimen Type charted with the same
    collection, else "venous" where its category or name says venous and
    "arterial" where its name says arterial, else what the collection's other
    results say when they say one only; '' is unknown. A collection is the
    admission's results collected at the same time, from labevents and
    chartevents alike; the transforms left its time in end_time, cleared here."""
    rows = pd.DataFrame.from_records(
        list(
            Event.objects.filter(
                admission_id__in=admission_ids,
                source_table__in=["labevents", "chartevents"],
                domain=Domain.LABS.value,
                end_time__isnull=False,
            ).values_list("id", "admission_id", "category", "name", "value_num",
                          "value_text", "end_time")
        ),
        columns=[
            "id", "admission", "category", "name", "value_num", "text", "collected"
        ],
    )
    if rows.empty:
        return
    key = [rows["admission"], rows["collected"]]
    typed = rows["text"].where(rows["category"] == "specimen_type", "").str.strip()
    typed = typed.str.upper().map(_SPECIMEN_TYPES).fillna("")
    venous = rows["category"].str.endswith("_venous") | rows["name"].str.contains(
        "venous", case=False
    )
    arterial = rows["name"].str.contains(r"\barterial\b", case=False) & ~venous
    own = pd.Series(np.select([venous, arterial], ["venous", "arterial"], ""),
                    index=rows.index).where(rows["category"] != "specimen_type", "")

    def one_of(values: pd.Series) -> pd.Series:
        has_v = (values == "venous").groupby(key).transform("any")
        has_a = (values == "arterial").groupby(key).transform("any")
        return pd.Series(np.select([has_v & ~has_a, has_a & ~has_v],
                                   ["venous", "arterial"], ""), index=rows.index)

    source, shared = one_of(typed), one_of(own)
    specimen = source.where(source != "", own.where(own != "", shared))
    numeric = rows["value_num"].notna()
    for text in specimen[numeric].unique():
        ids = rows.loc[numeric & (specimen == text), "id"].tolist()
        for start in range(0, len(ids), 5000):
            Event.objects.filter(id__in=ids[start : start + 5000]).update(
                value_text=text, end_time=None
            )
    ids = rows.loc[~numeric, "id"].tolist()
    for start in range(0, len(ids), 5000):
        Event.objects.filter(id__in=ids[start : start + 5000]).update(end_time=None)


class LabEventsStep(EventStep):
    """labevents; then, with chartevents' blood gases written too, the specimen
    of each blood-gas result (``_gas_specimens``)."""

    def run(self, batch, writer, progress, summary) -> None:
        super().run(batch, writer, progress, summary)
        writer.flush()
        _gas_specimens([int(a) for a in batch.admission_ids])


class TransfersStep(EventStep):
    """transfers, counting the discharge rows it leaves out (``_transfers``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.discharges = 0

    def chunk_events(self, chunk, first_row, batch):
        events = super().chunk_events(chunk, first_row, batch)
        selected = batch.select(chunk, first_row, self.table.display)
        self.discharges += int((selected["eventtype"] == "discharge").sum())
        return events


class InputEventsStep(EventStep):
    """inputevents of a batch read whole, so that each order's rows are seen
    together when they become MAR records (_medication_records)."""

    def run(self, batch, writer, progress, summary) -> None:
        parts = list(self.frames(batch, progress))
        if not parts:
            return
        events = _medication_records(pd.concat(parts, ignore_index=True))
        summary.add_events(self.name, writer.write(_in_index_order(events)))


def _outputevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Urine output items (CLINICAL_CONCEPTS.md section 3) in CLIF output
        categories, mL."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid = col.id("itemid")
        m = _mapped(
            "outputevents",
            itemid,
            labels.chart,
            domain=Domain.OUTPUT.value,
            kind=OBS,
            unmapped=labels.unmapped,
        )
        return _events(
            f,
            "outputevents",
            time=col.time("charttime", required=True),
            kind=m["kind"],
            domain=m["domain"],
            category=m["category"],
            name=m["name"],
            value_num=col.number("value") * m["factor"] + m["offset"],
            unit=_unit(m, col.text("valueuom")),
            source_key=_row_keys(col.rows),
        )

    return transform


def _procedureevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Procedures from starttime to endtime, with their location (line site)."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid = col.id("itemid")
        m = _mapped(
            "procedureevents",
            itemid,
            labels.chart,
            domain=Domain.PROCEDURES.value,
            kind=ACT,
            unmapped=labels.unmapped,
        )
        start, end = col.time("starttime", required=True), col.time("endtime")
        _check_interval(start, end, file=file, rows=col.rows)
        return _events(
            f,
            "procedureevents",
            time=start,
            end_time=end,
            kind=m["kind"],
            domain=m["domain"],
            category=m["category"],
            name=m["name"],
            value_num=col.number("value"),
            unit=col.text("valueuom"),
            value_text=col.text("location"),
            source_key=_keys(f["orderid"]),
        )

    return transform


def _datetimeevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """A charted date (line insertion, last dialysis) as text at charttime."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid = col.id("itemid")
        m = _mapped(
            "datetimeevents",
            itemid,
            labels.chart,
            domain=Domain.OTHER.value,
            kind=OBS,
            unmapped=labels.unmapped,
        )
        return _events(
            f,
            "datetimeevents",
            time=col.time("charttime", required=True),
            kind=m["kind"],
            domain=m["domain"],
            category=m["category"],
            name=m["name"],
            value_text=col.text("value"),
            source_key=_row_keys(col.rows),
        )

    return transform


def _medication_category(names: pd.Series) -> pd.Series:
    """CLIF medication category from the first word of a drug name, if it is one."""
    word = names.str.lower().str.extract(r"^\s*([a-z]+)", expand=False)
    return word.map(MEDICATION_WORDS).fillna("")


def _emar(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """A dose given or an infusion started, changed or stopped is an action; a
    dose not given or held stays as an observation. emar records doses, not
    infusion rates, so its events are intermittent administrations; ICU infusions
    with their rates come from inputevents."""
    col = _Columns(f, file, f["_row"].to_numpy())
    event, medication = col.text("event_txt"), col.text("medication")
    return _events(
        f,
        "emar",
        time=col.time("charttime", required=True),
        kind=np.where(event.str.match(_EMAR_ACTION), ACT, OBS),
        domain=Domain.MED_INTERMITTENT.value,
        category=_medication_category(medication),
        name=medication.where(medication != "", "medication"),
        value_num=np.nan,
        unit="",
        value_text=event,
        source_key=col.text("emar_id").astype(str),
    )


def _prescriptions(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """An order at its starttime (some prescriptions have none: not imported)."""
    col = _Columns(f, file, f["_row"].to_numpy())
    drug = col.text("drug")
    return _events(
        f,
        "prescriptions",
        time=col.time("starttime"),
        end_time=col.time("stoptime"),
        kind=ACT,
        domain=Domain.MED_INTERMITTENT.value,
        category=_medication_category(drug),
        name=drug.where(drug != "", "prescription"),
        # dose_val_rx is free text ("1-2"): a number when it is one.
        value_num=pd.to_numeric(col.text("dose_val_rx"), errors="coerce"),
        unit=col.text("dose_unit_rx"),
        value_text=col.text("route"),
        source_key=_row_keys(col.rows),
    )


def _microbiologyevents(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """A culture as two records, so that nothing is known before it was known.

    The draw: a microbiology record at the specimen's time (charttime, else
    chartdate), which CLINICAL_CONCEPTS.md section 10b pairs antibiotics with
    (CLIF's collect_dttm), one per specimen (micro_specimen_id, else per row),
    with the result time as its end and no result in it. The result: one per
    row at the time it was known (storetime, else storedate; not before the
    specimen; CLIF's result_dttm), the organism (or "no growth") and, for a
    susceptibility row, the antibiotic and its interpretation. Results are
    ``labs`` records of category ``culture_result`` so that the concepts,
    which count every microbiology record as a culture drawn, do not take a
    result time for a draw.
    """
    col = _Columns(f, file, f["_row"].to_numpy())
    taken = col.time("charttime").fillna(col.time("chartdate", required=True))
    stored = col.time("storetime").fillna(col.time("storedate"))
    result = stored.where(stored.isna() | (stored >= taken), taken)
    organism = col.text("org_name")
    organism = organism.where(organism != "", "no growth")
    antibiotic = col.text("ab_name")
    susceptibility = (": " + antibiotic + " " + col.text("interpretation")).str.rstrip()
    specimen, test = col.text("spec_type_desc"), col.text("test_name")
    name = test.where(test != "", specimen)
    keys = _keys(f["microevent_id"])
    specimen_id = (
        _keys(f["micro_specimen_id"]) if "micro_specimen_id" in f else keys
    )
    draw = (~pd.DataFrame({"a": f["admission_id"].to_numpy(),
                           "s": specimen_id.where(specimen_id != "", keys).to_numpy()})
            .duplicated()).to_numpy()
    drawn = _events(
        f.loc[draw],
        "microbiologyevents",
        time=taken[draw],
        end_time=result[draw].fillna(taken[draw]),
        kind=OBS,
        domain=Domain.MICROBIOLOGY.value,
        category=specimen[draw].str.lower(),
        name=name[draw],
        value_text="culture drawn",
        source_key="specimen:" + specimen_id.where(specimen_id != "", keys)[draw],
    )
    results = _events(
        f,
        "microbiologyevents",
        time=result.fillna(taken),
        kind=OBS,
        domain=Domain.LABS.value,
        category="culture_result",
        name=name,
        value_text=organism + susceptibility.where(antibiotic != "", ""),
        source_key=keys,
    )
    return pd.concat([drawn, results], ignore_index=True)


def _transfers(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """Care-unit transfers in CLIF location categories, as the CLIF importer
    writes ADT segments ("transfer in" at intime), with their end. The discharge
    rows are not imported: the admission's hospital-discharge outcome event
    (from admissions) already says when and how the stay in hospital ended."""
    col = _Columns(f, file, f["_row"].to_numpy())
    careunit, eventtype = col.text("careunit"), col.text("eventtype")
    keep = (eventtype != "discharge").to_numpy()
    time, end = col.time("intime", required=True), col.time("outtime")
    keys = _keys(f["transfer_id"]) if "transfer_id" in f else _row_keys(col.rows)
    f = f.loc[keep]
    return _events(
        f,
        "transfers",
        time=time[keep],
        end_time=end[keep],
        kind=OBS,
        domain=Domain.ADT.value,
        category=careunit[keep].map(ADT_LOCATION_CATEGORIES).fillna(""),
        name=careunit[keep].where(careunit[keep] != "", eventtype[keep]),
        value_text="transfer in",
        source_key=keys[keep],
    )


def _coded_events(
    f: pd.DataFrame, file: str, *, table: str, code_column: str, system
) -> pd.DataFrame:
    """Codes billed with a date only: hindsight records (kind coded), named as
    CLIF's patient_procedures (code system and code). ``system`` gives each
    row's code system from its columns and code."""
    col = _Columns(f, file, f["_row"].to_numpy())
    code = col.text(code_column).astype(str).str.strip()
    fmt = pd.Series(system(col, code), index=f.index)
    return _events(
        f,
        table,
        time=col.time("chartdate", required=True),
        kind=CODED,
        domain=Domain.PROCEDURES.value,
        category=fmt,
        name=fmt + " " + code,
        value_text=code,
        source_key=_row_keys(col.rows),
    )


def _procedures_icd(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """ICD procedure codes (ICD-9 or ICD-10-PCS by icd_version)."""
    return _coded_events(
        f, file, table="procedures_icd", code_column="icd_code",
        system=lambda col, code: np.where(
            col.number("icd_version") == 10, "ICD10PCS", "ICD9"
        ),
    )


def _hcpcsevents(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """CPT and HCPCS codes: a five-character code of four digits and a digit or
    letter is CPT, else HCPCS."""
    return _coded_events(
        f, file, table="hcpcsevents", code_column="hcpcs_cd",
        system=lambda col, code: np.where(
            code.str.fullmatch(r"\d{4}[0-9A-Z]"), "CPT", "HCPCS"
        ),
    )


def _event_steps(
    folder: MimicFolder, labels: ItemLabels, summary: ImportSummary
) -> list[EventStep]:
    """The event files present, their columns checked before anything is written.
    Labs and cultures without hadm_id are placed by their sample time."""
    steps: list[EventStep] = []

    def add(
        spec: TableSpec,
        transform: Callable,
        assign_by: tuple[str, ...] = (),
        step: type[EventStep] = EventStep,
        **options,
    ) -> None:
        table = folder.table(spec)
        if table is None:
            summary.notes.append(f"{spec.display} not found: no {spec.name} events")
            return
        steps.append(
            step(
                spec,
                table,
                folder.columns(table, spec),
                transform,
                assign_by=assign_by,
                **options,
            )
        )

    add(CHARTEVENTS, _chartevents(labels), step=ChartEventsStep, labels=labels)
    add(LABEVENTS, _labevents(labels), ("charttime",), step=LabEventsStep)
    add(INPUTEVENTS, _inputevents(labels), step=InputEventsStep)
    add(OUTPUTEVENTS, _outputevents(labels))
    add(PROCEDUREEVENTS, _procedureevents(labels))
    add(DATETIMEEVENTS, _datetimeevents(labels))
    emar = folder.table(EMAR)
    if emar is not None:
        detail = folder.table(EMAR_DETAIL)
        columns = folder.columns(detail, EMAR_DETAIL) if detail is not None else []
        if detail is None:
            summary.notes.append(
                f"{EMAR_DETAIL.display} not found: medication events have no dose"
            )
        steps.append(
            EmarStep(
                EMAR,
                emar,
                folder.columns(emar, EMAR),
                _emar,
                detail=detail,
                detail_columns=columns,
            )
        )
    elif folder.table(PRESCRIPTIONS) is not None:
        summary.notes.append(
            f"{EMAR.display} not found: medications from {PRESCRIPTIONS.display}"
        )
        add(PRESCRIPTIONS, _prescriptions)
    else:
        summary.notes.append(
            f"{EMAR.display} and {PRESCRIPTIONS.display} not found: no medication events"
        )
    add(MICROBIOLOGYEVENTS, _microbiologyevents, ("charttime", "chartdate"))
    add(TRANSFERS, _transfers, step=TransfersStep)
    add(PROCEDURES_ICD, _procedures_icd)
    add(HCPCSEVENTS, _hcpcsevents)
    return steps


# --- the import --------------------------------------------------------------------


def _batches(stays: pd.DataFrame, hadm_ids: list[int], size: int) -> list[list[int]]:
    """Admissions in order, grouped so that each batch holds about ``size`` stays
    (an admission's stays are never split)."""
    counts = stays["hadm_id"].value_counts()
    batches, current, n = [], [], 0
    for hadm in hadm_ids:
        current.append(hadm)
        n += int(counts.get(hadm, 0))
        if n >= size:
            batches.append(current)
            current, n = [], 0
    if current:
        batches.append(current)
    return batches


def mimic_import(
    *, directory: Path, progress: Progress | None = None, batch_stays: int | None = None
) -> ImportSummary:
    """Import a MIMIC-IV v2.x folder; admissions already imported are skipped.

    The small tables (patients, admissions, icustays) are validated completely and
    the columns of every event file checked before anything is written. The new
    admissions with an ICU stay are then imported in batches of about
    ``batch_stays`` stays (default ``REALICU_IMPORT_BATCH_STAYS``), each batch in
    one transaction: patients, admissions, stays and outcome events, then every
    event file streamed once. An error rolls back the batch it occurs in;
    batches already committed stay, and a re-run skips them.
    """
    if batch_stays is None:
        batch_stays = settings.REALICU_IMPORT_BATCH_STAYS
    if batch_stays < 1:
        raise ValidationError("batch_stays must be at least 1.")
    progress = progress or Progress()
    summary = ImportSummary(source="MIMIC-IV")
    folder = MimicFolder(directory)

    cohort = _read_cohort(folder)
    labels = ItemLabels(folder, summary)
    steps = _event_steps(folder, labels, summary)

    in_icu = pd.Index(cohort.stays["hadm_id"].unique())
    done = set(
        Admission.objects.filter(source=Source.MIMIC).values_list(
            "source_id", flat=True
        )
    )
    new = cohort.admissions.loc[[h for h in in_icu if str(h) not in done]]
    summary.skipped_admissions = len(in_icu) - len(new)
    without_icu = len(cohort.admissions) - len(in_icu)
    if without_icu:
        summary.notes.append(
            f"{ADMISSIONS.display}: {without_icu} admissions without an ICU stay not "
            f"imported, nor their events"
        )
    new = new.sort_values(["admittime"], kind="stable")
    cohort.first_admit = new.groupby("subject_id")["admittime"].min()
    batches = _batches(cohort.stays, [int(h) for h in new.index], batch_stays)
    diagnoses = (
        _read_diagnoses(folder, new.index.to_numpy(), summary) if len(new) else {}
    )

    progress.start(
        len(batches) * (len(steps) + 1), "MIMIC-IV: patients, admissions, stays"
    )
    committed = 0
    for number, hadm_ids in enumerate(batches, start=1):
        try:
            with transaction.atomic(), EventWriter() as writer:
                batch = _write_cohort(hadm_ids, cohort, diagnoses, summary, writer)
                progress.advance(
                    1, f"batch {number}/{len(batches)}: {len(hadm_ids)} admissions"
                )
                for step in steps:
                    step.run(batch, writer, progress, summary)
                    progress.advance(
                        1, f"batch {number}/{len(batches)}: {step.name} done"
                    )
                writer.flush()
                summary.add_actions(
                    actions_derive(admission_ids=[int(a) for a in batch.admission_ids])
                )
        except ValidationError as exc:
            # Batches commit one by one (a full MIMIC-IV is too large for one
            # transaction): say exactly what stays, and that a re-run completes it.
            raise SourceDataError(
                "; ".join(exc.messages)
                + f" (batch {number} of {len(batches)} rolled back; "
                + (
                    f"{number - 1} earlier batch(es), {committed} admissions, were "
                    "imported and stay: running the import again skips them and "
                    "completes it)"
                    if committed
                    else "nothing was imported)"
                )
            ) from exc
        committed += len(hadm_ids)
    for step in steps:
        if step.untimed:
            summary.notes.append(
                f"{step.spec.display}: {step.untimed} rows without a time not imported"
            )
        if getattr(step, "discharges", 0):
            summary.notes.append(
                f"{step.spec.display}: {step.discharges} discharge rows not imported "
                f"(the admissions' hospital-discharge outcome events say it)"
            )
        if getattr(step, "lone_sites", 0):
            summary.notes.append(
                f"{step.spec.display}: {step.lone_sites} Temperature Site rows "
                f"({TEMPERATURE_SITE_ITEM}) without a temperature at their time, "
                f"not imported"
            )
    summary.notes.extend(labels.unmapped.notes())
    return summary
