"""The inputevents of the MIMIC-IV folder that tests/windows/mimic_roundtrip.py
writes from the CLIF demo: its continuous and intermittent medication
administrations back as MIMIC-IV's intervals and doses."""

from __future__ import annotations

import numpy as np
import pandas as pd

# The consortium writes Dextrose 5% (220949) under two CLIF categories; one
# MIMIC-IV row gives back one of them.
DUPLICATED_MEDICATIONS = {("Dextrose 5%", "dextrose")}


def _weights(vitals: pd.DataFrame) -> pd.Series:
    """Each hospitalization's first charted weight (kg): inputevents' patientweight."""
    w = vitals[vitals["vital_category"] == "weight_kg"].sort_values("recorded_dttm")
    return w.groupby(w["hospitalization_id"].astype(str))["vital_value"].first()


def inputevents(read, inv, subject_of, stay_of, vitals, d_items) -> pd.DataFrame:
    """Continuous administrations back to MIMIC-IV's intervals, per order and item:
    each MAR record that sets a rate (start, dose change, restart) begins an
    interval that the order's next record ends, with that record's action as the
    interval's statusdescription (ChangeDose/Rate, Paused, FinishedRunning,
    Stopped). Intermittent ones are one row each, at their time."""
    weights = _weights(vitals)
    rows = []
    orderid = iter(range(50_000_000, 99_000_000))

    cont = read("medication_admin_continuous")
    cont = cont[
        ~pd.Series(
            list(zip(cont["med_name"], cont["med_category"])), index=cont.index
        ).isin(DUPLICATED_MEDICATIONS)
    ]
    cont = cont.assign(hospitalization_id=cont["hospitalization_id"].astype(str))
    cont = cont.sort_values(
        ["hospitalization_id", "med_order_id", "med_name", "admin_dttm"], kind="stable"
    )
    for (hosp_id, order, name), group in cont.groupby(
        ["hospitalization_id", "med_order_id", "med_name"], sort=False
    ):
        recs = list(group.itertuples())
        for cur, nxt in zip(recs, recs[1:]):
            if cur.mar_action_category == "stop":
                continue
            status = {"dose_change": "ChangeDose/Rate", "going": "Paused"}.get(
                nxt.mar_action_category, nxt.mar_action_name
            )
            if nxt.mar_action_category == "start":
                status = "ChangeDose/Rate"
            rows.append(
                _input_row(
                    hosp_id,
                    order,
                    name,
                    cur.admin_dttm,
                    nxt.admin_dttm,
                    cur.med_dose,
                    cur.med_dose_unit,
                    status,
                    next(orderid),
                    inv,
                    weights,
                )
            )
        last = recs[-1]
        if last.mar_action_category != "stop":
            # An order still running at the end of the data: one minute more.
            rows.append(
                _input_row(
                    hosp_id,
                    order,
                    name,
                    last.admin_dttm,
                    last.admin_dttm + pd.Timedelta(minutes=1),
                    last.med_dose,
                    last.med_dose_unit,
                    "Stopped",
                    next(orderid),
                    inv,
                    weights,
                )
            )

    inter = read("medication_admin_intermittent")
    inter = inter[
        ~pd.Series(
            list(zip(inter["med_name"], inter["med_category"])), index=inter.index
        ).isin(DUPLICATED_MEDICATIONS)
    ]
    for r in inter.itertuples():
        row = _input_row(
            str(r.hospitalization_id),
            r.med_order_id,
            r.med_name,
            r.admin_dttm,
            r.admin_dttm + pd.Timedelta(minutes=1),
            np.nan,
            "",
            r.mar_action_name,
            next(orderid),
            inv,
            weights,
        )
        row.update(amount=r.med_dose, amountuom=r.med_dose_unit)
        rows.append(row)
    for label, itemid in inv.meds.items():
        d_items[itemid] = (label, "inputevents", "", "Solution")
    frame = pd.DataFrame(rows)
    frame.insert(0, "subject_id", frame["hadm_id"].map(subject_of))
    frame.insert(2, "stay_id", frame["hadm_id"].map(stay_of).astype("Int64"))
    frame = frame[frame["stay_id"].notna()]
    for col in ("starttime", "endtime", "storetime"):
        frame[col] = pd.to_datetime(frame[col], utc=True).dt.tz_localize(None)
    return frame


def _input_row(
    hosp_id, order, name, start, end, rate, rateuom, status, orderid, inv, weights
) -> dict:
    hours = (end - start).total_seconds() / 3600
    weight = float(weights.get(hosp_id, 80.0))
    amount, amountuom = np.nan, ""
    if rateuom and not pd.isna(rate):
        parts = rateuom.split("/")
        amountuom = parts[0]
        amount = rate * hours * (60 if parts[-1] == "min" else 1)
        if len(parts) == 3:
            amount *= weight
    link = int(order) if str(order).isdigit() else orderid
    return {
        "hadm_id": int(hosp_id),
        "caregiver_id": None,
        "starttime": start,
        "endtime": end,
        "storetime": end,
        "itemid": inv.meds[name],
        "amount": amount,
        "amountuom": amountuom,
        "rate": rate,
        "rateuom": rateuom or None,
        "orderid": orderid,
        "linkorderid": link,
        "ordercategoryname": None,
        "secondaryordercategoryname": None,
        "ordercomponenttypedescription": None,
        "ordercategorydescription": "Continuous Med" if rateuom else "Drug Push",
        "patientweight": weight,
        "totalamount": None,
        "totalamountuom": None,
        "isopenbag": 0,
        "continueinnextdept": 0,
        "statusdescription": status,
        "originalamount": amount,
        "originalrate": rate,
    }
