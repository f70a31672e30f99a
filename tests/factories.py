"""Plain factory functions for tests: each builds a valid row with sensible
defaults, and any field can be given; and builders of a stay's clinical events
(a vital or a vital series, a lab, a drip, a code status, a ventilation, a
death, a coded procedure, the notes) at hours since its ICU admission."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.leases import job_claim
from windows.models import (
    Admission,
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    ImportRun,
    Outcome,
    Patient,
    Source,
    Stay,
)

_seq = itertools.count(1)
BASE_TIME = datetime(2024, 1, 1, 8, 0, tzinfo=UTC)


def _n() -> int:
    return next(_seq)


def make_user(
    *,
    staff: bool = False,
    username: str | None = None,
    password: str = "correct horse battery",
    role: str | None = None,
    **fields,
):
    """A user; ``role`` (accounts.roles.Role) puts them in that role's group."""
    n = _n()
    user = get_user_model().objects.create_user(
        username=username or f"user{n}", password=password, is_staff=staff, **fields
    )
    if role:
        from accounts.roles import roles_ensure

        user.groups.add(roles_ensure()[role])
    return user


def make_patient(**fields) -> Patient:
    n = _n()
    defaults = {
        "source": Source.CLIF,
        "source_id": f"pat-{n}",
        "pseudo_id": f"P{n:010d}",
        "sex": "Female",
        "age": 64,
    }
    defaults.update(fields)
    return Patient.objects.create(**defaults)


def make_admission(*, patient: Patient | None = None, **fields) -> Admission:
    n = _n()
    patient = patient or make_patient()
    admit_time = fields.pop("admit_time", BASE_TIME)
    defaults = {
        "source": patient.source,
        "source_id": f"adm-{n}",
        "admit_time": admit_time,
        "discharge_time": admit_time + timedelta(days=10),
        "discharge_disposition": "Home",
        "admission_type": "Emergency",
        "age_at_admission": patient.age,
    }
    defaults.update(fields)
    return Admission.objects.create(patient=patient, **defaults)


def make_stay(
    *, admission: Admission | None = None, hours: float = 48.0, **fields
) -> Stay:
    """An ICU stay ``hours`` long; it starts a day into its admission unless
    ``intime`` is given."""
    n = _n()
    admission = admission or make_admission()
    intime = fields.pop("intime", admission.admit_time + timedelta(hours=24))
    defaults = {
        "source": admission.source,
        "source_id": f"stay-{n}",
        "care_unit": "Medical ICU",
        "intime": intime,
        "outtime": intime + timedelta(hours=hours),
        "hospital_outcome": Outcome.SURVIVED,
        "admission_diagnosis": "A41.9 Sepsis, unspecified organism",
        "diagnosis_code": "A419",
        "diagnosis_version": 10,
        "disease_group": DiseaseGroup.SEPSIS,
    }
    defaults.update(fields)
    return Stay.objects.create(admission=admission, **defaults)


def make_silent_import() -> ImportRun:
    """A CLIF import a worker claimed and then went silent: its heartbeat an hour
    old, past the reaper's staleness limit."""
    run = ImportRun.objects.create(source=Source.CLIF)
    job_claim(model=ImportRun, pk=run.pk)
    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    return run


# What make_event and make_events chart unless told otherwise.
HEART_RATE = {
    "kind": EventKind.OBSERVATION,
    "domain": Domain.VITALS,
    "category": "heart_rate",
    "name": "Heart rate",
    "value_num": 88.0,
    "unit": "bpm",
    "source_table": "vitals",
}


def make_event(
    *, admission: Admission, time: datetime | None = None, **fields
) -> Event:
    n = _n()
    defaults = {
        "time": time or admission.admit_time,
        **HEART_RATE,
        "source_key": f"row:{n}",
    }
    defaults.update(fields)
    return Event.objects.create(admission=admission, **defaults)


def make_events(
    *,
    admission: Admission,
    count: int,
    start: datetime | None = None,
    every: timedelta = timedelta(hours=1),
    **fields,
) -> list[Event]:
    """``count`` events of one kind, ``every`` apart from ``start``, in one insert."""
    start = start or admission.admit_time
    defaults = HEART_RATE | fields
    return Event.objects.bulk_create(
        Event(
            admission=admission,
            time=start + i * every,
            source_key=f"row:{_n()}",
            **defaults,
        )
        for i in range(count)
    )


# Clinical events of a stay, at ``hours`` since its ICU admission; each
# builder's ``fields`` (as make_event's) replace its defaults. -----------------

VITAL = {
    "domain": Domain.VITALS,
    "kind": EventKind.OBSERVATION,
    "source_table": "vitals",
}
LAB = {"domain": Domain.LABS, "kind": EventKind.OBSERVATION, "source_table": "labs"}
DRIP = {
    "domain": Domain.MED_CONTINUOUS,
    "kind": EventKind.ACTION,
    "unit": "mcg/kg/min",
    "source_table": "medication_admin_continuous",
}
NO_VALUE = {"value_num": None, "unit": ""}


def at(stay: Stay, hours: float) -> datetime:
    return stay.intime + timedelta(hours=hours)


def event_at(stay: Stay, hours: float, **fields) -> Event:
    """An event of the stay's admission ``hours`` after its ICU admission."""
    return make_event(admission=stay.admission, time=at(stay, hours), **fields)


def vitals(
    stay: Stay,
    category: str,
    value: float,
    *,
    start_h: float,
    end_h: float,
    every_min: float = 30,
    unit: str = "",
    **fields,
) -> list[Event]:
    """One vital charted every ``every_min`` minutes in [start_h, end_h)."""
    defaults = {**VITAL, "category": category, "name": category, "unit": unit}
    return make_events(
        admission=stay.admission,
        count=int(round((end_h - start_h) * 60 / every_min)),
        start=at(stay, start_h),
        every=timedelta(minutes=every_min),
        **{**defaults, "value_num": value, **fields},
    )


def _measurement(source: dict, stay: Stay, category, value, hours, unit, **fields):
    defaults = {**source, "category": category, "name": category, "value_num": value}
    return event_at(stay, hours, **(defaults | {"unit": unit} | fields))


def lab(stay: Stay, category: str, value: float, hours: float, unit="", **fields):
    return _measurement(LAB, stay, category, value, hours, unit, **fields)


def vital(stay: Stay, category: str, value: float, hours: float, unit="", **fields):
    """One charted vital (weight among them, as CLIF charts it)."""
    return _measurement(VITAL, stay, category, value, hours, unit, **fields)


def drip(stay: Stay, category: str, rate: float, hours: float, text="start", **fields):
    """A continuous infusion's row (``text``: start, dose change, stop)."""
    defaults = {**DRIP, "category": category, "name": category.capitalize()}
    return event_at(
        stay, hours, **(defaults | {"value_num": rate, "value_text": text} | fields)
    )


def code_status(
    stay: Stay, hours: float, category: str = "Full", name: str = "Full code", **fields
):
    """A code status charting (an action, as a change of code status is)."""
    defaults = {"kind": EventKind.ACTION, "domain": Domain.CODE_STATUS, **NO_VALUE}
    status = {"category": category, "name": name, "source_table": "code_status"}
    return event_at(stay, hours, **(defaults | status | fields))


def ventilation(stay: Stay, hours: float, category: str = "IMV", **fields):
    """A respiratory support charting (its device category: IMV, NIPPV, ...)."""
    defaults = {"kind": EventKind.ACTION, "domain": Domain.RESPIRATORY, **NO_VALUE}
    device = {"category": category, "name": "Ventilator"}
    source = {"source_table": "respiratory_support"}
    return event_at(stay, hours, **(defaults | device | source | fields))


def death(stay: Stay, hours: float, **fields):
    """The patient's death (an outcome event)."""
    death = {"category": "death", "name": "Death"}
    defaults = {"kind": EventKind.OUTCOME, "domain": Domain.OUTCOME} | death
    return event_at(stay, hours, **(defaults | fields))


def coded_procedure(
    stay: Stay, hours: float, system: str = "ICD10PCS", code: str = "5A1955Z", **fields
):
    """A procedure code (a hindsight record)."""
    defaults = {"kind": EventKind.CODED, "domain": Domain.PROCEDURES, **NO_VALUE}
    coded = {"category": system, "name": f"{system} {code}", "value_text": code}
    source = {"source_table": "patient_procedures"}
    return event_at(stay, hours, **(defaults | coded | source | fields))


# The notes as windows.importers.mimic.notes stores them (value_text: the note).
RADIOLOGY_REPORT = {
    "kind": EventKind.OBSERVATION,
    "domain": Domain.NOTES,
    "category": "radiology_report",
    "name": "CHEST (PORTABLE AP)",
    **NO_VALUE,
    "source_table": "radiology",
}
DISCHARGE_SUMMARY = {
    "kind": EventKind.OUTCOME,
    "domain": Domain.NOTES,
    "category": "discharge_summary",
    "name": "Discharge summary",
    **NO_VALUE,
    "source_table": "discharge",
}


def radiology_report(
    stay: Stay, hours: float, text: str, name: str = "CHEST (PORTABLE AP)", **fields
):
    """A radiology report (a bedside note)."""
    note = {"name": name, "value_text": text}
    return event_at(stay, hours, **(RADIOLOGY_REPORT | note | fields))


def discharge_summary(stay: Stay, hours: float, text: str, **fields):
    """The discharge summary (an outcome note, hindsight only)."""
    return event_at(stay, hours, **(DISCHARGE_SUMMARY | {"value_text": text} | fields))


def complete_label(**changes) -> dict:
    """A label payload with every field filled, citing events 1-3 and rating
    the recorded action 10; ``changes`` replace whole fields."""
    base = {
        "status": "deteriorating",
        "status_evidence": [1],
        "acute_problems": [{"text": "septic shock", "evidence": [1, 2]}],
        "action_ratings": [
            {"event_id": 10, "rating": "best_practice", "evidence": [2]}
        ],
        "added_actions": [{"text": "add vasopressin", "evidence": [3]}],
        "red_flags": [{"text": "avoid fluid boluses", "evidence": [3]}],
    }
    base.update(changes)
    return base
