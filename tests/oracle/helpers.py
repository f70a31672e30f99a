"""Constructed ICU stays for the Oracle tests, built with tests.factories."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import make_event, make_events, make_stay
from windows.models import Domain, EventKind, Window
from windows.windowing import windows_build

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


def at(stay, hours: float):
    return stay.intime + timedelta(hours=hours)


def vitals(
    stay,
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


def lab(stay, category: str, value: float, hours: float, unit: str = ""):
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        category=category,
        name=category,
        value_num=value,
        unit=unit,
        **LAB,
    )


def drip(stay, category: str, rate: float, hours: float, text: str = "start"):
    return make_event(
        admission=stay.admission,
        time=at(stay, hours),
        category=category,
        name=category.capitalize(),
        value_num=rate,
        value_text=text,
        **DRIP,
    )


def death(stay, hours: float):
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
    stay, hours: float, system: str = "ICD10PCS", code: str = "5A1955Z"
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


def radiology_report(stay, hours: float, text: str, name: str = "CHEST (PORTABLE AP)"):
    """A radiology report (a bedside note)."""
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
    )


def discharge_summary(stay, hours: float, text: str):
    """The discharge summary (an outcome note, hindsight only)."""
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
    )


def stable_stay(hours: float = 24.0):
    """Normal, unchanging vitals every 30 minutes from an hour before admission."""
    stay = make_stay(hours=hours)
    vitals(stay, "heart_rate", 80, start_h=-1, end_h=hours, unit="bpm")
    vitals(stay, "map", 80, start_h=-1, end_h=hours, unit="mmHg")
    vitals(stay, "spo2", 97, start_h=-1, end_h=hours, unit="%")
    return stay


def windows_of(stay) -> list[Window]:
    windows_build(stay=stay)
    return list(Window.objects.filter(stay=stay).order_by("index"))
