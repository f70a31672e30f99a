"""CLIF event tables into event rows: one transform per table, and code status
placed in the admission whose stay in hospital holds its time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.importers.base import SourceTable, parse_times
from windows.importers.clif.tables import (
    CRRT_NUMERIC,
    RESP_OBS_COLUMNS,
    RESP_SET_COLUMNS,
    _text,
)
from windows.importers.mimic.notes import report_findings
from windows.models import Admission, Domain, EventKind

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


# MAR actions that record no administration.
MED_NON_ACTIONS = {"going", "not_given", "verify", "other"}


def _stripped(value):
    """Text without the surrounding white space some sources keep ("Bipap mask ",
    a unit "10^3/µL\t")."""
    if isinstance(value, pd.Series):
        return value.str.strip()
    return value.strip() if isinstance(value, str) else value


def _base(
    chunk: pd.DataFrame,
    *,
    kind,
    domain,
    category,
    name,
    value_num=np.nan,
    unit="",
    value_text="",
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "time": chunk["_time"],
            "kind": kind,
            "domain": domain,
            "category": _stripped(category),
            "name": _stripped(name),
            "value_num": value_num,
            "unit": _stripped(unit),
            "value_text": value_text,
            "source_key": "row:" + chunk["_row"].astype(str),
        },
        index=chunk.index,
    )


def _vitals(c: pd.DataFrame) -> pd.DataFrame:
    cat = _text(c["vital_category"])
    site = _text(c["meas_site_name"]) if "meas_site_name" in c else ""
    return _base(
        c,
        kind=EventKind.OBSERVATION,
        domain=Domain.VITALS,
        category=cat,
        name=_text(c["vital_name"]),
        value_num=pd.to_numeric(c["vital_value"], errors="coerce"),
        unit=cat.map(VITAL_UNITS).fillna(""),
        value_text=site,
    )


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
    specimen = (
        _text(c["lab_specimen_category"])
        if "lab_specimen_category" in c
        else pd.Series("", index=c.index)
    )
    gas = category.str.endswith("_arterial") | category.str.endswith("_venous")
    venous = category.str.endswith("_venous") | name.str.contains("venous", case=False)
    arterial = name.str.contains(r"\barterial\b", case=False, regex=True) & ~venous
    own = pd.Series(
        np.select([venous, arterial], ["venous", "arterial"], ""), index=c.index
    ).where(gas, "")
    if "lab_collect_dttm" in c:
        collected = pd.to_datetime(c["lab_collect_dttm"], utc=True, errors="coerce")
        grouped = gas & collected.notna()
        if grouped.any():
            key = [c.loc[grouped, "hospitalization_id"], collected[grouped]]
            any_venous = (own[grouped] == "venous").groupby(key).transform("any")
            any_arterial = (own[grouped] == "arterial").groupby(key).transform("any")
            shared = pd.Series(
                np.select(
                    [any_venous & ~any_arterial, any_arterial & ~any_venous],
                    ["venous", "arterial"],
                    "",
                ),
                index=own[grouped].index,
            )
            own.loc[grouped] = own[grouped].where(own[grouped] != "", shared)
    specimen = specimen.where(specimen != "", own)
    text = text.where(num.isna(), specimen)
    return _base(
        c,
        kind=EventKind.OBSERVATION,
        domain=Domain.LABS,
        category=_text(c["lab_category"]),
        name=name,
        value_num=num,
        unit=_text(c["reference_unit"]),
        value_text=text,
    )


def _filed_twice(c: pd.DataFrame) -> pd.Series:
    """Rows that repeat another row of the chunk in everything but med_category,
    except the one with the longest (most specific) category: the CLIF demo files
    each "Dextrose 5%" record under both dextrose and dextrose_in_water_d5w. One
    administration is one event."""
    key = [
        col
        for col in (
            "hospitalization_id",
            "_time",
            "med_order_id",
            "med_name",
            "mar_action_category",
            "med_dose",
            "med_dose_unit",
        )
        if col in c
    ]
    frame = c[key].astype("object").where(c[key].notna(), "<NA>").astype(str)
    frame["_len"] = _text(c["med_category"]).str.len()
    frame = frame.sort_values("_len", ascending=False, kind="mergesort")
    return frame.duplicated(key).reindex(c.index)


def _meds(domain: str):
    def transform(c: pd.DataFrame) -> pd.DataFrame:
        twice = _filed_twice(c)
        c = c[~twice]
        action = _text(c["mar_action_category"]).str.lower()
        kind = np.where(
            action.isin(MED_NON_ACTIONS), EventKind.OBSERVATION, EventKind.ACTION
        )
        frame = _base(
            c,
            kind=kind,
            domain=domain,
            category=_text(c["med_category"]),
            name=_text(c["med_name"]),
            value_num=pd.to_numeric(c["med_dose"], errors="coerce"),
            unit=_text(c["med_dose_unit"]),
            value_text=action,
        )
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
            trach = np.where(
                d["tracheostomy"].fillna(False).astype(bool), "tracheostomy", ""
            )
        frames.append(
            _base(
                d,
                kind=kind,
                domain=Domain.RESPIRATORY,
                category=_text(d["device_category"]),
                name=_text(d["device_name"]),
                value_text=trach,
            ).assign(source_key=lambda f: f["source_key"] + ":device")
        )
    mode = c["mode_category"].notna() | c["mode_name"].notna()
    if mode.any():
        m = c[mode]
        frames.append(
            _base(
                m,
                kind=kind,
                domain=Domain.RESPIRATORY,
                category="mode:" + _text(m["mode_category"]),
                name=_text(m["mode_name"]),
            ).assign(source_key=lambda f: f["source_key"] + ":mode")
        )
    for col in present_sets + [col for col in RESP_OBS_COLUMNS if col in c]:
        vals = pd.to_numeric(c[col], errors="coerce")
        has = vals.notna()
        if not has.any():
            continue
        sub = c[has]
        frames.append(
            _base(
                sub,
                kind=kind,
                domain=Domain.RESPIRATORY,
                category=col,
                name=col.replace("_", " "),
                value_num=vals[has],
                unit=RESP_UNITS.get(col, "cmH2O"),
            ).assign(source_key=lambda f, col=col: f["source_key"] + ":" + col)
        )
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
    return _base(
        c,
        kind=EventKind.OBSERVATION,
        domain=Domain.ASSESSMENTS,
        category=_text(c["assessment_category"]),
        name=_text(c["assessment_name"]),
        value_num=pd.to_numeric(c["numerical_value"], errors="coerce"),
        value_text=text,
    )


def _crrt(c: pd.DataFrame) -> pd.DataFrame:
    """One event per mode charting and one per numeric reading; starts, switches
    and prescription changes are derived by ``windows.actions``."""
    frames = []
    has_mode = c["crrt_mode_category"].notna() | c["crrt_mode_name"].notna()
    if has_mode.any():
        m = c[has_mode]
        frames.append(
            _base(
                m,
                kind=EventKind.OBSERVATION,
                domain=Domain.CRRT,
                category="crrt:" + _text(m["crrt_mode_category"]),
                name=_text(m["crrt_mode_name"]),
            ).assign(source_key=lambda f: f["source_key"] + ":mode")
        )
    for col in CRRT_NUMERIC:
        if col not in c:
            continue
        vals = pd.to_numeric(c[col], errors="coerce")
        has = vals.notna()
        if has.any():
            sub = c[has]
            frames.append(
                _base(
                    sub,
                    kind=EventKind.OBSERVATION,
                    domain=Domain.CRRT,
                    category=col,
                    name=col.replace("_", " "),
                    value_num=vals[has],
                    unit="mL/h",
                ).assign(source_key=lambda f, col=col: f["source_key"] + ":" + col)
            )
    if not frames:
        return _base(c.iloc[:0], kind="", domain="", category="", name="")
    return _concat(frames)


def _position(c: pd.DataFrame) -> pd.DataFrame:
    cat = _text(c["position_category"])
    # Proning (and its end) is derived as a decision by windows.actions.
    return _base(
        c,
        kind=EventKind.OBSERVATION,
        domain=Domain.POSITION,
        category=cat,
        name=_text(c["position_name"]),
    )


def _procedures(c: pd.DataFrame) -> pd.DataFrame:
    """CLIF ``patient_procedures`` holds ICD/CPT codes billed after discharge with a
    billing date: coded records, for hindsight only (never at the bedside)."""
    code = _text(c["procedure_code"])
    fmt = _text(c["procedure_code_format"])
    return _base(
        c,
        kind=EventKind.CODED,
        domain=Domain.PROCEDURES,
        category=fmt,
        name=fmt + " " + code,
        value_text=code,
    )


def _clinical_notes(c: pd.DataFrame) -> pd.DataFrame:
    """A site's optional ``clinical_notes`` table (not part of CLIF; issue 21):
    ``hospitalization_id``, ``note_dttm``, ``note_type``, ``note_text`` and
    optionally ``note_name`` (the exam). ``note_dttm`` is when the note could be
    read (a radiology report's signed or stored time, not the exam's).
    ``note_type`` "radiology": a bedside report, its FINDINGS and IMPRESSION
    sections as text (windows.importers.mimic.notes.report_findings);
    "discharge": a discharge summary, hindsight only (kind outcome, category
    discharge_summary). Other note types are not imported: whether they were
    readable at the bedside at their time is not known."""
    kind = _text(c["note_type"]).str.strip().str.lower()
    text = _text(c["note_text"])
    name = _text(c["note_name"]) if "note_name" in c else pd.Series("", index=c.index)
    radiology = (kind == "radiology").to_numpy()
    discharge = (kind == "discharge").to_numpy()
    reports = c[radiology]
    report_names = name[radiology].where(name[radiology] != "", "Radiology report")
    frames = [
        _base(
            reports,
            kind=EventKind.OBSERVATION,
            domain=Domain.NOTES,
            category=pd.Series("radiology_report", index=reports.index),
            name=report_names,
            value_text=text[radiology].map(report_findings),
        ),
        _base(
            c[discharge],
            kind=EventKind.OUTCOME,
            domain=Domain.NOTES,
            category=pd.Series("discharge_summary", index=c.index[discharge]),
            name=pd.Series("Discharge summary", index=c.index[discharge]),
            value_text=text[discharge].str.strip(),
        ),
    ]
    return pd.concat(frames).sort_index()


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
    "clinical_notes": _clinical_notes,
}


def _code_status_events(
    table: SourceTable, adm_by_hosp: dict[str, Admission]
) -> pd.DataFrame:
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
        times = parse_times(
            chunk["start_dttm"], file=table.display, column="start_dttm", first_row=1
        )
        for i, r in enumerate(chunk.to_dict("records")):
            t = times.iloc[i]
            for adm in by_patient[r["patient_id"]]:
                end = adm.discharge_time or t
                if adm.admit_time <= t <= end:
                    rows.append(
                        {
                            "admission_id": adm.pk,
                            "time": t,
                            "kind": EventKind.ACTION,
                            "domain": Domain.CODE_STATUS,
                            "category": ""
                            if pd.isna(r["code_status_category"])
                            else str(r["code_status_category"]),
                            "name": ""
                            if pd.isna(r["code_status_name"])
                            else str(r["code_status_name"]),
                            "source_table": "clif_code_status",
                            "source_key": f"row:{r['_row']}",
                        }
                    )
                    break
    return pd.DataFrame(rows)
