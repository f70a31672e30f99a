"""Cohort selection (spec section 2): one ICU stay per patient, stays shorter than
``min_hours`` dropped, balanced across outcome x length strata, reproducible from a
seed."""

from __future__ import annotations

import random
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import DurationField, ExpressionWrapper, F

from windows.models import Cohort, CohortStay, CohortStratum, Outcome, Stay

# Allocation order: where a quota does not divide evenly, the first strata get the
# extra stay. Deaths first, as they are the scarce outcome.
STRATA = [
    CohortStratum.DIED_SHORT,
    CohortStratum.DIED_LONG,
    CohortStratum.SURVIVED_SHORT,
    CohortStratum.SURVIVED_LONG,
]
STAY_CHOICE = "random eligible stay per patient"


def stay_stratum(*, outcome: str, length_hours: float, long_stay_hours: float) -> str:
    died = outcome == Outcome.DIED
    long = length_hours >= long_stay_hours
    if died:
        return CohortStratum.DIED_LONG if long else CohortStratum.DIED_SHORT
    return CohortStratum.SURVIVED_LONG if long else CohortStratum.SURVIVED_SHORT


def strata_allocate(*, available: dict[str, int], target: int) -> dict[str, int]:
    """Spread ``target`` as evenly as possible over the strata; a stratum with too
    few stays gives its share to the others (water-filling, in ``STRATA`` order)."""
    alloc = {s: 0 for s in available}
    remaining = min(target, sum(available.values()))
    open_ = [s for s in STRATA if available.get(s, 0) > 0]
    while remaining > 0 and open_:
        share, extra = divmod(remaining, len(open_))
        for i, stratum in enumerate(open_):
            give = min(
                share + (1 if i < extra else 0), available[stratum] - alloc[stratum]
            )
            alloc[stratum] += give
            remaining -= give
        open_ = [s for s in open_ if alloc[s] < available[s]]
    return alloc


def cohort_build(
    *,
    name: str,
    target_size: int,
    seed: int,
    min_hours: float = 4,
    long_stay_hours: float = 96,
    created_by=None,
) -> Cohort:
    """Select and save a cohort.

    Each patient contributes one stay, drawn at random (from ``seed``) among the
    patient's stays of at least ``min_hours``: a random draw rather than the longest
    stay, so that the choice does not bias the length strata. Stays are then drawn
    per stratum (died/survived x shorter/longer than ``long_stay_hours``) as evenly
    as the strata allow. Candidates are ordered by source ids before any draw, so the
    same data and inputs give the same stays, whatever the database keys.

    A cohort name is unique: building again with the same name and inputs returns the
    existing cohort; with other inputs it is refused.
    """
    name = (name or "").strip()
    if not name:
        raise ValidationError("A cohort needs a name.")
    if target_size < 1:
        raise ValidationError(f"Target size must be at least 1, not {target_size}.")
    if min_hours < 0 or long_stay_hours <= 0:
        raise ValidationError("min_hours must be >= 0 and long_stay_hours > 0.")
    inputs = {
        "target_size": target_size,
        "seed": seed,
        "min_hours": min_hours,
        "long_stay_hours": long_stay_hours,
        "stay_choice": STAY_CHOICE,
    }
    existing = Cohort.objects.filter(name=name).first()
    if existing is not None:
        if existing.settings == inputs:
            return existing
        raise ValidationError(
            f"A cohort named {name!r} already exists (id {existing.pk}) with other "
            "settings; choose another name."
        )

    length = ExpressionWrapper(F("outtime") - F("intime"), output_field=DurationField())
    rows = (
        Stay.objects.annotate(length=length)
        .filter(length__gte=timedelta(hours=min_hours))
        .values_list(
            "pk",
            "source",
            "source_id",
            "hospital_outcome",
            "length",
            "admission__patient__source",
            "admission__patient__source_id",
        )
    )
    candidates = (
        (
            (p_source, p_source_id),
            (source, source_id),
            pk,
            outcome,
            length_.total_seconds() / 3600.0,
        )
        for pk, source, source_id, outcome, length_, p_source, p_source_id in rows
    )
    chosen, summary = cohort_draw(
        candidates, target_size=target_size, seed=seed, long_stay_hours=long_stay_hours
    )
    with transaction.atomic():
        cohort = Cohort.objects.create(
            name=name,
            settings=inputs,
            seed=seed,
            target_size=target_size,
            summary=summary,
            created_by=created_by,
        )
        CohortStay.objects.bulk_create(
            CohortStay(cohort=cohort, stay_id=pk, stratum=stratum)
            for pk, stratum in chosen
        )
    return cohort


def cohort_draw(
    candidates, *, target_size: int, seed: int, long_stay_hours: float
) -> tuple[list[tuple[object, str]], dict]:
    """The draw of ``cohort_build`` over eligible stays given as (patient key, stay
    key, stay id, outcome, length in hours): one stay per patient, then the strata
    balanced. Keys are sortable source ids, so the draw depends on the data and the
    seed only. Returns the chosen (stay id, stratum) and the summary. The MIMIC-IV
    importer draws its cohort-first selection with it from the files' small
    tables."""
    by_patient: dict[tuple, list[tuple]] = {}
    for patient, key, pk, outcome, hours in candidates:
        by_patient.setdefault(patient, []).append(
            (
                key,
                pk,
                stay_stratum(
                    outcome=outcome, length_hours=hours, long_stay_hours=long_stay_hours
                ),
            )
        )

    pick = random.Random(f"cohort:{seed}:stay-per-patient")
    pools: dict[str, list[tuple]] = {s: [] for s in STRATA}
    for patient in sorted(by_patient):
        key, pk, stratum = pick.choice(sorted(by_patient[patient]))
        pools[stratum].append((key, pk))

    available = {s: len(pools[s]) for s in STRATA}
    alloc = strata_allocate(available=available, target=target_size)
    draw = random.Random(f"cohort:{seed}:strata")
    chosen: list[tuple[object, str]] = []
    for stratum in STRATA:
        for _, pk in sorted(draw.sample(sorted(pools[stratum]), alloc[stratum])):
            chosen.append((pk, stratum))

    summary = {
        "patients": len(by_patient),
        "eligible_stays": sum(len(v) for v in by_patient.values()),
        "size": len(chosen),
        "strata": {
            s: {"available": available[s], "selected": alloc[s]} for s in STRATA
        },
    }
    return chosen, summary
