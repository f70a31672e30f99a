"""Small CLIF stays built for the cohort and window tests: a stay of so many hours
with its outcome, events at minutes since ICU admission, and a stay whose windows
are dense in actions or not; the stays a cohort took."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from windows.models import (
    Admission,
    Cohort,
    Domain,
    Event,
    EventKind,
    Outcome,
    Patient,
    Source,
    Stay,
    Window,
)
from windows.windowing import windows_build

BASE = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)


_seq = itertools.count(1)


def make_patient() -> Patient:
    n = next(_seq)
    return Patient.objects.create(
        source=Source.CLIF, source_id=f"cw-pat-{n}", pseudo_id=f"PCW{n:08d}"
    )


def make_stay(
    *,
    hours: float,
    outcome: str = Outcome.SURVIVED,
    patient: Patient | None = None,
    intime: datetime = BASE,
) -> Stay:
    """A stay ``hours`` long, in an admission that starts 12 h before it."""
    n = next(_seq)
    patient = patient or make_patient()
    admission = Admission.objects.create(
        patient=patient,
        source=Source.CLIF,
        source_id=f"cw-adm-{n}",
        admit_time=intime - timedelta(hours=12),
        discharge_time=intime + timedelta(hours=hours + 24),
    )
    return Stay.objects.create(
        admission=admission,
        source=Source.CLIF,
        source_id=f"cw-stay-{n}",
        intime=intime,
        outtime=intime + timedelta(hours=hours),
        hospital_outcome=outcome,
    )


def add_events(stay: Stay, *specs: tuple) -> list[Event]:
    """Events at ``(minutes since ICU admission, kind[, category])``."""
    rows = []
    for spec in specs:
        minutes, kind = spec[0], spec[1]
        category = (
            spec[2]
            if len(spec) > 2
            else {
                EventKind.ACTION: "norepinephrine",
                EventKind.OUTCOME: "death",
            }.get(kind, "heart_rate")
        )
        rows.append(
            Event(
                admission=stay.admission,
                time=stay.intime + timedelta(minutes=minutes),
                kind=kind,
                domain=Domain.OUTCOME if kind == EventKind.OUTCOME else Domain.VITALS,
                category=category,
                name=category,
                source_table="test",
            )
        )
    return Event.objects.bulk_create(rows)


def dense_stay(*, high: int, low: int) -> Stay:
    """A stay of ``high + low`` windows: the first ``high`` hold 1 observation and 3
    actions (density 0.75), the rest 4 observations (density 0)."""
    stay = make_stay(hours=2 * (high + low))
    specs = []
    for k in range(high + low):
        t = 120 * k
        if k < high:
            specs += [(t, EventKind.OBSERVATION)] + [
                (t + m, EventKind.ACTION) for m in (5, 10, 15)
            ]
        else:
            specs += [(t + m, EventKind.OBSERVATION) for m in (0, 5, 10, 15)]
    add_events(stay, *specs)
    windows_build(stay=stay)
    return stay


def gold_indexes(stay: Stay) -> set[int]:
    return set(
        Window.objects.filter(stay=stay, sampled_gold=True).values_list(
            "index", flat=True
        )
    )


def _cohort_stays(cohort: Cohort) -> set[int]:
    """The ids of the stays ``cohort`` took."""
    return set(cohort.cohort_stays.values_list("stay_id", flat=True))
