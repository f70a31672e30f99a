"""Cohort-first MIMIC-IV import: the stays to import chosen from patients,
admissions and icustays alone, before any event file is read: drawn as
``cohort_build`` draws a cohort (windows.cohort.cohort_draw: one stay per patient,
outcome x length strata balanced, reproducible from the seed), or listed in a
file of stay_ids."""

from __future__ import annotations

import re
from pathlib import Path

from windows.cohort import cohort_draw
from windows.importers.base import SourceDataError
from windows.importers.mimic.patients_admissions_stays import (
    PatientsAdmissionsStays,
    _admission_death,
    _disposition,
)
from windows.importers.mimic.reading import _py
from windows.models import Admission, Outcome, Source

# cohort_build's defaults (windows.cohort): stays shorter than this are not drawn,
# and a stay this long or longer is a long stay.
MIN_HOURS = 4
LONG_STAY_HOURS = 96


def stay_outcomes(cohort: PatientsAdmissionsStays) -> dict[int, str]:
    """Each stay's hospital outcome as the import will store it (Stay.
    hospital_outcome: died if its admission ends in death, as ``_write_cohort``
    decides)."""
    died: dict[int, bool] = {}
    for hadm in cohort.stays["hadm_id"].unique():
        row = cohort.admissions.loc[hadm]
        admission = Admission(
            admit_time=_py(row["admittime"]),
            discharge_time=_py(row["dischtime"]),
            discharge_disposition=_disposition(
                row["discharge_location"], expired=row["expired"]
            ),
        )
        death = _admission_death(
            admission,
            deathtime=_py(row["deathtime"]),
            patient_death=_py(cohort.deaths.get(row["subject_id"])),
        )
        died[int(hadm)] = death is not None
    return {
        int(stay): Outcome.DIED if died[int(hadm)] else Outcome.SURVIVED
        for stay, hadm in zip(cohort.stays["stay_id"], cohort.stays["hadm_id"])
    }


def draw_stays(
    cohort: PatientsAdmissionsStays, *, size: int, seed: int
) -> tuple[list[int], dict]:
    """``size`` stay_ids drawn with cohort_build's balancing, and its summary."""
    if size < 1:
        raise SourceDataError(f"cohort size must be at least 1, not {size}")
    outcomes = stay_outcomes(cohort)
    stays = cohort.stays
    hours = (stays["outtime"] - stays["intime"]).dt.total_seconds() / 3600.0
    candidates = [
        (
            (Source.MIMIC.value, str(int(subject))),
            (Source.MIMIC.value, str(int(stay))),
            int(stay),
            outcomes[int(stay)],
            float(h),
        )
        for subject, stay, h in zip(stays["subject_id"], stays["stay_id"], hours)
        if h >= MIN_HOURS
    ]
    chosen, summary = cohort_draw(
        candidates, target_size=size, seed=seed, long_stay_hours=LONG_STAY_HOURS
    )
    return [pk for pk, _ in chosen], summary


def read_stay_ids(path: Path) -> list[int]:
    """The stay_ids of a file: whole numbers separated by spaces, commas or new
    lines; a first line ``stay_id`` (a CSV header) is allowed."""
    path = Path(path)
    if not path.is_file():
        raise SourceDataError("stays file not found", file=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceDataError(f"cannot be read ({exc})", file=str(path)) from exc
    ids: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for token in re.split(r"[\s,;]+", line.strip()):
            if not token or (number == 1 and token.lower() == "stay_id"):
                continue
            if not token.isdigit():
                raise SourceDataError(
                    f"{token!r} is not a stay_id", file=str(path), row=number
                )
            ids.append(int(token))
    if not ids:
        raise SourceDataError("holds no stay_id", file=str(path))
    return list(dict.fromkeys(ids))


def check_stay_ids(cohort: PatientsAdmissionsStays, ids: list[int], file: str):
    known = set(int(s) for s in cohort.stays["stay_id"])
    unknown = [i for i in ids if i not in known]
    if unknown:
        shown = ", ".join(str(i) for i in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise SourceDataError(
            f"{len(unknown)} stay_id(s) not in icu/icustays: {shown}{more}",
            file=file,
        )
