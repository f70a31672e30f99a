"""Candidate windows and their action density, the Gold draw, and the bedside
context, on small stays built by tests/windows/stay_builders.py."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from tests.windows.stay_builders import add_events, dense_stay, gold_indexes, make_stay
from windows.models import (
    Cohort,
    CohortStay,
    CohortStratum,
    EventKind,
    SampleRegime,
    Stay,
    Window,
)
from windows.selectors_context import bedside_events, window_actions
from windows.windowing import windows_build, windows_build_many, windows_sample_gold

pytestmark = pytest.mark.django_db


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
