"""The other event files: outputs, procedures, charted dates, care-unit transfers
and the codes billed with a date only."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from windows.importers.mimic.events import ACT, CODED, OBS, EventStep, _events
from windows.importers.mimic.items import ItemLabels, _mapped, _unit
from windows.importers.mimic.reading import _check_interval, _Columns, _keys, _row_keys
from windows.importers.mimic_mapping import ADT_LOCATION_CATEGORIES
from windows.models import Domain


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


def _charted_items(f: pd.DataFrame, file: str, table: str, labels, domain):
    """The rows' columns and their items' CLIF mapping (observations of
    ``domain`` when the mapping does not know the item)."""
    col = _Columns(f, file, f["_row"].to_numpy())
    m = _mapped(
        table,
        col.id("itemid"),
        labels.chart,
        domain=domain.value,
        kind=OBS,
        unmapped=labels.unmapped,
    )
    return col, m


def _charted_events(f, table: str, col, m, **values) -> pd.DataFrame:
    """One event per row at its charttime, named and placed by its item's
    mapping, keyed by its row."""
    return _events(
        f,
        table,
        time=col.time("charttime", required=True),
        kind=m["kind"],
        domain=m["domain"],
        category=m["category"],
        name=m["name"],
        source_key=_row_keys(col.rows),
        **values,
    )


def _outputevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Urine output items (CLINICAL_CONCEPTS.md section 3) in CLIF output
        categories, mL."""
        col, m = _charted_items(f, file, "outputevents", labels, Domain.OUTPUT)
        return _charted_events(
            f,
            "outputevents",
            col,
            m,
            value_num=col.number("value") * m["factor"] + m["offset"],
            unit=_unit(m, col.text("valueuom")),
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
        col, m = _charted_items(f, file, "datetimeevents", labels, Domain.OTHER)
        return _charted_events(
            f, "datetimeevents", col, m, value_text=col.text("value")
        )

    return transform


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
        f,
        file,
        table="procedures_icd",
        code_column="icd_code",
        system=lambda col, code: np.where(
            col.number("icd_version") == 10, "ICD10PCS", "ICD9"
        ),
    )


def _hcpcsevents(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """CPT and HCPCS codes: a five-character code of four digits and a digit or
    letter is CPT, else HCPCS."""
    return _coded_events(
        f,
        file,
        table="hcpcsevents",
        code_column="hcpcs_cd",
        system=lambda col, code: np.where(
            code.str.fullmatch(r"\d{4}[0-9A-Z]"), "CPT", "HCPCS"
        ),
    )
