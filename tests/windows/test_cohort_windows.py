"""Cohort selection, candidate windows and their action density, the Gold draw, and
the bedside context, on small stays built here and on the whole CLIF demo."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext, override_settings

from windows.cohort import cohort_build, strata_allocate
from windows.importers.clif import clif_import
from windows.models import (
    Admission,
    Cohort,
    CohortStay,
    CohortStratum,
    Domain,
    Event,
    EventKind,
    Outcome,
    Patient,
    SampleRegime,
    Source,
    Stay,
    Window,
)
from windows.selectors_context import (
    OUTCOME_REVEALING_CATEGORIES,
    bedside_events,
    bedside_filter,
    window_actions,
)
from windows.windowing import windows_build, windows_build_many, windows_sample_gold

pytestmark = pytest.mark.django_db

BASE = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
_seq = itertools.count(1)


# --- local builders (tests/factories.py belongs to another change) -------------------


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


# --- candidate windows ---------------------------------------------------------------


def test_windows_start_every_two_hours_until_the_last_full_window():
    stay = make_stay(hours=7.5)
    windows = windows_build(stay=stay)
    assert [w.index for w in windows] == [0, 1, 2, 3]
    assert [w.hours_since_admit for w in windows] == [0, 2, 4, 6]
    assert all(w.end - w.start == timedelta(minutes=30) for w in windows)
    assert windows[-1].start == stay.intime + timedelta(hours=6)
    assert windows[-1].end == stay.intime + timedelta(hours=6, minutes=30)


def test_window_that_would_end_after_icu_discharge_is_not_built():
    stay = make_stay(hours=6 + 20 / 60)
    assert [w.hours_since_admit for w in windows_build(stay=stay)] == [0, 2, 4]


def test_window_ending_exactly_at_discharge_is_built():
    stay = make_stay(hours=6.5)
    assert [w.hours_since_admit for w in windows_build(stay=stay)] == [0, 2, 4, 6]


def test_stay_shorter_than_a_window_has_no_windows():
    stay = make_stay(hours=0.4)
    assert windows_build(stay=stay) == []
    assert windows_sample_gold(stay=stay, seed=0) == []


@override_settings(REALICU_WINDOW_MINUTES=60, REALICU_WINDOW_STRIDE_HOURS=1)
def test_window_length_and_stride_come_from_settings():
    stay = make_stay(hours=3)
    windows = windows_build(stay=stay)
    assert [
        (w.hours_since_admit, (w.end - w.start).total_seconds()) for w in windows
    ] == [(0, 3600), (1, 3600), (2, 3600)]


def test_counts_cover_start_inclusive_end_exclusive_and_skip_outcome_events():
    stay = make_stay(hours=4.5)
    add_events(
        stay,
        (-30, EventKind.OBSERVATION),  # before ICU admission: in no window
        (0, EventKind.OBSERVATION),  # at the start: counted
        (10, EventKind.ACTION),
        (15, EventKind.OUTCOME, "icu_discharge"),  # outcome: never counted
        (29.99, EventKind.ACTION),
        (30, EventKind.ACTION),  # at the end: belongs to no window
        (241, EventKind.OBSERVATION),
        (242, EventKind.OBSERVATION),
    )
    w0, w1, w2 = windows_build(stay=stay)
    assert (w0.event_count, w0.action_count) == (3, 2)
    assert w0.action_density == pytest.approx(2 / 3)
    assert (w1.event_count, w1.action_count, w1.action_density) == (0, 0, 0.0)
    assert (w2.event_count, w2.action_count, w2.action_density) == (2, 0, 0.0)


def test_events_of_another_admission_are_not_counted():
    stay = make_stay(hours=1)
    other = make_stay(hours=1)
    add_events(other, (5, EventKind.ACTION), (6, EventKind.OBSERVATION))
    (window,) = windows_build(stay=stay)
    assert window.event_count == 0 and window.action_density == 0.0


def test_rebuilding_updates_counts_in_place_and_keeps_the_gold_draw():
    stay = dense_stay(high=3, low=3)
    windows_sample_gold(stay=stay, seed=1, per_stay=2)
    before = {w.index: w.pk for w in Window.objects.filter(stay=stay)}
    gold_before = gold_indexes(stay)

    add_events(stay, (245, EventKind.ACTION))  # into window 2
    again = windows_build(stay=stay)

    assert {w.index: w.pk for w in again} == before
    assert Window.objects.filter(stay=stay).count() == 6
    w2 = again[2]
    assert (w2.event_count, w2.action_count) == (5, 4)
    assert w2.action_density == pytest.approx(0.8)
    assert gold_indexes(stay) == gold_before
    assert [w.sampled_gold for w in again] == [w.index in gold_before for w in again]


def test_rebuilding_a_shortened_stay_removes_windows_that_no_longer_fit():
    stay = make_stay(hours=9)
    assert len(windows_build(stay=stay)) == 5
    Stay.objects.filter(pk=stay.pk).update(outtime=stay.intime + timedelta(hours=5))
    stay.refresh_from_db()
    assert [w.index for w in windows_build(stay=stay)] == [0, 1, 2]
    assert Window.objects.filter(stay=stay).count() == 3


def test_building_windows_takes_the_same_few_queries_whatever_the_stay_length():
    short, long = make_stay(hours=6), make_stay(hours=240)
    add_events(long, *[(m, EventKind.OBSERVATION) for m in range(0, 14400, 7)])
    counts = []
    for stay in (short, long):
        with CaptureQueriesContext(connection) as ctx:
            windows_build(stay=stay)
        counts.append(len(ctx.captured_queries))
    # one more than before the rebuild guard: the stay's existing window bounds
    assert counts[0] == counts[1] <= 7


# --- Gold draw ------------------------------------------------------------------------


def test_gold_draws_eight_high_density_and_two_control_windows():
    stay = dense_stay(high=15, low=15)
    gold = windows_sample_gold(stay=stay, seed=0, per_stay=10, high_share=0.8)
    assert len(gold) == 10
    assert Counter(w.sample_regime for w in gold) == {
        SampleRegime.HIGH_DENSITY: 8,
        SampleRegime.CONTROL: 2,
    }
    assert all(
        w.index < 15 for w in gold if w.sample_regime == SampleRegime.HIGH_DENSITY
    )
    assert gold_indexes(stay) == {w.index for w in gold}
    # Every window of the stay is classed against the stay's median density.
    regimes = Counter(
        Window.objects.filter(stay=stay).values_list("sample_regime", flat=True)
    )
    assert regimes == {SampleRegime.HIGH_DENSITY: 15, SampleRegime.CONTROL: 15}


@pytest.mark.parametrize(
    ("high", "low", "per_stay", "high_share", "drawn_high", "drawn_control"),
    [
        pytest.param(3, 27, 10, 0.8, 3, 7, id="high-density-pool-filled-from-control"),
        pytest.param(
            15, 15, 20, 0.2, 5, 15, id="control-pool-filled-from-high-density"
        ),
    ],
)
def test_a_short_pool_is_filled_from_the_other_regime(
    high, low, per_stay, high_share, drawn_high, drawn_control
):
    stay = dense_stay(high=high, low=low)
    gold = windows_sample_gold(
        stay=stay, seed=0, per_stay=per_stay, high_share=high_share
    )
    assert Counter(w.sample_regime for w in gold) == {
        SampleRegime.HIGH_DENSITY: drawn_high,
        SampleRegime.CONTROL: drawn_control,
    }


def test_stay_with_fewer_windows_than_asked_gives_them_all():
    stay = dense_stay(high=2, low=2)
    assert len(windows_sample_gold(stay=stay, seed=0, per_stay=10)) == 4


def test_window_at_the_median_density_is_control():
    # Densities 0, 0.5, 0.5, 1: median 0.5, so only the last window is high-density.
    stay = make_stay(hours=8)
    add_events(
        stay,
        (0, EventKind.OBSERVATION),
        (120, EventKind.OBSERVATION),
        (125, EventKind.ACTION),
        (240, EventKind.OBSERVATION),
        (245, EventKind.ACTION),
        (360, EventKind.ACTION),
    )
    windows_build(stay=stay)
    windows_sample_gold(stay=stay, seed=0, per_stay=4)
    regimes = list(
        Window.objects.filter(stay=stay)
        .order_by("index")
        .values_list("sample_regime", flat=True)
    )
    assert regimes == [SampleRegime.CONTROL] * 3 + [SampleRegime.HIGH_DENSITY]


def test_stay_without_any_action_draws_only_control_windows():
    stay = dense_stay(high=0, low=12)
    gold = windows_sample_gold(stay=stay, seed=0, per_stay=10)
    assert len(gold) == 10 and {w.sample_regime for w in gold} == {SampleRegime.CONTROL}


def test_gold_draw_is_reproducible_from_the_seed():
    stay = dense_stay(high=15, low=15)
    windows_sample_gold(stay=stay, seed=7)
    first = gold_indexes(stay)
    windows_sample_gold(stay=stay, seed=7)
    assert gold_indexes(stay) == first
    others = set()
    for seed in range(8, 13):
        windows_sample_gold(stay=stay, seed=seed)
        others.add(frozenset(gold_indexes(stay)))
    assert others - {frozenset(first)}


def test_gold_draw_of_a_stay_does_not_depend_on_the_order_of_stays():
    a, b = dense_stay(high=15, low=15), dense_stay(high=15, low=15)
    windows_build_many(stays=[a, b], seed=3)
    first = (gold_indexes(a), gold_indexes(b))
    windows_build_many(stays=[b, a], seed=3)
    assert (gold_indexes(a), gold_indexes(b)) == first


def test_new_draw_replaces_the_previous_one():
    stay = dense_stay(high=15, low=15)
    windows_sample_gold(stay=stay, seed=1, per_stay=10)
    windows_sample_gold(stay=stay, seed=2, per_stay=4)
    assert Window.objects.filter(stay=stay, sampled_gold=True).count() == 4


@override_settings(REALICU_GOLD_PER_STAY=5, REALICU_GOLD_HIGH_SHARE=0.6)
def test_gold_count_and_split_come_from_settings():
    stay = dense_stay(high=15, low=15)
    gold = windows_sample_gold(stay=stay, seed=0)
    assert Counter(w.sample_regime for w in gold) == {
        SampleRegime.HIGH_DENSITY: 3,
        SampleRegime.CONTROL: 2,
    }


@pytest.mark.parametrize("kwargs", [{"high_share": 1.5}, {"per_stay": -1}])
def test_bad_gold_settings_are_refused_and_nothing_is_written(kwargs):
    stay = dense_stay(high=4, low=4)
    with pytest.raises(ValidationError):
        windows_sample_gold(stay=stay, seed=0, **kwargs)
    assert not Window.objects.filter(stay=stay).exclude(sample_regime="").exists()


def test_build_windows_command_prints_a_summary():
    stay = dense_stay(high=15, low=15)
    cohort = Cohort.objects.create(name="cmd", seed=0, target_size=1)
    CohortStay.objects.create(
        cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_SHORT
    )
    out, err = StringIO(), StringIO()
    call_command(
        "build_windows",
        "--cohort",
        str(cohort.pk),
        "--seed",
        "4",
        "--inline",
        stdout=out,
        stderr=err,
    )
    assert "candidate windows" in out.getvalue() and " 30\n" in out.getvalue()
    assert Window.objects.filter(stay=stay, sampled_gold=True).count() == 10
    assert "1/1" in err.getvalue()


def test_build_windows_command_refuses_a_bad_share_and_writes_nothing():
    make_stay(hours=10)
    with pytest.raises(CommandError, match="within 0..1"):
        call_command(
            "build_windows",
            "--all",
            "--high-share",
            "2",
            "--inline",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    assert not Window.objects.exists()


def test_zero_stride_is_refused():
    with pytest.raises(ValidationError, match="positive"):
        windows_build(stay=make_stay(hours=5), stride_hours=0)
    assert not Window.objects.exists()


def test_build_windows_command_names_a_missing_cohort():
    with pytest.raises(CommandError, match="No cohort with id 999999"):
        call_command(
            "build_windows", "--cohort", "999999", stdout=StringIO(), stderr=StringIO()
        )


# --- bedside context ------------------------------------------------------------------


def test_bedside_context_is_everything_before_the_window_end_without_outcomes():
    stay = make_stay(hours=5)
    add_events(
        stay,
        (-300, EventKind.OBSERVATION),  # ED, before ICU: visible
        (
            -10,
            EventKind.OBSERVATION,
            "hospital_discharge",
        ),  # revealing, whatever its kind
        (100, EventKind.OBSERVATION),
        (125, EventKind.ACTION),
        (130, EventKind.OUTCOME, "death"),
        (135, EventKind.OUTCOME, "unmapped"),  # revealing by its kind alone
        (149, EventKind.OBSERVATION),
        (150, EventKind.ACTION),  # at the end: not yet
        (200, EventKind.OBSERVATION),
    )
    window = windows_build(stay=stay)[1]  # 2:00-2:30
    minutes = [
        (e.time - stay.intime).total_seconds() / 60
        for e in bedside_events(window=window)
    ]
    assert minutes == [-300, 100, 125, 149]
    without = [
        (e.time - stay.intime).total_seconds() / 60
        for e in bedside_events(window=window, exclude_window_actions=True)
    ]
    assert without == [-300, 100, 149]
    assert [
        (e.time - stay.intime).total_seconds() / 60
        for e in window_actions(window=window)
    ] == [125]


def test_bedside_context_reads_in_one_query():
    stay = make_stay(hours=3)
    add_events(stay, (5, EventKind.OBSERVATION))
    window = Window.objects.get(pk=windows_build(stay=stay)[0].pk)  # stay not loaded
    with CaptureQueriesContext(connection) as ctx:
        assert len(list(bedside_events(window=window))) == 1
    assert len(ctx.captured_queries) == 1


# --- cohort ---------------------------------------------------------------------------

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
    # available: died_short 10, died_long 3, survived_short 22, survived_long 14


def _cohort_stays(cohort: Cohort) -> set[int]:
    return set(cohort.cohort_stays.values_list("stay_id", flat=True))


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


# --- the CLIF demo (imported once for this module; keep these tests last) -----------


@pytest.fixture(scope="module")
def demo_windows(django_db_setup, django_db_blocker, clif_demo_dir):
    """The demo imported, every stay's windows built and Gold drawn with seed 0."""
    with django_db_blocker.unblock():
        clif_import(directory=clif_demo_dir)
        summary = windows_build_many(stays=Stay.objects.order_by("pk"), seed=0)
        yield summary
        Cohort.objects.all().delete()
        Patient.objects.all().delete()


def _expected_window_count(hours: float) -> int:
    return 0 if hours < 0.5 else math.floor((hours - 0.5) / 2) + 1


def test_demo_gives_a_window_grid_for_every_stay(demo_windows):
    lengths = [s.length_hours for s in Stay.objects.all()]
    assert len(lengths) == 145
    assert (
        Window.objects.count()
        == demo_windows.windows
        == sum(_expected_window_count(h) for h in lengths)
    )
    # No window ends after its stay's ICU discharge, and none is missing at the end.
    assert not Window.objects.filter(end__gt=F("stay__outtime")).exists()
    assert not Window.objects.filter(index=0).exclude(start=F("stay__intime")).exists()


def test_demo_window_counts_match_an_independent_count(demo_windows):
    def counted(**extra):
        sub = (
            Event.objects.filter(
                admission_id=OuterRef("stay__admission_id"),
                time__gte=OuterRef("start"),
                time__lt=OuterRef("end"),
                **extra,
            )
            .order_by()
            .values("admission_id")
            .annotate(n=Count("id"))
            .values("n")
        )
        return Coalesce(Subquery(sub), 0)

    windows = Window.objects.annotate(
        n=counted(kind__in=[EventKind.OBSERVATION, EventKind.ACTION]),
        a=counted(kind=EventKind.ACTION),
    )
    assert not windows.exclude(event_count=F("n")).exists()
    assert not windows.exclude(action_count=F("a")).exists()
    assert windows.filter(action_count__gt=0).exists()
    assert not Window.objects.filter(event_count=0).exclude(action_density=0).exists()


def test_demo_gold_draw_takes_ten_per_stay_mostly_high_density(demo_windows):
    assert Window.objects.filter(sampled_gold=True).count() == demo_windows.gold
    high, control = SampleRegime.HIGH_DENSITY, SampleRegime.CONTROL
    stays = Stay.objects.annotate(
        n=Count("windows"),
        pool_high=Count("windows", filter=Q(windows__sample_regime=high)),
        pool_control=Count("windows", filter=Q(windows__sample_regime=control)),
        gold_high=Count(
            "windows", filter=Q(windows__sample_regime=high, windows__sampled_gold=True)
        ),
        gold_control=Count(
            "windows",
            filter=Q(windows__sample_regime=control, windows__sampled_gold=True),
        ),
    ).values("pk", "n", "pool_high", "pool_control", "gold_high", "gold_control")
    for row in stays:
        n = min(10, row["n"])
        assert row["pool_high"] + row["pool_control"] == row["n"], row
        assert row["gold_high"] + row["gold_control"] == n, row
        # 8 of 10 from high-density when the pool allows, the rest from control.
        assert row["gold_high"] == min(math.floor(0.8 * n + 0.5), row["pool_high"]), row
    # The demo's actions are sparse (about a third of windows hold one), so many
    # stays are short of high-density windows; their Gold is filled from control.
    assert demo_windows.gold_high == sum(r["gold_high"] for r in stays)
    assert demo_windows.gold_high > demo_windows.gold_control


REVEALING = Q(kind=EventKind.OUTCOME) | Q(category__in=OUTCOME_REVEALING_CATEGORIES)


def _context(*, exclude_window_actions: bool = False):
    """The bedside context of the outer window, for queries over every window."""
    return Event.objects.filter(
        bedside_filter(
            admission_id=OuterRef("stay__admission_id"),
            start=OuterRef("start"),
            end=OuterRef("end"),
            exclude_window_actions=exclude_window_actions,
        )
    )


def _count(events):
    sub = events.order_by().values("admission_id").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(sub), 0)


def test_demo_bedside_context_of_every_window_hides_the_future_and_outcomes(
    demo_windows,
):
    windows = Window.objects.all()
    assert windows.count() == demo_windows.windows
    # Not vacuous: some windows come after an outcome event of their admission (the
    # ICU discharge of an earlier stay), and first windows have a past before ICU.
    assert windows.filter(
        Exists(
            Event.objects.filter(
                REVEALING,
                admission_id=OuterRef("stay__admission_id"),
                time__lt=OuterRef("end"),
            )
        )
    ).exists()
    assert (
        windows.filter(index=0)
        .filter(Exists(_context().filter(time__lt=OuterRef("start"))))
        .count()
        > 100
    )

    for exclude in (False, True):
        context = _context(exclude_window_actions=exclude)
        assert not windows.filter(
            Exists(context.filter(time__gte=OuterRef("end")))
        ).exists()
        assert not windows.filter(Exists(context.filter(REVEALING))).exists()
    # Without its own actions: none left, and the window's observations all kept.
    own_actions = _context(exclude_window_actions=True).filter(
        kind=EventKind.ACTION, time__gte=OuterRef("start")
    )
    assert not windows.filter(Exists(own_actions)).exists()
    # The other rows of an own decision (a carrier line of the same order at the
    # same time, windows.selectors_context.WindowDecisions) leave with it.
    companions = (
        _context()
        .filter(time__gte=OuterRef("start"))
        .exclude(kind=EventKind.ACTION)
        .exclude(order_id="")
        .filter(
            Exists(
                Event.objects.filter(
                    admission_id=OuterRef("admission_id"),
                    order_id=OuterRef("order_id"),
                    time=OuterRef("time"),
                    kind=EventKind.ACTION,
                )
            )
        )
    )
    counted = windows.annotate(
        seen=_count(_context().filter(time__gte=OuterRef("start"))),
        seen_without_actions=_count(
            _context(exclude_window_actions=True).filter(time__gte=OuterRef("start"))
        ),
        companions=_count(companions),
    )
    assert not counted.exclude(seen=F("event_count")).exists()
    assert counted.filter(companions__gt=0).count() > 100
    assert not counted.exclude(
        seen_without_actions=F("event_count") - F("action_count") - F("companions")
    ).exists()


def test_demo_bedside_events_of_windows_after_an_earlier_stay(demo_windows):
    """The selector itself, window by window, where an outcome event lies in the past:
    windows of a second ICU stay in the same admission."""
    windows = Window.objects.filter(
        Exists(
            Event.objects.filter(
                REVEALING,
                admission_id=OuterRef("stay__admission_id"),
                time__lt=OuterRef("start"),
            )
        )
    ).order_by("index", "stay_id")[:60]
    assert len(windows) == 60
    checks = {
        "n": Count("id"),
        "last": Max("time"),
        "revealing": Count("id", filter=REVEALING),
    }
    for w in windows:
        own = Q(kind=EventKind.ACTION, time__gte=w.start, time__lt=w.end)
        full = bedside_events(window=w).aggregate(**checks, own=Count("id", filter=own))
        hidden = bedside_events(window=w, exclude_window_actions=True).aggregate(
            **checks, own=Count("id", filter=own)
        )
        assert full["last"] < w.end and hidden["last"] < w.end
        assert full["revealing"] == hidden["revealing"] == 0
        assert full["own"] == w.action_count and hidden["own"] == 0
        # Less the own actions and the other rows of their orders at their times.
        rows = list(
            bedside_events(window=w)
            .filter(time__gte=w.start)
            .values_list("kind", "order_id", "time")
        )
        keys = {(o, t) for k, o, t in rows if k == EventKind.ACTION and o}
        companions = sum(
            1 for k, o, t in rows if k != EventKind.ACTION and o and (o, t) in keys
        )
        assert hidden["n"] == full["n"] - w.action_count - companions


def test_demo_window_actions_are_the_counted_actions(demo_windows):
    windows = Window.objects.filter(action_count__gt=0).order_by("pk")[:50]
    for w in windows:
        actions = list(window_actions(window=w))
        assert len(actions) == w.action_count
        assert all(
            e.kind == EventKind.ACTION and w.start <= e.time < w.end for e in actions
        )


def test_demo_cohort_of_94(demo_windows):
    cohort = cohort_build(name="demo-94", target_size=94, seed=0)
    stays = Stay.objects.filter(cohorts=cohort)
    assert stays.count() == 94
    patients = list(stays.values_list("admission__patient_id", flat=True))
    assert len(set(patients)) == 94
    assert all(s.length_hours >= 4 for s in stays)
    # As even as the strata allow: a stratum not exhausted is within one of the largest.
    strata = cohort.summary["strata"].values()
    top = max(r["selected"] for r in strata)
    assert all(
        r["selected"] == r["available"] or r["selected"] >= top - 1 for r in strata
    )
    assert sum(r["selected"] for r in strata) == 94
    again = cohort_build(name="demo-94-again", target_size=94, seed=0)
    assert _cohort_stays(again) == _cohort_stays(cohort)
