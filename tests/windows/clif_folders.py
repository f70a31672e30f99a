"""Small CLIF folders the importer tests write from the demo, and the row
counts an import changes (or, refused, must leave alone)."""

from pathlib import Path

import pandas as pd

from windows.models import Admission, Event, Patient, Stay


def clinical_counts() -> tuple[int, int, int, int]:
    """Patients, admissions, stays and events in the database."""
    return (
        Patient.objects.count(),
        Admission.objects.count(),
        Stay.objects.count(),
        Event.objects.count(),
    )


def icu_hospitalizations(demo: Path):
    """The demo's hospitalization ids with an ICU segment, as strings, in the
    order the ADT table first names them."""
    adt = pd.read_parquet(demo / "clif_adt.parquet")
    return adt[adt.location_category == "icu"].hospitalization_id.astype(str).unique()


def clif_csv_folder(folder: Path, demo: Path, hospitalizations) -> Path:
    """``folder`` holding the demo's patient, hospitalization, ADT, vitals and
    labs tables as csv files, cut to ``hospitalizations``."""
    for name in ["patient", "hospitalization", "adt", "vitals", "labs"]:
        frame = pd.read_parquet(demo / f"clif_{name}.parquet")
        if "hospitalization_id" in frame:
            frame = frame[frame.hospitalization_id.astype(str).isin(hospitalizations)]
        frame.to_csv(folder / f"clif_{name}.csv", index=False)
    return folder
