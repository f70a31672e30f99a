"""patients, admissions and icustays of MIMIC-IV: read and checked against each
other before anything is written, then written one batch of admissions at a time
with their diagnoses and outcome events."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from windows.importers.base import (
    ImportSummary,
    reject_first,
)
from windows.importers.mimic.reading import (
    ADMISSIONS,
    CHUNK_ROWS,
    D_ICD_DIAGNOSES,
    DIAGNOSES,
    ICUSTAYS,
    PATIENTS,
    MimicFolder,
    _Columns,
    _numbers,
    _py,
    _times,
)
from windows.importers.mimic_mapping import (
    ADMISSION_TYPE_CATEGORIES,
    DISCHARGE_CATEGORIES,
    DISCHARGE_EXPIRED,
    DISCHARGE_MISSING,
    SEX_CATEGORIES,
)
from windows.importers.writing import EventWriter
from windows.models import Admission, Outcome, Patient, Source, Stay
from windows.services import (
    DEATH_GRACE,
    admission_died,
    outcome_events_frame,
    patient_pseudo_id,
    stay_diagnosis_fields,
)

# Why a source row is left out by Batch.select (ImportSummary.dropped).
NOT_IMPORTED = (
    "rows of admissions not imported (without an ICU stay, outside the cohort, "
    "or imported before)"
)
NO_HADM = "rows without hadm_id"
NO_HADM_PATIENT = "rows without hadm_id of patients not imported"
NO_HADM_OUTSIDE = (
    "rows without hadm_id whose time falls in no admission of their patient imported"
)


@dataclass
class PatientsAdmissionsStays:
    """patients, admissions and icustays, parsed and checked against each other."""

    patients: pd.DataFrame  # index subject_id
    admissions: pd.DataFrame  # index hadm_id
    stays: pd.DataFrame
    deaths: pd.Series  # subject_id -> death time (deathtime, else dod)
    first_admit: pd.Series = field(default_factory=pd.Series)  # of the new admissions


def _read_cohort(folder: MimicFolder) -> PatientsAdmissionsStays:
    """Read and validate the three small tables completely before anything is
    written: ids, times, stay order, and every stay's admission and patient."""
    patients, file, _ = _table_read(folder, PATIENTS, "subject_id", _PATIENTS)
    # Ages go into a whole-number column: a fraction, a negative age or one past
    # any human's (MIMIC-IV caps at 91) is a data error, named before any write.
    for column, low, high in (("anchor_age", 0, 130), ("anchor_year", 1800, 2500)):
        values = patients[column].to_numpy(dtype=float)
        reject_first(
            (values != np.floor(values)) | (values < low) | (values > high),
            lambda pos, column=column, low=low, high=high: (
                f"{patients[column].iloc[pos]!r} "
                f"is not a whole "
                f"number from {low} to {high}"
            ),
            file=file,
            column=column,
        )
    patients = patients.set_index("subject_id")

    admissions, admissions_file, col = _table_read(
        folder, ADMISSIONS, "hadm_id", _ADMISSIONS
    )
    admissions["expired"] = col.number("hospital_expire_flag").fillna(0).astype(bool)
    admissions["_row"] = col.rows
    admissions = admissions.set_index("hadm_id")

    stays, file, _ = _table_read(folder, ICUSTAYS, "stay_id", _STAYS)
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


# The columns read from each of the three tables: (name, _Columns reader,
# whether a value is required).
_PATIENTS = (
    ("subject_id", "id", False),
    ("gender", "text", False),
    ("anchor_age", "number", True),
    ("anchor_year", "number", True),
    ("dod", "time", False),
)
_ADMISSIONS = (
    ("subject_id", "id", False),
    ("hadm_id", "id", False),
    ("admittime", "time", True),
    ("dischtime", "time", True),
    ("deathtime", "time", False),
    ("admission_type", "text", False),
    ("discharge_location", "text", False),
)
_STAYS = (
    ("subject_id", "id", False),
    ("hadm_id", "id", False),
    ("stay_id", "id", False),
    ("intime", "time", True),
    ("outtime", "time", True),
    ("first_careunit", "text", False),
    ("last_careunit", "text", False),
)


def _table_read(
    folder: MimicFolder, table, key: str, columns: tuple
) -> tuple[pd.DataFrame, str, _Columns]:
    """The required ``table``'s ``columns`` (as above), with ``key`` checked
    unique; also its file's name and its columns' reader."""
    raw, file = folder.read(table, required=True)
    col = _Columns(raw, file)
    frame = pd.DataFrame(
        {
            name: (
                getattr(col, reader)(name, required=True)
                if required
                else getattr(col, reader)(name)
            )
            for name, reader, required in columns
        }
    )
    _check_unique(frame[key], file=file, column=key)
    return frame, file, col


def _check_unique(ids: pd.Series, *, file: str, column: str) -> None:
    reject_first(
        ids.duplicated(),
        lambda pos: f"{column} {ids.iloc[pos]} appears twice",
        file=file,
        column=column,
    )


def _check_stays(
    stays, admissions, patients, *, file: str, admissions_file: str
) -> None:
    """ICU stays end after they start and point at a known admission and patient."""
    reject_first(
        stays["outtime"] <= stays["intime"],
        lambda pos: (
            f"outtime {stays['outtime'].iloc[pos]} is not after intime "
            f"{stays['intime'].iloc[pos]}"
        ),
        file=file,
        column="outtime",
    )
    reject_first(
        ~stays["hadm_id"].isin(admissions.index),
        lambda pos: f"hadm_id {stays['hadm_id'].iloc[pos]} is not in admissions",
        file=file,
        column="hadm_id",
    )
    reject_first(
        ~stays["subject_id"].isin(patients.index),
        lambda pos: f"subject_id {stays['subject_id'].iloc[pos]} is not in patients",
        file=file,
        column="subject_id",
    )
    owner = admissions.loc[stays["hadm_id"], "subject_id"].to_numpy()
    reject_first(
        owner != stays["subject_id"].to_numpy(),
        lambda pos: (
            f"subject_id {stays['subject_id'].iloc[pos]} differs from admission "
            f"{stays['hadm_id'].iloc[pos]}'s subject_id {owner[pos]}"
        ),
        file=file,
        column="subject_id",
    )
    with_stays = admissions.loc[stays["hadm_id"].unique()]
    reject_first(
        ~with_stays["subject_id"].isin(patients.index),
        lambda pos: (
            f"subject_id {with_stays['subject_id'].iloc[pos]} is not in patients"
        ),
        file=admissions_file,
        column="subject_id",
        rows=with_stays["_row"].to_numpy(),
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
        tally=None,
    ) -> pd.DataFrame:
        """The rows of the batch's admissions, with ``_row`` (file row number) and
        ``admission_id``. With ``assign_by``, rows without hadm_id go to the
        subject's admission whose [admittime, dischtime] holds their time: the
        first of those time columns that has a value. ``tally`` (a
        mimic.events.RowTally) counts the rows left out, by reason."""
        if "_row" in chunk:  # rows routed from the file (mimic.routing)
            rows = chunk["_row"].to_numpy().astype("int64")
        else:
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
        orphan = hadm.isna().to_numpy()
        if tally is not None:
            tally.add(NOT_IMPORTED, int((~keep & ~orphan).sum()))
            if not assign_by:
                tally.add(NO_HADM, int(orphan.sum()))
        if not assign_by or not orphan.any():
            return out
        subject = _numbers(
            chunk["subject_id"][orphan],
            file=file,
            column="subject_id",
            rows=rows[orphan],
        )
        mine = subject.isin(self.subject_ids).to_numpy()
        if tally is not None:
            tally.add(NO_HADM_PATIENT, int((~mine).sum()))
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
        if tally is not None:
            tally.orphans(candidates["_row"].to_numpy(), picked["_row"].to_numpy())
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
