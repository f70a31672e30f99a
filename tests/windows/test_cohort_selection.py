"""Cohort selection: one stay per patient, strata balanced by outcome and length,
reproducible from the seed, and every bad input refused with nothing written."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from tests.windows.stay_builders import BASE, _cohort_stays, make_patient, make_stay
from windows.cohort import cohort_build, strata_allocate
from windows.models import Cohort, CohortStay, CohortStratum, Outcome, Stay

pytestmark = pytest.mark.django_db


# (outcome, hours) -> number of single-stay patients
POPULATION = {
    (Outcome.DIED, 10): 10,
    (Outcome.DIED, 100): 3,
    (Outcome.SURVIVED, 20): 20,
    (Outcome.SURVIVED, 150): 12,
    (Outcome.SURVIVED, 3.9): 6,  # too short: never selected
}


@pytest.fixture
def population():
    for (outcome, hours), n in POPULATION.items():
        for _ in range(n):
            make_stay(hours=hours, outcome=outcome)
    # Patients with two stays: one is too short, so the other is the patient's stay;
    # or both are long survivals, so the patient still counts once in that stratum.
    for _ in range(2):
        patient = make_patient()
        make_stay(hours=2, patient=patient)
        make_stay(hours=30, patient=patient, intime=BASE + timedelta(days=10))
    for _ in range(2):
        patient = make_patient()
        make_stay(hours=100, patient=patient)
        make_stay(hours=120, patient=patient, intime=BASE + timedelta(days=10))


def test_cohort_takes_one_stay_per_patient_and_no_short_stay(population):
    cohort = cohort_build(name="c", target_size=1000, seed=0)
    stays = Stay.objects.filter(cohorts=cohort)
    assert stays.count() == 49  # every patient with a stay of 4 h or more
    patients = list(stays.values_list("admission__patient_id", flat=True))
    assert len(patients) == len(set(patients))
    assert all(s.length_hours >= 4 for s in stays)


def test_cohort_balances_outcome_and_length_strata(population):
    cohort = cohort_build(name="c", target_size=20, seed=0)
    got = Counter(cohort.cohort_stays.values_list("stratum", flat=True))
    # 5 each, the died-long stratum is short by 2: they go to the first open strata.
    assert got == {
        CohortStratum.DIED_SHORT: 6,
        CohortStratum.DIED_LONG: 3,
        CohortStratum.SURVIVED_SHORT: 6,
        CohortStratum.SURVIVED_LONG: 5,
    }
    for cs in cohort.cohort_stays.select_related("stay"):
        died = cs.stay.hospital_outcome == Outcome.DIED
        long = cs.stay.length_hours >= 96
        assert (
            cs.stratum
            == f"{'died' if died else 'survived'}_{'long' if long else 'short'}"
        )
    assert cohort.summary["strata"][CohortStratum.SURVIVED_SHORT] == {
        "available": 22,
        "selected": 6,
    }
    assert cohort.settings == {
        "target_size": 20,
        "seed": 0,
        "min_hours": 4,
        "long_stay_hours": 96,
        "stay_choice": "random eligible stay per patient",
    }


def test_cohort_is_reproducible_from_the_seed(population):
    first = _cohort_stays(cohort_build(name="a", target_size=20, seed=5))
    assert _cohort_stays(cohort_build(name="b", target_size=20, seed=5)) == first
    others = {
        frozenset(_cohort_stays(cohort_build(name=f"s{s}", target_size=20, seed=s)))
        for s in range(6, 10)
    }
    assert others - {frozenset(first)}


def test_cohort_settings_change_strata(population):
    cohort = cohort_build(
        name="c", target_size=1000, seed=0, min_hours=25, long_stay_hours=120
    )
    got = Counter(cohort.cohort_stays.values_list("stratum", flat=True))
    # 10 h and 20 h stays dropped; 100 h is now short, 120 h and 150 h long. The
    # patients with a 100 h and a 120 h stay land in either survival stratum.
    assert set(got) <= {
        CohortStratum.DIED_SHORT,
        CohortStratum.SURVIVED_SHORT,
        CohortStratum.SURVIVED_LONG,
    }
    assert got[CohortStratum.DIED_SHORT] == 3
    assert 2 <= got[CohortStratum.SURVIVED_SHORT] <= 4
    assert got[CohortStratum.SURVIVED_SHORT] + got[CohortStratum.SURVIVED_LONG] == 16


def test_same_name_and_settings_returns_the_existing_cohort(population):
    first = cohort_build(name="c", target_size=20, seed=0)
    again = cohort_build(name="c", target_size=20, seed=0)
    assert again.pk == first.pk and Cohort.objects.count() == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "c", "target_size": 30, "seed": 0}, "already exists"),
        ({"name": "  ", "target_size": 20, "seed": 0}, "needs a name"),
        ({"name": "d", "target_size": 0, "seed": 0}, "at least 1"),
    ],
)
def test_bad_cohort_inputs_are_refused_and_nothing_is_written(
    population, kwargs, message
):
    cohort_build(name="c", target_size=20, seed=0)
    with pytest.raises(ValidationError, match=message):
        cohort_build(**kwargs)
    assert Cohort.objects.count() == 1 and CohortStay.objects.count() == 20


def test_build_cohort_command_prints_the_strata(population):
    out = StringIO()
    call_command(
        "build_cohort", "--name", "cmd", "--size", "20", "--seed", "0", stdout=out
    )
    text = out.getvalue()
    assert "20 stays of target 20" in text
    assert "Died, long stay" in text and "total" in text
    assert Cohort.objects.get(name="cmd").cohort_stays.count() == 20


def test_strata_allocation_spreads_evenly_and_fills_short_strata():
    full = {s: 100 for s in CohortStratum.values}
    assert sorted(strata_allocate(available=full, target=94).values()) == [
        23,
        23,
        24,
        24,
    ]
    short = dict(full, died_short=5, died_long=2)
    got = strata_allocate(available=short, target=94)
    assert got["died_short"] == 5 and got["died_long"] == 2
    assert (
        abs(got["survived_short"] - got["survived_long"]) <= 1
        and sum(got.values()) == 94
    )
    assert sum(strata_allocate(available=short, target=1000).values()) == 207
