"""Small MIMIC-IV v2.2 folders written by the tests with the real column names:
two patients with an ICU admission each (and one admission without), which tests
change before writing, and the counts of what the importer stored."""

from __future__ import annotations

import csv
import gzip
import io
from datetime import UTC
from pathlib import Path

from django.db.models import Count

from windows.models import Event

COLUMNS = {
    "hosp/patients": "subject_id,gender,anchor_age,anchor_year,anchor_year_group,dod",
    "hosp/admissions": "subject_id,hadm_id,admittime,dischtime,deathtime,admission_type,"
    "admit_provider_id,admission_location,discharge_location,insurance,language,"
    "marital_status,race,edregtime,edouttime,hospital_expire_flag",
    "icu/icustays": "subject_id,hadm_id,stay_id,first_careunit,last_careunit,intime,outtime,los",
    "icu/chartevents": "subject_id,hadm_id,stay_id,caregiver_id,charttime,storetime,itemid,"
    "value,valuenum,valueuom,warning",
    "hosp/labevents": "labevent_id,subject_id,hadm_id,specimen_id,itemid,order_provider_id,"
    "charttime,storetime,value,valuenum,valueuom,ref_range_lower,ref_range_upper,flag,"
    "priority,comments",
    "icu/inputevents": "subject_id,hadm_id,stay_id,caregiver_id,starttime,endtime,storetime,"
    "itemid,amount,amountuom,rate,rateuom,orderid,linkorderid,ordercategoryname,"
    "secondaryordercategoryname,ordercomponenttypedescription,ordercategorydescription,"
    "patientweight,totalamount,totalamountuom,isopenbag,continueinnextdept,"
    "statusdescription,originalamount,originalrate",
    "icu/outputevents": "subject_id,hadm_id,stay_id,caregiver_id,charttime,storetime,itemid,"
    "value,valueuom",
    "icu/procedureevents": "subject_id,hadm_id,stay_id,caregiver_id,starttime,endtime,"
    "storetime,itemid,value,valueuom,location,locationcategory,orderid,linkorderid,"
    "ordercategoryname,ordercategorydescription,patientweight,isopenbag,"
    "continueinnextdept,statusdescription,originalamount,originalrate",
    "icu/datetimeevents": "subject_id,hadm_id,stay_id,caregiver_id,charttime,storetime,"
    "itemid,value,valueuom,warning",
    "hosp/emar": "subject_id,hadm_id,emar_id,emar_seq,poe_id,pharmacy_id,enter_provider_id,"
    "charttime,medication,event_txt,scheduletime,storetime",
    "hosp/emar_detail": "subject_id,emar_id,emar_seq,parent_field_ordinal,"
    "administration_type,pharmacy_id,barcode_type,reason_for_no_barcode,"
    "complete_dose_not_given,dose_due,dose_due_unit,dose_given,dose_given_unit,"
    "will_remainder_of_dose_be_given,product_amount_given,product_unit,product_code,"
    "product_description,product_description_other,prior_infusion_rate,infusion_rate,"
    "infusion_rate_adjustment,infusion_rate_adjustment_amount,infusion_rate_unit,route,"
    "infusion_complete,completion_interval,new_iv_bag_hung,"
    "continued_infusion_in_other_location,restart_interval,side,site,"
    "non_formulary_visual_verification",
    "hosp/microbiologyevents": "microevent_id,subject_id,hadm_id,micro_specimen_id,"
    "order_provider_id,chartdate,charttime,spec_itemid,spec_type_desc,test_seq,storedate,"
    "storetime,test_itemid,test_name,org_itemid,org_name,isolate_num,quantity,ab_itemid,"
    "ab_name,dilution_text,dilution_comparison,dilution_value,interpretation,comments",
    "hosp/diagnoses_icd": "subject_id,hadm_id,seq_num,icd_code,icd_version",
    "hosp/d_icd_diagnoses": "icd_code,icd_version,long_title",
    "icu/d_items": "itemid,label,abbreviation,linksto,category,unitname,param_type,"
    "lownormalvalue,highnormalvalue",
    "hosp/d_labitems": "itemid,label,fluid,category",
    "hosp/transfers": "subject_id,hadm_id,transfer_id,eventtype,careunit,intime,outtime",
    "hosp/procedures_icd": "subject_id,hadm_id,seq_num,chartdate,icd_code,icd_version",
    "hosp/hcpcsevents": "subject_id,hadm_id,chartdate,hcpcs_cd,seq_num,short_description",
    "hosp/prescriptions": "subject_id,hadm_id,pharmacy_id,poe_id,poe_seq,"
    "order_provider_id,starttime,stoptime,drug_type,drug,formulary_drug_cd,gsn,ndc,"
    "prod_strength,form_rx,dose_val_rx,dose_unit_rx,form_val_disp,form_unit_disp,"
    "doses_per_24_hrs,route",
}


GZIPPED = {"icu/chartevents", "icu/inputevents", "hosp/labevents", "hosp/diagnoses_icd"}


# Two patients with one ICU admission each; patient 10001 has a second admission
# without an ICU stay, whose rows must not be imported.
A1, A2, A_NO_ICU = 20001, 20002, 20003


def chart(hadm, itemid, charttime, value, valuenum="", valueuom=""):
    stay = {A1: 30001, A2: 30002}.get(hadm, "")
    subject = 10002 if hadm == A2 else 10001
    return {
        "subject_id": subject,
        "hadm_id": hadm,
        "stay_id": stay,
        "caregiver_id": 7,
        "charttime": charttime,
        "storetime": charttime,
        "itemid": itemid,
        "value": value,
        "valuenum": valuenum,
        "valueuom": valueuom,
        "warning": 0,
    }


def table(columns: tuple[str, ...], *rows: tuple) -> list[dict]:
    """A dictionary table's rows, written one tuple a row under its columns."""
    return [dict(zip(columns, row, strict=True)) for row in rows]


def mimic_tables() -> dict[str, list[dict]]:
    """The rows of every file; tests change them before writing."""
    return {
        "hosp/patients": [
            {
                "subject_id": 10001,
                "gender": "F",
                "anchor_age": 60,
                "anchor_year": 2150,
                "anchor_year_group": "2011 - 2013",
            },
            {
                "subject_id": 10002,
                "gender": "M",
                "anchor_age": 70,
                "anchor_year": 2160,
                "anchor_year_group": "2014 - 2016",
                "dod": "2161-05-05",
            },
            {
                "subject_id": 10003,
                "gender": "F",
                "anchor_age": 40,
                "anchor_year": 2170,
                "anchor_year_group": "2017 - 2019",
            },
        ],
        "hosp/admissions": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "admittime": "2151-03-01 10:00:00",
                "dischtime": "2151-03-10 12:00:00",
                "admission_type": "EW EMER.",
                "admission_location": "EMERGENCY ROOM",
                "discharge_location": "HOME",
                "race": "WHITE",
                "hospital_expire_flag": 0,
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "admittime": "2161-05-01 08:00:00",
                "dischtime": "2161-05-05 09:00:00",
                "deathtime": "2161-05-05 09:00:00",
                "admission_type": "URGENT",
                "discharge_location": "DIED",
                "hospital_expire_flag": 1,
            },
            {
                "subject_id": 10001,
                "hadm_id": A_NO_ICU,
                "admittime": "2152-01-01 10:00:00",
                "dischtime": "2152-01-03 10:00:00",
                "admission_type": "ELECTIVE",
                "discharge_location": "HOME",
                "hospital_expire_flag": 0,
            },
        ],
        "icu/icustays": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "first_careunit": "Medical Intensive Care Unit (MICU)",
                "last_careunit": "Medical Intensive Care Unit (MICU)",
                "intime": "2151-03-01 12:00:00",
                "outtime": "2151-03-04 12:00:00",
                "los": 3.0,
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "stay_id": 30002,
                "first_careunit": "Surgical Intensive Care Unit (SICU)",
                "last_careunit": "Surgical Intensive Care Unit (SICU)",
                "intime": "2161-05-01 10:00:00",
                "outtime": "2161-05-05 08:00:00",
                "los": 3.9,
            },
        ],
        "icu/chartevents": [
            chart(A1, 220045, "2151-03-01 13:00:00", "88", 88, "bpm"),
            chart(A1, 220052, "2151-03-01 13:00:00", "72", 72, "mmHg"),
            chart(A1, 223761, "2151-03-01 13:00:00", "100.4", 100.4, "°F"),
            chart(A1, 220739, "2151-03-01 13:00:00", "Spontaneously", 4),
            chart(A1, 223900, "2151-03-01 13:00:00", "No Response-ETT", 1),
            chart(A1, 223901, "2151-03-01 13:00:00", "Obeys Commands", 6),
            chart(A1, 226732, "2151-03-01 13:00:00", "Endotracheal tube"),
            chart(A1, 223835, "2151-03-01 13:00:00", "50", 50),
            chart(A1, 229999, "2151-03-01 14:00:00", "left side", ""),
            chart(A2, 220045, "2161-05-01 11:00:00", "110", 110, "bpm"),
            chart(A_NO_ICU, 220045, "2152-01-01 11:00:00", "70", 70, "bpm"),
        ],
        "hosp/labevents": [
            {
                "labevent_id": 1,
                "subject_id": 10001,
                "hadm_id": A1,
                "specimen_id": 501,
                "itemid": 50912,
                "charttime": "2151-03-02 06:00:00",
                "storetime": "2151-03-02 07:10:00",
                "value": "1.2",
                "valuenum": 1.2,
                "valueuom": "mg/dL",
                "priority": "ROUTINE",
            },
            {  # no hadm_id, inside admission A1: placed there by its time
                "labevent_id": 2,
                "subject_id": 10001,
                "specimen_id": 502,
                "itemid": 50813,
                "charttime": "2151-03-02 08:00:00",
                "storetime": "2151-03-02 08:20:00",
                "value": "4.1",
                "valuenum": 4.1,
                "valueuom": "mmol/L",
            },
            {  # no hadm_id, years before any admission: not imported
                "labevent_id": 3,
                "subject_id": 10001,
                "specimen_id": 503,
                "itemid": 50813,
                "charttime": "2149-01-01 08:00:00",
                "value": "1.0",
                "valuenum": 1.0,
                "valueuom": "mmol/L",
            },
            {
                "labevent_id": 4,
                "subject_id": 10002,
                "hadm_id": A2,
                "specimen_id": 504,
                "itemid": 50808,
                "charttime": "2161-05-02 06:00:00",
                "value": "1.10",
                "valuenum": 1.1,
                "valueuom": "mmol/L",
            },
            {
                "labevent_id": 5,
                "subject_id": 10001,
                "hadm_id": A_NO_ICU,
                "specimen_id": 505,
                "itemid": 50912,
                "charttime": "2152-01-02 06:00:00",
                "value": "0.9",
                "valuenum": 0.9,
                "valueuom": "mg/dL",
            },
        ],
        "icu/inputevents": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "starttime": "2151-03-01 14:00:00",
                "endtime": "2151-03-01 16:00:00",
                "itemid": 221906,
                "amount": 0.96,
                "amountuom": "mg",
                "rate": 0.1,
                "rateuom": "mcg/kg/min",
                "orderid": 9001,
                "linkorderid": 9001,
                "ordercategoryname": "01-Drips",
                "patientweight": 80,
                "statusdescription": "ChangeDose/Rate",
            },
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "starttime": "2151-03-01 16:00:00",
                "endtime": "2151-03-01 18:00:00",
                "itemid": 221906,
                "amount": 1.92,
                "amountuom": "mg",
                "rate": 0.0002,
                "rateuom": "mg/kg/min",
                "orderid": 9002,
                "linkorderid": 9001,
                "patientweight": 80,
                "statusdescription": "FinishedRunning",
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "stay_id": 30002,
                "starttime": "2161-05-01 12:00:00",
                "endtime": "2161-05-01 18:00:00",
                "itemid": 222315,
                "amount": 14.4,
                "amountuom": "units",
                "rate": 0.04,
                "rateuom": "units/min",
                "orderid": 9003,
                "linkorderid": 9003,
                "patientweight": 90,
                "statusdescription": "FinishedRunning",
            },
            {  # a bolus: no rate, so intermittent and valued by its amount
                "subject_id": 10002,
                "hadm_id": A2,
                "stay_id": 30002,
                "starttime": "2161-05-01 12:00:00",
                "endtime": "2161-05-01 12:01:00",
                "itemid": 225158,
                "amount": 500,
                "amountuom": "mL",
                "orderid": 9004,
                "linkorderid": 9004,
                "patientweight": 90,
                "statusdescription": "FinishedRunning",
            },
        ],
        "icu/outputevents": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "charttime": "2151-03-01 15:00:00",
                "itemid": 226559,
                "value": 150,
                "valueuom": "ml",
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "stay_id": 30002,
                "charttime": "2161-05-01 15:00:00",
                "itemid": 226559,
                "value": 20,
                "valueuom": "ml",
            },
        ],
        "icu/procedureevents": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "starttime": "2151-03-01 12:30:00",
                "endtime": "2151-03-03 12:30:00",
                "itemid": 225752,
                "value": 2880,
                "valueuom": "min",
                "location": "Left Radial",
                "orderid": 8001,
                "statusdescription": "FinishedRunning",
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "stay_id": 30002,
                "starttime": "2161-05-01 11:00:00",
                "endtime": "2161-05-01 11:01:00",
                "itemid": 224385,
                "value": 1,
                "valueuom": "None",
                "orderid": 8002,
                "statusdescription": "FinishedRunning",
            },
        ],
        "icu/datetimeevents": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "stay_id": 30001,
                "charttime": "2151-03-01 13:00:00",
                "itemid": 225322,
                "value": "2151-02-28 00:00:00",
                "valueuom": "Date",
            }
        ],
        "hosp/emar": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "emar_id": "10001-1",
                "emar_seq": 1,
                "charttime": "2151-03-01 20:00:00",
                "medication": "Vancomycin",
                "event_txt": "Administered",
            },
            {
                "subject_id": 10002,
                "hadm_id": A2,
                "emar_id": "10002-1",
                "emar_seq": 1,
                "charttime": "2161-05-02 09:00:00",
                "medication": "Heparin",
                "event_txt": "Not Given",
            },
        ],
        "hosp/emar_detail": [
            {
                "subject_id": 10001,
                "emar_id": "10001-1",
                "emar_seq": 1,
                "dose_given": "1000",
                "dose_given_unit": "mg",
                "route": "IV",
            },
        ],
        "hosp/microbiologyevents": [
            {
                "microevent_id": 701,
                "subject_id": 10001,
                "hadm_id": A1,
                "micro_specimen_id": 1,
                "chartdate": "2151-03-01 00:00:00",
                "charttime": "2151-03-01 14:00:00",
                "spec_type_desc": "BLOOD CULTURE",
                "storedate": "2151-03-03 00:00:00",
                "storetime": "2151-03-03 10:00:00",
                "test_name": "Blood Culture, Routine",
                "org_name": "ESCHERICHIA COLI",
                "ab_name": "CEFEPIME",
                "interpretation": "S",
            },
            {
                "microevent_id": 702,
                "subject_id": 10002,
                "hadm_id": A2,
                "micro_specimen_id": 2,
                "chartdate": "2161-05-01 00:00:00",
                "spec_type_desc": "URINE",
                "test_name": "URINE CULTURE",
            },
        ],
        "hosp/diagnoses_icd": table(
            ("subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"),
            (10001, A1, 1, "A419", 10),
            (10001, A1, 2, "N179", 10),
            (10002, A2, 1, "I214", 10),
        ),
        "hosp/d_icd_diagnoses": table(
            ("icd_code", "icd_version", "long_title"),
            ("A419", 10, "Sepsis, unspecified organism"),
            ("I214", 10, "Non-ST elevation (NSTEMI) myocardial infarction"),
        ),
        "icu/d_items": table(
            ("itemid", "label", "param_type"),
            (220045, "Heart Rate", "Numeric"),
            (220052, "Arterial Blood Pressure mean", "Numeric"),
            (223761, "Temperature Fahrenheit", "Numeric"),
            (220739, "GCS - Eye Opening", "Text"),
            (223900, "GCS - Verbal Response", "Text"),
            (223901, "GCS - Motor Response", "Text"),
            (226732, "O2 Delivery Device(s)", "Text"),
            (223835, "Inspired O2 Fraction", "Numeric"),
            (229999, "Skin Care Site", "Text"),
            (221906, "Norepinephrine", "Solution"),
            (222315, "Vasopressin", "Solution"),
            (225158, "NaCl 0.9%", "Solution"),
            (226559, "Foley", "Numeric"),
            (225752, "Arterial Line", "Processes"),
            (224385, "Intubation", "Processes"),
            (225322, "Dialysis Catheter Insertion Date", "Date and time"),
        ),
        "hosp/d_labitems": table(
            ("itemid", "label", "fluid", "category"),
            (50912, "Creatinine", "Blood", "Chemistry"),
            (50813, "Lactate", "Blood", "Blood Gas"),
            (50808, "Free Calcium", "Blood", "Blood Gas"),
        ),
        "hosp/transfers": [
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "transfer_id": 601,
                "eventtype": "ED",
                "careunit": "Emergency Department",
                "intime": "2151-03-01 08:00:00",
                "outtime": "2151-03-01 12:00:00",
            },
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "transfer_id": 602,
                "eventtype": "admit",
                "careunit": "Medical Intensive Care Unit (MICU)",
                "intime": "2151-03-01 12:00:00",
                "outtime": "2151-03-04 12:00:00",
            },
            {
                "subject_id": 10001,
                "hadm_id": A1,
                "transfer_id": 603,
                "eventtype": "discharge",
                "intime": "2151-03-10 12:00:00",
            },
        ],
    }


# Rows each file holds for the two ICU admissions (what must be imported).
IMPORTED_ROWS = {
    "chartevents": 10,
    "labevents": 3,
    # norepinephrine order 9001: start, dose change, stop; vasopressin: start,
    # stop; a saline bolus
    "inputevents": 6,
    "outputevents": 2,
    "procedureevents": 2,
    "datetimeevents": 1,
    "emar": 2,
    "microbiologyevents": 4,  # two cultures drawn, two results
    "transfers": 2,  # not the discharge row
    "icustays": 2,  # ICU discharge of each stay
    "admissions": 3,  # hospital discharge of each admission, one death
}


def write_mimic(directory: Path, tables: dict[str, list[dict]]) -> Path:
    """Write MIMIC-IV files: some gzipped, some plain csv, as the real ones mix."""
    for name, rows in tables.items():
        columns = COLUMNS[name].split(",")
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})
        path = directory / f"{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        if name in GZIPPED:
            with gzip.open(
                path.with_name(path.name + ".gz"), "wt", encoding="utf-8"
            ) as fh:
                fh.write(text.getvalue())
        else:
            path.write_text(text.getvalue(), encoding="utf-8")
    return directory


def event_counts() -> dict[str, int]:
    return dict(
        Event.objects.values_list("source_table").annotate(n=Count("id")).order_by()
    )


def event(source_table: str, **filters) -> Event:
    return Event.objects.get(source_table=source_table, **filters)


def _t(text: str):
    """A MIMIC-IV time (naive) as the importer stores it: in UTC."""
    from datetime import datetime

    return datetime.fromisoformat(text).replace(tzinfo=UTC)
