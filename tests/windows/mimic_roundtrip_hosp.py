"""The MIMIC-IV folder that tests/windows/mimic_roundtrip.py writes from the CLIF
demo, and its hospital files: patients, admissions, transfers, ICU stays,
diagnoses and coded procedures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


class MimicFolder:
    """The CLIF demo read table by table, and the MIMIC-IV CSV files written from
    it into ``out/hosp`` and ``out/icu``, with the rows written per file."""

    def __init__(self, clif_dir: Path, out: Path) -> None:
        self.clif_dir, self.out = Path(clif_dir), Path(out)
        (self.out / "hosp").mkdir(parents=True, exist_ok=True)
        (self.out / "icu").mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {}

    def read(self, name):
        return pd.read_parquet(self.clif_dir / f"clif_{name}.parquet")

    def write(self, frame: pd.DataFrame, path: str) -> None:
        frame.to_csv(self.out / path, index=False, date_format="%Y-%m-%d %H:%M:%S")
        self.counts[path] = len(frame)


def naive(values) -> pd.Series:
    return pd.to_datetime(values, utc=True).dt.tz_localize(None)


def write_hospital_files(folder: MimicFolder):
    """Write the hospital files; returns the CLIF hospitalizations, and each
    admission's subject_id and (first) ICU stay_id by hadm_id."""
    patient = folder.read("patient")
    hosp = folder.read("hospitalization")
    adt = folder.read("adt")
    for frame in (patient, hosp, adt):
        for col in ("patient_id", "hospitalization_id"):
            if col in frame:
                frame[col] = frame[col].astype(str)
    hosp["subject_id"] = hosp["patient_id"].astype("int64")
    hosp["hadm_id"] = hosp["hospitalization_id"].astype("int64")
    subject_of = hosp.set_index("hadm_id")["subject_id"]

    _write_patients(folder, patient, hosp)
    _write_admissions(folder, patient, hosp)
    adt = _write_transfers(folder, adt, hosp, subject_of)
    stay_of = _write_icustays(folder, adt, subject_of)
    _write_diagnoses(folder, subject_of)
    _write_procedures(folder, subject_of)
    return hosp, subject_of, stay_of


def _write_patients(folder, patient, hosp) -> None:
    """patients: anchor age and year at the patient's first admission."""
    first = hosp.sort_values("admission_dttm").groupby("patient_id").first()
    death = pd.to_datetime(patient["death_dttm"], utc=True)
    folder.write(
        pd.DataFrame(
            {
                "subject_id": patient["patient_id"].astype("int64"),
                "gender": patient["sex_name"],
                "anchor_age": patient["patient_id"]
                .map(first["age_at_admission"])
                .astype("Int64"),
                "anchor_year": patient["patient_id"]
                .map(first["admission_dttm"].dt.year)
                .astype("Int64"),
                "anchor_year_group": "2017 - 2019",
                "dod": death.dt.tz_localize(None).dt.strftime("%Y-%m-%d"),
            }
        ),
        "hosp/patients.csv",
    )


def _write_admissions(folder, patient, hosp) -> None:
    expired = hosp["discharge_category"].eq("Expired").fillna(False).astype(bool)
    death_of = patient.set_index("patient_id")["death_dttm"]
    deathtime = pd.to_datetime(hosp["patient_id"].map(death_of), utc=True).where(
        expired
    )
    folder.write(
        pd.DataFrame(
            {
                "subject_id": hosp["subject_id"],
                "hadm_id": hosp["hadm_id"],
                "admittime": naive(hosp["admission_dttm"]),
                "dischtime": naive(hosp["discharge_dttm"]),
                "deathtime": deathtime.dt.tz_localize(None),
                "admission_type": hosp["admission_type_name"],
                "admit_provider_id": None,
                "admission_location": None,
                "discharge_location": hosp["discharge_name"],
                "insurance": None,
                "language": None,
                "marital_status": None,
                "race": None,
                "edregtime": None,
                "edouttime": None,
                "hospital_expire_flag": expired.astype(int),
            }
        ),
        "hosp/admissions.csv",
    )


def _write_transfers(folder, adt, hosp, subject_of) -> pd.DataFrame:
    """transfers: every ADT segment, and MIMIC-IV's discharge row per admission;
    returns the ADT segments in time order with their hadm_id."""
    adt = adt.sort_values(["hospitalization_id", "in_dttm"]).reset_index(drop=True)
    adt["hadm_id"] = adt["hospitalization_id"].astype("int64")
    eventtype = np.where(adt["location_category"].eq("ed"), "ED", "transfer")
    first_row = ~adt["hadm_id"].duplicated()
    eventtype = np.where(first_row & (eventtype != "ED"), "admit", eventtype)
    transfers = pd.DataFrame(
        {
            "subject_id": adt["hadm_id"].map(subject_of),
            "hadm_id": adt["hadm_id"],
            "transfer_id": 30_000_000 + np.arange(len(adt)),
            "eventtype": eventtype,
            "careunit": adt["location_name"],
            "intime": naive(adt["in_dttm"]),
            "outtime": naive(adt["out_dttm"]),
        }
    )
    discharge = pd.DataFrame(
        {
            "subject_id": hosp["subject_id"],
            "hadm_id": hosp["hadm_id"],
            "transfer_id": 39_000_000 + np.arange(len(hosp)),
            "eventtype": "discharge",
            "careunit": None,
            "intime": naive(hosp["discharge_dttm"]),
            "outtime": pd.NaT,
        }
    )
    folder.write(
        pd.concat([transfers, discharge.dropna(axis=1, how="all")], ignore_index=True),
        "hosp/transfers.csv",
    )
    return adt


def _write_icustays(folder, adt, subject_of) -> pd.Series:
    """icustays: contiguous ICU segments, as MIMIC-IV (and the CLIF importer) merge
    them; returns each admission's first stay_id."""
    icu = adt[adt["location_category"].eq("icu")].sort_values(["hadm_id", "in_dttm"])
    stays = []
    for hadm, group in icu.groupby("hadm_id", sort=True):
        run = None
        for r in group.itertuples():
            if run is not None and r.in_dttm <= run["outtime"]:
                run["outtime"] = max(run["outtime"], r.out_dttm)
                run["last_careunit"] = r.location_name
                continue
            if run is not None:
                stays.append(run)
            run = {
                "subject_id": int(subject_of[hadm]),
                "hadm_id": int(hadm),
                "first_careunit": r.location_name,
                "last_careunit": r.location_name,
                "intime": r.in_dttm,
                "outtime": r.out_dttm,
            }
        stays.append(run)
    stays = pd.DataFrame(stays)
    stays = stays[stays["outtime"] > stays["intime"]].reset_index(drop=True)
    stays.insert(2, "stay_id", 30_000_000 + np.arange(len(stays)))
    stays["los"] = (stays["outtime"] - stays["intime"]).dt.total_seconds() / 86400
    stays["intime"], stays["outtime"] = naive(stays["intime"]), naive(stays["outtime"])
    folder.write(stays, "icu/icustays.csv")
    return stays.drop_duplicates("hadm_id").set_index("hadm_id")["stay_id"]


def _write_diagnoses(folder, subject_of) -> None:
    """diagnoses: the primary diagnosis first, then file order (the CLIF
    importer's rank)."""
    dx = folder.read("hospital_diagnosis")
    dx["hadm_id"] = dx["hospitalization_id"].astype(str).astype("int64")
    dx["_order"] = np.arange(len(dx))
    dx["_primary"] = dx["diagnosis_primary"].fillna(0).astype(int).eq(1)
    dx = dx.sort_values(
        ["hadm_id", "_primary", "_order"], ascending=[True, False, True]
    )
    folder.write(
        pd.DataFrame(
            {
                "subject_id": dx["hadm_id"].map(subject_of),
                "hadm_id": dx["hadm_id"],
                "seq_num": dx.groupby("hadm_id").cumcount() + 1,
                "icd_code": dx["diagnosis_code"],
                "icd_version": np.where(
                    dx["diagnosis_code_format"].str.contains("10"), 10, 9
                ),
            }
        ),
        "hosp/diagnoses_icd.csv",
    )


def _write_procedures(folder, subject_of) -> None:
    """Coded procedures: ICD codes in procedures_icd, CPT/HCPCS in hcpcsevents,
    each with its date only."""
    proc = folder.read("patient_procedures")
    proc["hadm_id"] = proc["hospitalization_id"].astype(str).astype("int64")
    date = naive(proc["procedure_billed_dttm"]).dt.strftime("%Y-%m-%d")
    icd = proc["procedure_code_format"].str.startswith("ICD")
    p = proc[icd]
    folder.write(
        pd.DataFrame(
            {
                "subject_id": p["hadm_id"].map(subject_of),
                "hadm_id": p["hadm_id"],
                "seq_num": p.groupby("hadm_id").cumcount() + 1,
                "chartdate": date[icd],
                "icd_code": p["procedure_code"],
                "icd_version": np.where(
                    p["procedure_code_format"].str.contains("10"), 10, 9
                ),
            }
        ),
        "hosp/procedures_icd.csv",
    )
    p = proc[~icd]
    folder.write(
        pd.DataFrame(
            {
                "subject_id": p["hadm_id"].map(subject_of),
                "hadm_id": p["hadm_id"],
                "chartdate": date[~icd],
                "hcpcs_cd": p["procedure_code"],
                "seq_num": p.groupby("hadm_id").cumcount() + 1,
                "short_description": "",
            }
        ),
        "hosp/hcpcsevents.csv",
    )
