"""Plain factory functions for tests: each builds a valid row with sensible
defaults, and any field can be given; and builders of a stay's clinical events
(a vital series, a lab, a drip, a death, a coded procedure, the notes) at hours
since its ICU admission."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model

from windows.models import (
    Admission,
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
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


def make_event(
    *, admission: Admission, time: datetime | None = None, **fields
) -> Event:
    n = _n()
    defaults = {
        "time": time or admission.admit_time,
        "kind": EventKind.OBSERVATION,
        "domain": Domain.VITALS,
        "category": "heart_rate",
        "name": "Heart rate",
        "value_num": 88.0,
        "unit": "bpm",
        "source_table": "vitals",
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
    defaults = {
        "kind": EventKind.OBSERVATION,
        "domain": Domain.VITALS,
        "category": "heart_rate",
        "name": "Heart rate",
        "value_num": 88.0,
        "unit": "bpm",
        "source_table": "vitals",
    }
    defaults.update(fields)
    return Event.objects.bulk_create(
        Event(
            admission=admission,
            time=start + i * every,
            source_key=f"row:{_n()}",
            **defaults,
        )
        for i in range(count)
    )


# Clinical events of a stay, at ``hours`` since its ICU admission -------------

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


def at(stay: Stay, hours: float) -> datetime:
    return stay.intime + timedelta(hours=hours)


def vitals(
    stay: Stay,
    category: str,
    value: float,
    *,
    start_h: float,
    end_h: float,
    every_min: float = 30,
    unit: str = "",
) -> None:
    """One vital charted every ``every_min`` minutes in [start_h, end_h)."""
    count = int(round((end_h - start_h) * 60 / every_min))
    make_events(
        admission=stay.admission,
        count=count,
        start=at(stay, start_h),
        every=timedelta(minutes=every_min),
        category=category,
        name=category,
        value_num=value,
        unit=unit,
        **VITAL,
    )


def lab(stay: Stay, category: str, value: float, hours: float, unit: str = ""):
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        category=category,
        name=category,
        value_num=value,
        unit=unit,
        **LAB,
    )


def drip(stay: Stay, category: str, rate: float, hours: float, text: str = "start"):
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        category=category,
        name=category.capitalize(),
        value_num=rate,
        value_text=text,
        **DRIP,
    )


def death(stay: Stay, hours: float):
    """The patient's death (an outcome event) ``hours`` after admission."""
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        kind=EventKind.OUTCOME,
        domain=Domain.OUTCOME,
        category="death",
        name="Death",
    )


def coded_procedure(
    stay: Stay, hours: float, system: str = "ICD10PCS", code: str = "5A1955Z"
):
    """A procedure code (a hindsight record) charted ``hours`` after admission."""
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        kind=EventKind.CODED,
        domain=Domain.PROCEDURES,
        category=system,
        name=f"{system} {code}",
        value_num=None,
        unit="",
        value_text=code,
        source_table="patient_procedures",
    )


def radiology_report(
    stay: Stay, hours: float, text: str, name: str = "CHEST (PORTABLE AP)", **fields
):
    """A radiology report (a bedside note); ``fields`` as make_event's."""
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        domain=Domain.NOTES,
        category="radiology_report",
        name=name,
        value_num=None,
        unit="",
        value_text=text,
        source_table="radiology",
        **fields,
    )


def discharge_summary(stay: Stay, hours: float, text: str, **fields):
    """The discharge summary (an outcome note, hindsight only); ``fields`` as
    make_event's."""
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        kind=EventKind.OUTCOME,
        domain=Domain.NOTES,
        category="discharge_summary",
        name="Discharge summary",
        value_num=None,
        unit="",
        value_text=text,
        source_table="discharge",
        **fields,
    )
