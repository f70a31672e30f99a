"""Windows, the Gold draw, the bedside context and a cohort on the whole CLIF demo,
imported once for this module."""

from __future__ import annotations

import math

import pytest
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from tests.windows.stay_builders import _cohort_stays
from windows.cohort import cohort_build
from windows.importers.clif import clif_import
from windows.models import Cohort, Event, EventKind, Patient, SampleRegime, Stay, Window
from windows.selectors_context import (
    OUTCOME_REVEALING_CATEGORIES,
    bedside_events,
    bedside_filter,
    window_actions,
)
from windows.windowing import windows_build_many

pytestmark = pytest.mark.django_db


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
