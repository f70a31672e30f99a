"""The MIMIC-IV importer, on small MIMIC-IV v2.2 files written by the tests with the
real column names: what is imported, how it is mapped, re-runs, and every error."""

from __future__ import annotations

import csv
import gzip
import io
import re
from datetime import UTC
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.db.models import Count

from jobs.progress import Progress
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.importers.base import SourceDataError
from windows.importers.mimic import ChartEventsStep, EventStep, mimic_import
from windows.importers.mimic_mapping import (
    CHARTEVENTS,
    DATETIMEEVENTS,
    INPUTEVENTS,
    LABEVENTS,
    OUTPUTEVENTS,
    PROCEDUREEVENTS,
    TEMPERATURE_SITE_ITEM,
)
from windows.models import (
    Admission,
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    Patient,
    Stay,
)

MAPPINGS = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "clif-mimic-mappings"
    / "mappings"
)

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


@pytest.fixture
def mimic_dir(tmp_path):
    return write_mimic(tmp_path / "mimic", mimic_tables())


def event_counts() -> dict[str, int]:
    return dict(
        Event.objects.values_list("source_table").annotate(n=Count("id")).order_by()
    )


def counts() -> tuple[int, int, int, int]:
    return (
        Patient.objects.count(),
        Admission.objects.count(),
        Stay.objects.count(),
        Event.objects.count(),
    )


def event(source_table: str, **filters) -> Event:
    return Event.objects.get(source_table=source_table, **filters)


# --- what is imported ----------------------------------------------------------------


@pytest.mark.django_db
def test_import_creates_patients_admissions_stays_and_every_event_row(mimic_dir):
    summary = mimic_import(directory=mimic_dir)

    assert (
        Patient.objects.count(),
        Admission.objects.count(),
        Stay.objects.count(),
    ) == (2, 2, 2)
    assert (summary.patients, summary.admissions, summary.stays) == (2, 2, 2)
    assert event_counts() == IMPORTED_ROWS
    assert summary.events == IMPORTED_ROWS
    assert not Admission.objects.filter(source_id=str(A_NO_ICU)).exists()


@pytest.mark.django_db
def test_patients_admissions_and_stays_carry_demographics_outcome_and_diagnosis(
    mimic_dir,
):
    mimic_import(directory=mimic_dir)

    survivor = Patient.objects.get(source="mimic", source_id="10001")
    assert (survivor.sex, survivor.age, survivor.death_time) == ("Female", 61, None)
    assert survivor.pseudo_id.startswith("P") and "10001" not in survivor.pseudo_id
    died = Patient.objects.get(source_id="10002")
    assert died.age == 71
    assert died.death_time.isoformat() == "2161-05-05T09:00:00+00:00"

    adm = Admission.objects.get(source_id=str(A1))
    assert adm.admit_time.isoformat() == "2151-03-01T10:00:00+00:00"
    assert (adm.admission_type, adm.discharge_disposition, adm.age_at_admission) == (
        "ed",
        "Home",
        61,
    )
    assert adm.diagnoses == [
        {
            "code": "A419",
            "version": 10,
            "rank": 1,
            "title": "Sepsis, unspecified organism",
        },
        {"code": "N179", "version": 10, "rank": 2, "title": ""},
    ]
    assert Admission.objects.get(source_id=str(A2)).discharge_disposition == "Expired"

    stay = Stay.objects.get(source_id="30001")
    assert stay.source_ids == {
        "stay_id": 30001,
        "first_careunit": "Medical Intensive Care Unit (MICU)",
        "last_careunit": "Medical Intensive Care Unit (MICU)",
    }
    assert stay.care_unit == "Medical Intensive Care Unit (MICU)"
    assert (stay.hospital_outcome, stay.disease_group, stay.diagnosis_code) == (
        "survived",
        DiseaseGroup.SEPSIS,
        "A419",
    )
    assert stay.admission_diagnosis == "A41.9 Sepsis, unspecified organism (ICD-10-CM)"
    other = Stay.objects.get(source_id="30002")
    assert (other.hospital_outcome, other.disease_group) == (
        "died",
        DiseaseGroup.CARDIOVASCULAR,
    )


@pytest.mark.django_db
def test_outcome_events_mark_icu_discharge_hospital_discharge_and_death(mimic_dir):
    mimic_import(directory=mimic_dir)

    outcomes = Event.objects.filter(kind=EventKind.OUTCOME, domain=Domain.OUTCOME)
    assert sorted(outcomes.values_list("category", "source_key")) == [
        ("death", f"death:{A2}"),
        ("hospital_discharge", f"admission:{A1}"),
        ("hospital_discharge", f"admission:{A2}"),
        ("icu_discharge", "stay:30001"),
        ("icu_discharge", "stay:30002"),
    ]
    death = outcomes.get(category="death")
    assert death.time.isoformat() == "2161-05-05T09:00:00+00:00"


@pytest.mark.django_db
def test_chartevents_are_mapped_to_clif_categories_and_converted(mimic_dir):
    mimic_import(directory=mimic_dir)

    hr = event("chartevents", category="heart_rate", admission__source_id=str(A1))
    assert (hr.domain, hr.kind, hr.name, hr.value_num, hr.unit) == (
        "vitals",
        "observation",
        "Heart Rate",
        88,
        "bpm",
    )
    assert hr.source_key == "row:1"
    assert event("chartevents", category="map").value_num == 72
    temp = event("chartevents", category="temp_c")
    assert temp.value_num == pytest.approx(38.0) and temp.unit == "°C"
    verbal = event("chartevents", category="gcs_verbal")
    assert (verbal.domain, verbal.value_num, verbal.value_text) == (
        "patient_assessments",
        1,
        "No Response-ETT",
    )
    assert event("chartevents", category="gcs_eye").value_num == 4
    assert event("chartevents", category="gcs_motor").value_num == 6
    device = event("chartevents", category="IMV")
    assert (device.domain, device.name, device.kind) == (
        "respiratory_support",
        "Endotracheal tube",  # named by its text, as CLIF's device_name
        "action",
    )
    assert device.value_num is None and device.value_text == ""
    assert event("chartevents", category="fio2_set").value_num == pytest.approx(0.5)


@pytest.mark.django_db
def test_unmapped_item_is_kept_with_its_d_items_label(mimic_dir):
    mimic_import(directory=mimic_dir)

    item = event("chartevents", name="Skin Care Site")
    assert (item.category, item.domain, item.value_text, item.source_key) == (
        "",
        "other",
        "left side",
        "row:9",
    )


@pytest.mark.django_db
def test_summary_counts_the_rows_of_unknown_itemids_and_admissions_left_out(mimic_dir):
    summary = mimic_import(directory=mimic_dir)

    notes = "\n".join(summary.notes)
    assert (
        "chartevents: 1 rows of 1 unknown itemids (not in the mapping) imported under "
        "their label without a CLIF category: 229999 Skin Care Site (1 rows)"
    ) in notes
    assert "hosp/admissions: 1 admissions without an ICU stay not imported" in notes
    assert summary.dropped["hosp/transfers"] == {
        "discharge rows (the admissions' hospital-discharge outcome events say it)": 1
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "reader, batch_stays", [("arrow", None), ("pandas", None), ("arrow", 1)]
)
def test_summary_counts_every_row_left_out_or_merged_and_the_events_stored(
    tmp_path, monkeypatch, reader, batch_stays
):
    """Issue 30, item 6: a row that is no event of its own is counted by
    reason; an exact duplicate row is imported once; the summary's events are
    those stored. Batches of one stay route the rows (mimic.routing) first."""
    tables = mimic_tables()
    heart_rate = chart(A1, 220045, "2151-03-01 13:00:00", "88", 88, "bpm")
    tables["icu/chartevents"] += [
        dict(heart_rate),  # an exact duplicate of the first row
        chart(A1, 224642, "2151-03-01 13:00:00", "Oral"),  # onto the 100.4 °F
        chart(A1, 224642, "2151-03-01 15:00:00", "Axillary"),  # no temperature
    ]
    tables["icu/d_items"].append(
        {"itemid": 224642, "label": "Temperature Site", "param_type": "Text"}
    )
    creatinine = tables["hosp/labevents"][0]
    tables["hosp/labevents"] += [
        dict(creatinine),  # an exact duplicate, labevent_id included
        {  # no hadm_id, a patient without any admission
            "labevent_id": 6,
            "subject_id": 10003,
            "itemid": 50912,
            "charttime": "2170-01-01 06:00:00",
            "value": "0.8",
            "valuenum": 0.8,
            "valueuom": "mg/dL",
        },
    ]
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)

    summary = mimic_import(
        directory=write_mimic(tmp_path / "m", tables), batch_stays=batch_stays
    )

    not_imported = (
        "rows of admissions not imported (without an ICU stay, outside the cohort, "
        "or imported before)"
    )
    duplicate = (
        "exact duplicates of an earlier row (equal in every column read), imported once"
    )
    assert summary.dropped["icu/chartevents"] == {
        not_imported: 1,  # the admission without an ICU stay
        duplicate: 1,
        "Temperature Site rows (224642) merged into the temperature charted at "
        "their time (its site)": 1,
        "Temperature Site rows (224642) without a temperature at their time": 1,
    }
    assert summary.dropped["hosp/labevents"] == {
        not_imported: 1,
        duplicate: 1,
        "rows without hadm_id of patients not imported": 1,
        "rows without hadm_id whose time falls in no admission of their patient "
        "imported": 1,  # labevent 3, years before admission A1
    }
    assert summary.events == event_counts() == IMPORTED_ROWS
    assert summary.total_events == Event.objects.count()
    assert (
        Event.objects.filter(category="heart_rate", admission__source_id=A1).count()
        == 1
    )
    assert Event.objects.filter(source_table="labevents", source_key="1").count() == 1
    assert "source rows not imported as events of their own: 9" in str(summary)
    assert summary.as_dict()["dropped"] == summary.dropped


# Text items CLIF keeps in their own tables: categorized and named by their text.
BEDSIDE_TEXT_ITEMS = [
    # itemid, label, charted text -> domain, category, name
    (224093, "Position", "Prone", "position", "prone", "Prone"),
    (224093, "Position", "Left Side", "position", "not_prone", "Left Side"),
    (223758, "Code Status", "DNR / DNI", "code_status", "DNR/DNI", "DNR / DNI"),
    (227290, "CRRT mode", "CVVHDF", "crrt_therapy", "crrt:cvvhdf", "CVVHDF"),
    (
        229314,
        "Ventilator Mode (Hamilton)",
        "ASV",
        "respiratory_support",
        "mode:Other",
        "ASV",
    ),
    (
        227577,
        "BiPap Mode",
        "Spontaneous (S)",
        "respiratory_support",
        "mode:Other",
        "Spontaneous (S)",
    ),
    (
        223849,
        "Ventilator Mode",
        "CMV/ASSIST",
        "respiratory_support",
        "mode:Assist Control-Volume Control",
        "CMV/ASSIST",
    ),
    (
        224056,
        "Braden Activity",
        "Bedfast",
        "patient_assessments",
        "braden_activity",
        "Braden Activity",
    ),
    (
        228300,
        "CAM-ICU MS Change",
        "No",
        "patient_assessments",
        "cam_mental",
        "CAM-ICU MS Change",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_position_code_status_crrt_modes_and_assessments_are_in_their_clif_tables(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    for i, (itemid, label, text, *_rest) in enumerate(BEDSIDE_TEXT_ITEMS):
        tables["icu/chartevents"].append(
            chart(A1, itemid, f"2151-03-02 {10 + i}:00:00", text)
        )
        tables["icu/d_items"].append(
            {"itemid": itemid, "label": label, "param_type": "Text"}
        )
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    for i, (*_item, domain, category, name) in enumerate(BEDSIDE_TEXT_ITEMS):
        found = event("chartevents", time=_t(f"2151-03-02 {10 + i}:00"))
        assert (found.domain, found.category, found.name) == (domain, category, name)
        if domain != "patient_assessments":
            assert found.value_text == ""


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_temperature_site_goes_onto_its_temperature_and_labs_charted_take_storetime(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    tables["icu/chartevents"] += [
        chart(A1, 224642, "2151-03-01 13:00:00", "Oral"),  # the 100.4 °F of row 3
        chart(A1, 224642, "2151-03-01 15:00:00", "Axillary"),  # no temperature
        dict(
            chart(A1, 220224, "2151-03-01 13:10:00", "88", 88, "mmHg"),
            storetime="2151-03-01 13:25:00",
        ),  # Arterial O2 pressure
    ]
    tables["icu/d_items"] += [
        {"itemid": 224642, "label": "Temperature Site", "param_type": "Text"},
        {"itemid": 220224, "label": "Arterial O2 pressure", "param_type": "Numeric"},
    ]
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    temp = event("chartevents", category="temp_c")
    assert (temp.value_num, temp.value_text) == (pytest.approx(38.0), "Oral")
    assert not Event.objects.filter(category="temp_site").exists()
    assert "1 Temperature Site rows (224642) without a temperature" in str(summary)
    po2 = event("chartevents", category="po2_arterial")
    assert po2.time == _t("2151-03-01 13:25")  # its result, as labevents' storetime
    assert (po2.value_text, po2.end_time) == ("arterial", None)


@pytest.mark.django_db
def test_a_blood_gas_takes_its_specimen_from_its_collection(tmp_path):
    """The pO2 of a gas whose pH is charted as venous is venous (no P/F from it);
    a gas whose Specimen Type says ART. is arterial."""
    tables = mimic_tables()
    gas = dict(
        tables["hosp/labevents"][0],
        charttime="2151-03-02 09:00:00",
        storetime="2151-03-02 09:05:00",
        valueuom="mm Hg",
    )
    tables["hosp/labevents"] += [
        dict(gas, labevent_id=11, itemid=50821, value="35", valuenum=35),
        dict(
            gas,
            labevent_id=12,
            charttime="2151-03-02 10:00:00",
            itemid=50821,
            value="90",
            valuenum=90,
        ),
        dict(
            gas,
            labevent_id=13,
            charttime="2151-03-02 10:00:00",
            itemid=52033,
            value="ART.",
            valuenum="",
        ),
    ]
    tables["icu/chartevents"].append(
        chart(A1, 220274, "2151-03-02 09:00:00", "7.31", 7.31)  # PH (Venous)
    )
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    assert event("labevents", source_key="11").value_text == "venous"
    assert event("labevents", source_key="12").value_text == "arterial"
    assert event("labevents", source_key="13").value_text == "ART."
    assert not Event.objects.filter(domain="labs", end_time__isnull=False).exists()


@pytest.mark.django_db
def test_unmapped_inputevents_are_observations(tmp_path):
    tables = mimic_tables()
    tables["icu/inputevents"].append(
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "stay_id": 30001,
            "starttime": "2151-03-01 15:00:00",
            "endtime": "2151-03-01 15:01:00",
            "itemid": 226452,
            "amount": 240,
            "amountuom": "ml",
            "orderid": 9100,
            "linkorderid": 9100,
            "statusdescription": "FinishedRunning",
        }
    )
    tables["icu/d_items"].append(
        {"itemid": 226452, "label": "PO Intake", "linksto": "inputevents"}
    )
    mimic_import(directory=write_mimic(tmp_path / "mimic", tables))

    intake = event("inputevents", name="PO Intake")
    assert (intake.category, intake.kind) == ("", "observation")
    # a mapped drug of the same file is still an action
    assert event("inputevents", category="vasopressin", value_text="start").kind == (
        "action"
    )


@pytest.mark.django_db
def test_procedure_codes_are_coded_records_at_their_date(tmp_path):
    tables = mimic_tables()
    tables["hosp/procedures_icd"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "seq_num": 1,
            "chartdate": "2151-03-02",
            "icd_code": "5A1955Z",
            "icd_version": 10,
        },
    ]
    tables["hosp/hcpcsevents"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "chartdate": "2151-03-03",
            "hcpcs_cd": "99291",
            "seq_num": 1,
            "short_description": "Critical care",
        },
    ]
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    coded = Event.objects.filter(kind="coded").order_by("time")
    assert list(
        coded.values_list("time", "kind", "category", "name", "value_text")
    ) == [
        (_t("2151-03-02 00:00"), "coded", "ICD10PCS", "ICD10PCS 5A1955Z", "5A1955Z"),
        (_t("2151-03-03 00:00"), "coded", "CPT", "CPT 99291", "99291"),
    ]


@pytest.mark.django_db
def test_labs_use_result_time_and_labs_without_hadm_id_join_their_admission(mimic_dir):
    mimic_import(directory=mimic_dir)

    creatinine = event("labevents", category="creatinine")
    assert (creatinine.value_num, creatinine.unit, creatinine.source_key) == (
        1.2,
        "mg/dL",
        "1",
    )
    assert creatinine.time.isoformat() == "2151-03-02T07:10:00+00:00"  # storetime
    lactate = event("labevents", category="lactate")
    assert lactate.admission.source_id == str(A1) and lactate.value_num == 4.1
    assert lactate.source_key == "2"
    assert not Event.objects.filter(source_table="labevents", source_key="3").exists()
    calcium = event("labevents", category="calcium_ionized")  # mmol/L x4 -> mg/dL
    assert calcium.value_num == pytest.approx(4.4) and calcium.unit == "mg/dL"


@pytest.mark.django_db
def test_infusions_become_mar_records_per_order_with_rates_as_in_section_5(mimic_dir):
    """An order's rows (one linkorderid) become CLIF's MAR records: a start, a
    dose change where the next row takes over with its rate, a stop (0) at the
    end of the last row; rates converted as CLINICAL_CONCEPTS.md section 5 says."""
    mimic_import(directory=mimic_dir)

    norepi = Event.objects.filter(source_table="inputevents", category="norepinephrine")
    assert sorted(
        norepi.values_list(
            "time", "value_text", "value_num", "unit", "order_id", "source_key"
        )
    ) == [
        (_t("2151-03-01 14:00"), "start", 0.1, "mcg/kg/min", "9001", "9001"),
        (
            _t("2151-03-01 16:00"),
            "dose_change",
            pytest.approx(0.2),
            "mcg/kg/min",
            "9001",
            "9002",
        ),  # mg/kg/min x1000
        (_t("2151-03-01 18:00"), "stop", 0.0, "mcg/kg/min", "9001", "9002:stop"),
    ]
    assert set(norepi.values_list("domain", flat=True)) == {
        "medication_admin_continuous"
    }
    assert not norepi.filter(end_time__isnull=False).exists()
    vaso = Event.objects.filter(source_table="inputevents", category="vasopressin")
    assert sorted(vaso.values_list("value_text", "value_num", "unit")) == [
        ("start", pytest.approx(2.4), "units/hour"),  # units/min x60
        ("stop", 0.0, "units/hour"),
    ]
    bolus = event("inputevents", category="sodium chloride")
    assert (bolus.domain, bolus.value_num, bolus.unit, bolus.value_text) == (
        "medication_admin_intermittent",
        500,
        "mL",
        "given",
    )


def _t(text: str):
    from datetime import datetime

    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.django_db
def test_a_paused_infusion_restarted_at_once_is_going_and_after_a_gap_starts_again(
    tmp_path,
):
    tables = mimic_tables()
    base = dict(
        tables["icu/inputevents"][0],
        itemid=221906,
        linkorderid=7000,
        rateuom="mcg/kg/min",
    )
    tables["icu/inputevents"] = [
        dict(
            base,
            orderid=7001,
            starttime="2151-03-01 13:00:00",
            endtime="2151-03-01 14:00:00",
            rate=0.1,
            statusdescription="Paused",
        ),
        dict(
            base,
            orderid=7002,
            starttime="2151-03-01 14:00:00",
            endtime="2151-03-01 15:00:00",
            rate=0.1,
            statusdescription="Paused",
        ),
        dict(
            base,
            orderid=7003,
            starttime="2151-03-01 16:00:00",
            endtime="2151-03-01 17:00:00",
            rate=0.3,
            statusdescription="Stopped",
        ),
    ]
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    records = Event.objects.filter(source_table="inputevents").order_by("time", "id")
    assert list(records.values_list("time", "value_text", "value_num")) == [
        (_t("2151-03-01 13:00"), "start", 0.1),
        (_t("2151-03-01 14:00"), "going", 0.1),
        (_t("2151-03-01 15:00"), "stop", 0.0),
        (_t("2151-03-01 16:00"), "start", pytest.approx(0.3)),
        (_t("2151-03-01 17:00"), "stop", 0.0),
    ]


@pytest.mark.django_db
def test_output_procedures_medications_cultures_and_transfers_are_mapped(mimic_dir):
    mimic_import(directory=mimic_dir)

    urine = Event.objects.filter(source_table="outputevents")
    assert set(urine.values_list("domain", "category", "kind")) == {
        ("output", "indwelling_urinary_catheter", "observation")
    }
    line = event("procedureevents", category="arterial_line")
    assert (line.kind, line.domain, line.value_text, line.source_key) == (
        "action",
        "patient_procedures",
        "Left Radial",
        "8001",
    )
    assert line.end_time.isoformat() == "2151-03-03T12:30:00+00:00"
    intubation = event("procedureevents", category="intubation")
    # a timed procedure is a decision, though its domain's other records are
    # derived from their charting (windows.actions.PROCEDURE_ACTIONS)
    assert (intubation.domain, intubation.kind) == ("respiratory_support", "action")
    assert event("datetimeevents", source_key="row:1").domain == "crrt_therapy"

    vanco = event("emar", source_key="10001-1")
    assert (vanco.kind, vanco.category, vanco.value_num, vanco.unit) == (
        "action",
        "vancomycin",
        1000,
        "mg",
    )
    assert vanco.value_text == "Administered, IV"
    held = event("emar", source_key="10002-1")
    assert (held.kind, held.category, held.value_text) == (
        "observation",
        "heparin",
        "Not Given",
    )

    # Drawn at specimen time (CLINICAL_CONCEPTS.md 10b), resulted at its result
    # time: the organism is not known before.
    drawn = event("microbiologyevents", source_key="specimen:1")
    assert (drawn.domain, drawn.category, drawn.name, drawn.value_text) == (
        "microbiology_culture",
        "blood culture",
        "Blood Culture, Routine",
        "culture drawn",
    )
    assert drawn.time.isoformat() == "2151-03-01T14:00:00+00:00"
    assert drawn.end_time.isoformat() == "2151-03-03T10:00:00+00:00"
    result = event("microbiologyevents", source_key="701")
    assert (result.domain, result.category, result.value_text) == (
        "labs",
        "culture_result",
        "ESCHERICHIA COLI: CEFEPIME S",
    )
    assert result.time.isoformat() == "2151-03-03T10:00:00+00:00"
    assert event("microbiologyevents", source_key="702").value_text == "no growth"

    icu = event("transfers", source_key="602")
    assert (icu.domain, icu.category, icu.end_time.isoformat()) == (
        "adt",
        "icu",
        "2151-03-04T12:00:00+00:00",
    )
    assert event("transfers", source_key="601").category == "ed"


@pytest.mark.django_db
def test_suspected_infection_starts_at_the_culture_draw_not_at_its_result(mimic_dir):
    """Culture drawn at 14:00 (end of ICU hour 2), resulted two days later,
    vancomycin at 20:00: suspicion of infection from the draw (CLINICAL_CONCEPTS.md
    10b), not from hour 46 when the result came."""
    from windows.tracks import stay_tracks_build

    mimic_import(directory=mimic_dir)
    tracks = stay_tracks_build(stay=Stay.objects.get(source_id="30001"))

    suspected = dict(zip(tracks.hours, tracks.columns["suspected_infection"]))
    assert suspected[1] == 0 and suspected[2] == 1  # hour 2 ends at 14:00


# --- re-runs, batches, progress ---------------------------------------------------------


@pytest.mark.django_db
def test_rerun_imports_nothing_twice(mimic_dir):
    mimic_import(directory=mimic_dir)
    before = (counts(), event_counts())

    summary = mimic_import(directory=mimic_dir)

    assert (counts(), event_counts()) == before
    assert (
        summary.patients,
        summary.admissions,
        summary.stays,
        summary.total_events,
    ) == (0, 0, 0, 0)
    assert summary.skipped_admissions == 2
    assert "2 admissions already imported, skipped" in str(summary)


@pytest.mark.django_db
def test_batches_of_one_stay_import_the_same_and_report_progress(mimic_dir):
    seen = []
    progress = Progress(
        sinks=[lambda done, total, label: seen.append((done, total, label))]
    )

    summary = mimic_import(directory=mimic_dir, progress=progress, batch_stays=1)

    assert event_counts() == IMPORTED_ROWS and summary.events == IMPORTED_ROWS
    steps = 1 + 9  # patients/admissions/stays, then nine event files
    assert seen[0][:2] == (0, 2 * steps)
    assert seen[-1][:2] == (2 * steps, 2 * steps)
    assert any(label == "chartevents: 11 rows" for _, _, label in seen)


def chart_events() -> list[tuple]:
    return sorted(
        Event.objects.filter(source_table="chartevents").values_list(
            "admission__source_id",
            "time",
            "end_time",
            *EVENT_VALUE_FIELDS,
            "source_key",
        )
    )


def chart_events_both_ways(directory: Path, monkeypatch) -> tuple[list, list]:
    """chartevents imported by ChartEventsStep (Arrow), then, in a clean
    database, by the general pandas path."""
    with transaction.atomic():
        mimic_import(directory=directory)
        arrow = chart_events()
        transaction.set_rollback(True)
    monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    mimic_import(directory=directory)
    return arrow, chart_events()


@pytest.mark.django_db
def test_chartevents_read_by_arrow_are_those_of_the_pandas_reader(
    tmp_path, monkeypatch
):
    """The Arrow reader and transform of chartevents give the events of the
    pandas path, row for row, on the cases that differ between the two
    libraries: missing-value spellings, quoted commas and line breaks, a unit
    beyond its column's length, a device with trailing spaces, rows of another
    admission or without one, times out of order, fractional seconds."""
    tables = mimic_tables()
    tables["icu/chartevents"] += [
        chart(A1, 220045, "2151-03-01 12:00:00", "NA", "", "bpm"),
        chart(A1, 229999, "2151-03-01 12:30", '"quoted, with\na line break"', ""),
        chart(A1, 229998, "2151-03-01 12:30:00", "n/a", "NaN", "x" * 40),
        chart(A1, 226732, "2151-03-01 12:45:00", "Nasal cannula  ", ""),
        chart(A1, 223835, "2151-03-01 11:00:00", "0.4", "0.4"),
        chart(A2, 220045, "2161-05-01 10:30:00.5", "null", "", ""),
        chart("", 220045, "2151-03-01 12:00:00", "90", 90, "bpm"),
    ]
    arrow, pandas = chart_events_both_ways(
        write_mimic(tmp_path / "m", tables), monkeypatch
    )

    assert len(arrow) == IMPORTED_ROWS["chartevents"] + 6
    assert arrow == pandas


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_a_chartevents_line_with_an_extra_field_is_rejected_naming_its_line(
    tmp_path, monkeypatch, reader
):
    """A line with more fields than the header is an error on either reader
    (pandas reading only some columns would take it without a word), and
    nothing of its batch is written."""
    directory = write_mimic(tmp_path / "m", mimic_tables())
    path = directory / "icu" / "chartevents.csv.gz"
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    lines[3] += ",an extra field"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)

    with pytest.raises(SourceDataError, match="Expected 11 fields in line 4, saw 12"):
        mimic_import(directory=directory)
    assert counts() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_a_labevents_line_with_an_extra_field_is_rejected_naming_its_line(tmp_path):
    directory = write_mimic(tmp_path / "m", mimic_tables())
    path = directory / "hosp" / "labevents.csv.gz"
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    lines[2] += ",an extra field"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")

    with pytest.raises(SourceDataError, match="Expected 16 fields in line 3, saw 17"):
        mimic_import(directory=directory)
    assert counts() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_a_patient_seen_before_gets_the_new_admission(tmp_path):
    tables = mimic_tables()
    first = write_mimic(
        tmp_path / "one", {**tables, "icu/icustays": tables["icu/icustays"][:1]}
    )
    mimic_import(directory=first)

    summary = mimic_import(directory=write_mimic(tmp_path / "both", tables))

    assert (summary.patients, summary.admissions, summary.skipped_admissions) == (
        1,
        1,
        1,
    )
    assert Patient.objects.count() == 2 and Admission.objects.count() == 2


@pytest.mark.django_db
def test_missing_optional_files_are_noted(tmp_path):
    tables = mimic_tables()
    for name in ("icu/chartevents", "hosp/emar", "hosp/emar_detail", "hosp/transfers"):
        del tables[name]
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    assert "chartevents" not in event_counts()
    assert any("icu/chartevents not found" in note for note in summary.notes)
    assert any("no medication events" in note for note in summary.notes)


@pytest.mark.django_db
def test_prescriptions_stand_in_for_emar(tmp_path):
    tables = mimic_tables()
    del tables["hosp/emar"], tables["hosp/emar_detail"]
    tables["hosp/prescriptions"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "pharmacy_id": 1,
            "starttime": "2151-03-01 18:00:00",
            "stoptime": "2151-03-05 18:00:00",
            "drug_type": "MAIN",
            "drug": "Vancomycin",
            "dose_val_rx": "1000",
            "dose_unit_rx": "mg",
            "route": "IV",
        },
        {"subject_id": 10001, "hadm_id": A1, "pharmacy_id": 2, "drug": "Heparin"},
    ]
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    rx = event("prescriptions", source_key="row:1")
    assert (rx.kind, rx.category, rx.value_num, rx.unit, rx.value_text) == (
        "action",
        "vancomycin",
        1000,
        "mg",
        "IV",
    )
    assert any("medications from hosp/prescriptions" in note for note in summary.notes)
    # An order without a starttime cannot be placed in time.
    assert event_counts()["prescriptions"] == 1
    assert summary.dropped["hosp/prescriptions"]["rows without a time"] == 1


# --- errors: the message names file, row and column, and nothing is written ---------------


def assert_rejected(directory: Path, *parts: str) -> None:
    with pytest.raises(SourceDataError) as info:
        mimic_import(directory=directory)
    message = str(info.value.messages[0])
    for part in parts:
        assert part in message, message
    assert counts() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_missing_required_file_is_rejected(tmp_path):
    tables = mimic_tables()
    del tables["icu/icustays"]
    assert_rejected(
        write_mimic(tmp_path / "m", tables), "icu/icustays", "required file is missing"
    )


@pytest.mark.django_db
def test_missing_column_of_an_event_file_is_rejected_before_any_write(tmp_path):
    directory = write_mimic(tmp_path / "m", mimic_tables())
    path = directory / "hosp" / "labevents.csv.gz"
    with gzip.open(path, "rt") as fh:
        text = fh.read().replace(",valuenum,", ",value_number,", 1)
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    assert_rejected(directory, "labevents.csv.gz", "column valuenum", "missing")


# A bad value in one row: the file, the row and the column are named, and
# nothing is written (the batch rolled back).
BAD_ROWS = {
    "unparseable time in an event row": (
        "icu/chartevents",
        4,
        {"charttime": "2151-03-01 25:99"},
        ("chartevents.csv.gz", "row 5", "column charttime", "2151-03-01 25:99"),
    ),
    "an infusion ending before it starts": (
        "icu/inputevents",
        0,
        {"endtime": "2151-03-01 13:00:00"},
        ("inputevents.csv.gz", "row 1", "column endtime", "is before starttime"),
    ),
    "unparseable admission time": (
        "hosp/admissions",
        1,
        {"admittime": "yesterday"},
        ("admissions.csv", "row 2", "column admittime"),
    ),
    "icu outtime before intime": (
        "icu/icustays",
        1,
        {"outtime": "2161-05-01 09:00:00"},
        ("icustays.csv", "row 2", "column outtime"),
    ),
    "icu stay of an unknown admission": (
        "icu/icustays",
        1,
        {"hadm_id": 29999},
        ("icustays.csv", "row 2", "column hadm_id", "29999"),
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_a_bad_value_in_a_row_is_rejected(tmp_path, case):
    table, row, values, parts = BAD_ROWS[case]
    tables = mimic_tables()
    tables[table][row].update(values)
    assert_rejected(write_mimic(tmp_path / "m", tables), *parts)


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_a_date_without_a_time_in_a_time_column_is_rejected(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    tables["icu/chartevents"][4]["charttime"] = "2151-03-01"
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    assert_rejected(
        write_mimic(tmp_path / "m", tables),
        "chartevents.csv.gz",
        "row 5",
        "column charttime",
        "'2151-03-01' is a date without a time",
    )


@pytest.mark.django_db
def test_icu_stay_of_an_unknown_patient_is_rejected(tmp_path):
    tables = mimic_tables()
    del tables["hosp/patients"][1]
    assert_rejected(
        write_mimic(tmp_path / "m", tables),
        "icustays.csv",
        "row 2",
        "column subject_id",
        "10002",
    )


# --- the command -----------------------------------------------------------------------


@pytest.mark.django_db
def test_command_prints_progress_and_summary(mimic_dir):
    out, err = io.StringIO(), io.StringIO()

    call_command(
        "import_mimic", str(mimic_dir), "--batch-stays", "1", stdout=out, stderr=err
    )

    assert (
        "MIMIC-IV import: 2 patients, 2 admissions, 2 ICU stays, 37 events"
        in out.getvalue()
    )
    assert "chartevents" in out.getvalue()
    assert "[" in err.getvalue() and "/20" in err.getvalue()


@pytest.mark.django_db
def test_command_turns_a_data_error_into_a_command_error(tmp_path):
    tables = mimic_tables()
    tables["icu/icustays"][1]["hadm_id"] = 29999
    with pytest.raises(CommandError, match="column hadm_id"):
        call_command(
            "import_mimic",
            str(write_mimic(tmp_path / "m", tables)),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert counts() == (0, 0, 0, 0)


# --- the mapping agrees with the CLIF consortium's -----------------------------------------


def _consortium(name: str) -> list[dict]:
    path = MAPPINGS / name
    if not path.exists():
        pytest.skip(
            f"{path} not found (the shared mapping tables sit beside the repository)"
        )
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _unit(text: str) -> str:
    return (
        text.strip().lower().replace("*", "^").replace("µ", "u").replace("hr", "hour")
    )


def test_vitals_mapping_agrees_with_the_consortium():
    rows = [
        r
        for r in _consortium("vitals.csv")
        if r["vital_category"] not in ("", "NO MAPPING", "MAPPED ELSEWHERE")
    ]
    assert rows
    for r in rows:
        if int(r["itemid"]) == TEMPERATURE_SITE_ITEM:
            continue  # the site of a temperature: its meas_site_name, not a vital
        item = CHARTEVENTS[int(r["itemid"])]
        assert (item.domain, item.category) == (Domain.VITALS, r["vital_category"]), r[
            "itemid"
        ]


def test_labs_mapping_agrees_with_the_consortium():
    rows = [
        r
        for r in _consortium("labs.csv")
        if r["itemid"] and r["decision"] not in ("NO MAPPING", "NOT AVAILABLE")
    ]
    assert rows
    for r in rows:
        table = CHARTEVENTS if r["fluid"] == "chartevents" else LABEVENTS
        item = table[int(r["itemid"])]
        assert (item.domain, item.category) == (Domain.LABS, r["lab_category"]), r[
            "itemid"
        ]
        assert item.factor == float(r["conversion_multiplier"] or 1), r["itemid"]
        if r["target_uom"].strip():
            assert _unit(item.unit) == _unit(r["target_uom"]), r["itemid"]


# Categories of the consortium's med_category.csv that its CLIF demo and the
# mCIDE list (mcide/clif_medication_admin_*_med_categories.csv) name otherwise.
MCIDE_MEDICATION_NAMES = {
    "dextrose_5_water": "dextrose_in_water_d5w",
    "dextrose_10_water": "dextrose",
    "dextrose_other": "dextrose",
}


def test_medication_and_urine_mapping_agrees_with_the_consortium():
    for r in _consortium("med_category.csv"):
        if r["linksto"] == "inputevents" and r["decision"] in (
            "CONTINUOUS",
            "INTERMITTENT",
            "BOTH",
        ):
            item = INPUTEVENTS[int(r["itemid"])]
            category = MCIDE_MEDICATION_NAMES.get(r["med_category"], r["med_category"])
            assert (item.category, item.delivery) == (
                category,
                r["decision"].lower(),
            ), r["itemid"]
    for r in _consortium("output.csv"):
        if r["decision"] == "TO MAP":
            item = OUTPUTEVENTS[int(r["itemid"])]
            assert item.category == r["output_category"], r["itemid"]


def _mcide(name: str) -> set[str]:
    path = MAPPINGS.parent / "mcide" / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {next(iter(r.values())) for r in rows}


def test_medication_assessment_input_and_output_categories_are_mcide_categories():
    medications = _mcide(
        "clif_medication_admin_continuous_med_categories.csv"
    ) | _mcide("clif_medication_admin_intermittent_med_categories.csv")
    mapped = [*INPUTEVENTS.values(), *CHARTEVENTS.values(), *OUTPUTEVENTS.values()]
    assert {
        m.category for m in mapped if m.domain.startswith("medication_admin")
    } <= medications
    assert {m.category for m in mapped if m.domain == Domain.ASSESSMENTS} <= _mcide(
        "clif_patient_assessment_categories.csv"
    )
    assert {m.category for m in mapped if m.domain == Domain.INPUT} <= _mcide(
        "clif_input_category.csv"
    )
    assert {m.category for m in mapped if m.domain == Domain.OUTPUT} <= _mcide(
        "clif_output_categories.csv"
    )


def test_every_itemid_named_in_clinical_concepts_is_mapped():
    concepts = MAPPINGS.parent.parent / "CLINICAL_CONCEPTS.md"
    if not concepts.exists():
        pytest.skip(f"{concepts} not found")
    tables = (
        CHARTEVENTS,
        LABEVENTS,
        INPUTEVENTS,
        OUTPUTEVENTS,
        PROCEDUREEVENTS,
        DATETIMEEVENTS,
    )
    known = {itemid for table in tables for itemid in table}
    text = concepts.read_text(encoding="utf-8")
    named = {int(m) for m in re.findall(r"\b(2\d{5}|5\d{4})\b", text)}
    assert sorted(named - known) == []


def test_the_arrow_reader_reads_as_missing_exactly_what_pandas_does():
    from pandas._libs.parsers import STR_NA_VALUES

    from windows.importers.base import _PANDAS_NA

    assert set(_PANDAS_NA) == set(STR_NA_VALUES)


@pytest.mark.django_db
def test_an_error_in_a_later_batch_says_what_was_imported_and_a_rerun_completes_it(
    tmp_path,
):
    """MIMIC-IV commits batch by batch (a full copy is too large for one
    transaction): the error names the row, says which batches stay, and a re-run
    after the fix imports the rest."""
    tables = mimic_tables()
    last = max(tables["hosp/admissions"], key=lambda a: a["admittime"])["hadm_id"]
    row = next(
        i for i, r in enumerate(tables["icu/chartevents"]) if r["hadm_id"] == last
    )
    good = tables["icu/chartevents"][row]["charttime"]
    tables["icu/chartevents"][row]["charttime"] = "2151-03-01 25:99"
    directory = write_mimic(tmp_path / "m", tables)
    with pytest.raises(SourceDataError) as info:
        mimic_import(directory=directory, batch_stays=1)
    message = str(info.value.messages[0])
    assert f"row {row + 1}" in message and "column charttime" in message
    assert "batch 2 of 2 rolled back" in message
    assert "1 earlier batch(es), 1 admissions, were imported" in message
    assert "running the import again skips them" in message
    assert Admission.objects.count() == 1
    assert not Admission.objects.filter(source_id=str(last)).exists()

    tables["icu/chartevents"][row]["charttime"] = good
    summary = mimic_import(
        directory=write_mimic(tmp_path / "fixed", tables), batch_stays=1
    )
    assert summary.skipped_admissions == 1 and summary.admissions == 1
    assert event_counts() == IMPORTED_ROWS


@pytest.mark.django_db
@pytest.mark.parametrize("age", ["40000", "-3", "61.5"])
def test_an_age_that_is_no_whole_human_age_is_rejected_before_any_write(tmp_path, age):
    tables = mimic_tables()
    tables["hosp/patients"][1]["anchor_age"] = age
    assert_rejected(
        write_mimic(tmp_path / "m", tables), "patients", "row 2", "column anchor_age"
    )
