"""Medications: inputevents as CLIF's MAR records, emar with its doses from
emar_detail, and prescriptions when there is no emar."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from windows.importers.mimic.events import (
    ACT,
    OBS,
    DetailStep,
    EventStep,
    _events,
    _in_index_order,
)
from windows.importers.mimic.items import ItemLabels, _mapped
from windows.importers.mimic.reading import (
    CHUNK_ROWS,
    _check_interval,
    _Columns,
    _keys,
    _row_keys,
    _text,
)
from windows.importers.mimic_mapping import MEDICATION_WORDS, RATE_CONVERSIONS
from windows.models import Domain

# emar event_txt of a dose given or an infusion changed (actions); the rest
# (Not Given, Hold Dose, Assessed, ...) are kept as observations.
_EMAR_ACTION = (
    r"^(?:Delayed )?(?:Administered|Partial Administered|Started|Restarted|Stopped"
    r"|Rate Change|Bolus from IV Drip|Applied|Removed|Flushed|Confirmed)"
)


class EmarStep(DetailStep):
    """emar, with the dose given from emar_detail when that file is there."""

    def with_detail(self, events: pd.DataFrame) -> pd.DataFrame:
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
        # An item the consortium's mapping does not know (226452 PO Intake,
        # 226361 Pre-Admission Intake, 225943 Solution) is an intake recorded,
        # not an order given: an observation. Mapped items take the mapping's
        # kind (drugs, fluids and blood products are actions).
        m = _mapped(
            "inputevents",
            itemid,
            labels.chart,
            domain=Domain.INPUT.value,
            kind=OBS,
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
        medication = domain.isin(
            [Domain.MED_CONTINUOUS.value, Domain.MED_INTERMITTENT.value]
        )
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
    is_med = (
        events["domain"]
        .isin([Domain.MED_CONTINUOUS.value, Domain.MED_INTERMITTENT.value])
        .to_numpy()
    )
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
        value_text=action,
        end_time=pd.NaT,
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


class InputEventsStep(EventStep):
    """inputevents of a batch read whole, so that each order's rows are seen
    together when they become MAR records (_medication_records)."""

    def run(self, batch, writer, progress, summary) -> None:
        parts = list(self.frames(batch, progress))
        if not parts:
            return
        events = _medication_records(pd.concat(parts, ignore_index=True))
        summary.add_events(self.name, writer.write(_in_index_order(events)))


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
