"""The active Gold draw (issue 33): windows where other Oracle runs disagree
with the first are drawn with a higher probability, as much higher as the
Oracle's error on that level of disagreement was on the labels so far; every
window keeps the uniform floor's; the windows labelled before the draw (the
pilot) count with it, each window's probability of being in the Gold set being
1 - (1 - p)(1 - q); every pool window's probability, level and phase and the
floor are stored; bad settings change nothing."""

from __future__ import annotations

import importlib
import io
import math

import numpy as np
import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import (
    Campaign,
    CampaignWindow,
    ConsensusLabel,
)
from annotation.services.campaigns import campaign_create
from evaluation.ppi import DEFAULT_FLOOR
from evaluation.ppi_active import NEYMAN_FLOOR, union_probabilities
from oracle.models import GoldInclusion, GoldInclusionPhase
from oracle.services.gold_draw import gold_campaign_draw_active, label_disagreement
from tests.exports.helpers import make_consensus, oracle_payload

pytestmark = pytest.mark.django_db


def _draw(two_runs, **overrides):
    kwargs = {
        "admin": two_runs["admin"],
        "name": "active",
        "run": two_runs["a"],
        "second_run": two_runs["b"],
        "budget": 20,
        "physicians": two_runs["physicians"],
        "floor": 0.5,
        "seed": 3,
        **overrides,
    }
    return gold_campaign_draw_active(**kwargs)


def test_disagreement_counts_status_and_each_set_task():
    from oracle.models import OracleLabel

    a = OracleLabel(status="stable", payload=oracle_payload(problems=["AKI"]))
    b = OracleLabel(status="stable", payload=oracle_payload(problems=["aki"]))
    c = OracleLabel(status="deteriorating", payload=oracle_payload(problems=["ARDS"]))
    assert label_disagreement(a, b) == 0.0
    # Status differs (1), problems share nothing (1), the other sets are empty.
    assert label_disagreement(a, c) == pytest.approx(2 / 4)


def test_windows_where_the_runs_disagree_are_drawn_more_likely_and_stored(two_runs):
    campaign = _draw(two_runs)
    rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=campaign)}
    # Every pool window has a row (its level, for lam's strata); the drawn
    # ones are the campaign's. No labels so far: no pilot.
    assert set(rows) == {w.pk for w in two_runs["windows"]}
    stored = {w: g for w, g in rows.items() if g.phase == GoldInclusionPhase.ACTIVE}
    in_campaign = set(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )
    assert stored and set(stored) == in_campaign
    assert {g.phase for g in rows.values()} <= {"active", "none"}
    assert {g.pilot_probability for g in rows.values()} == {None}
    disagree = {w.pk for w in two_runs["windows"][30:]}
    # No labels so far: the levels' own uncertainty (level 2 of 0-3 for a
    # disagreement of 1/2, 0 for none) stands for their moments, so only the
    # 10 uncertain windows share the rest of the budget. Floor: half the
    # budget over 40 windows: 20 * (0.5/40 + 0.5/10) = 1.25, capped at 1 with
    # the excess going back to the 30 others.
    for window_id, row in rows.items():
        assert row.floor == 0.5
        if window_id in disagree:
            assert row.probability == pytest.approx(1.0)
            assert row.uncertainty == pytest.approx(0.5)
            assert row.level == 2
        else:
            assert row.probability == pytest.approx((20 - 10) / 30)
            assert row.uncertainty == 0.0
            assert row.level == 0
    assert disagree <= set(stored)
    source = next(iter(stored.values())).source
    assert "disagreement of Oracle runs" in source
    assert "too few labels so far" in source


def _label_earlier(two_runs, windows, consensus, name):
    """An earlier Gold campaign whose consensus on ``windows`` is
    ``consensus`` (status, problems)."""
    campaign = campaign_create(
        admin=two_runs["admin"],
        name=name,
        windows=windows,
        physicians=two_runs["physicians"],
    )
    status, problems = consensus
    for window in windows:
        make_consensus(
            campaign=campaign, window=window, status=status, problems=problems
        )
    return campaign


def test_with_labels_so_far_each_level_gets_the_root_of_its_error(two_runs):
    windows = two_runs["windows"]
    # Physicians agreed with run a (stable, AKI) on 15 windows the runs agree
    # on (level 0), and on 5 where they disagree (level 2) said deteriorating,
    # Septic shock: run a's distance there is (1 + 1 + 0) / 3 = 2/3.
    _label_earlier(two_runs, windows[:15], ("stable", ["AKI"]), "earlier")
    _label_earlier(
        two_runs, windows[30:35], ("deteriorating", ["Septic shock"]), "earlier 2"
    )
    campaign = _draw(two_runs, floor=None, budget=4)
    # Squared distances: 15 zeros on level 0, 5 of 4/9 on level 2; pooled
    # 5 * 4/9 / 20 = 1/9, ten windows' worth of it added to each level:
    # m0 = (10/9) / 25 = 2/45, m2 = (20/9 + 10/9) / 15 = 2/9. The pool is 30
    # windows of level 0 and 10 of level 2, floor 0.2: for a total budget B
    # the square-root rule gives level 0 B (0.2 / 40 + 0.8 sqrt(m0) / R) and
    # level 2 B (0.2 / 40 + 0.8 sqrt(m2) / R), R = 30 sqrt(m0) + 10 sqrt(m2).
    m0, m2 = 2 / 45, 2 / 9
    roots = 30 * math.sqrt(m0) + 10 * math.sqrt(m2)
    rule = {
        level: NEYMAN_FLOOR / 40 + (1 - NEYMAN_FLOOR) * math.sqrt(m) / roots
        for level, m in ((0, m0), (2, m2))
    }
    # The 20 labelled windows are the pilot, a uniform draw of the 40: p =
    # 1/2. Four new windows top it up: level 0's rule stays below 1/2 (no new
    # window there), so 10 (pi_2 - 1/2) = 4: pi_2 = 0.9 at B = 0.9 / rule_2,
    # q_2 = (0.9 - 0.5) / 0.5 = 0.8; pilot windows alike (their own labels
    # left out, the rule still puts level 0 under 1/2 and level 2 at 0.9).
    total = 0.9 / rule[2]
    assert rule[0] * total < 0.5
    pi = {0: 0.5, 2: 0.9}
    rows = list(GoldInclusion.objects.filter(campaign=campaign))
    assert len(rows) == 40
    for row in rows:
        assert row.floor == NEYMAN_FLOOR
        assert row.pilot_probability == pytest.approx(0.5)
        assert row.probability == pytest.approx(pi[row.level])
    labelled = {w.pk for w in windows[:15] + windows[30:35]}
    assert {r.window_id for r in rows if r.phase == "pilot"} == labelled
    # The pilot windows are not labelled again: the campaign holds the drawn
    # windows that had no consensus.
    in_campaign = set(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )
    assert in_campaign == {r.window_id for r in rows if r.phase == "active"}
    assert in_campaign and not in_campaign & labelled
    assert {r.level for r in rows if r.phase == "active"} == {2}
    assert "error on the labels so far" in rows[0].source


def _physicians_label(two_runs, campaign, windows):
    """The physicians' consensus on ``windows`` of ``campaign``: run a's
    reading (stable, AKI) where the runs agree, b's where they disagree."""
    disagree = {w.pk for w in two_runs["windows"][30:]}
    for window in windows:
        status, problems = (
            ("deteriorating", ["Septic shock"])
            if window.pk in disagree
            else ("stable", ["AKI"])
        )
        make_consensus(
            campaign=campaign, window=window, status=status, problems=problems
        )


def test_an_earlier_active_draw_is_the_pilot_with_its_own_probabilities(two_runs):
    # The first draw has no labels: the levels' own uncertainty. Its Gold
    # windows are labelled; the second draw's pilot is that draw, exactly.
    first = _draw(two_runs, name="first", budget=32, floor=None, seed=1)
    first_rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=first)}
    drawn = [w for w in two_runs["windows"] if first_rows[w.pk].phase == "active"]
    assert len(drawn) >= 20
    _physicians_label(two_runs, first, drawn)
    second = _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    rows = list(GoldInclusion.objects.filter(campaign=second))
    assert len(rows) == 40
    p = {w: g.probability for w, g in first_rows.items()}
    # The moments weight each labelled window by 1 / its first-draw
    # probability (Hajek): run a is at distance 2/3 from the physicians on
    # the labelled level-2 windows, 0 on level 0; the second draw tops the
    # first up with 12 new windows (evaluation.ppi_active.union_probabilities).
    ids = sorted(w.pk for w in drawn)
    level = {w: g.level for w, g in first_rows.items()}
    distance = {w: 2 / 3 if level[w] == 2 else 0.0 for w in ids}
    pool = sorted(p)
    labelled = np.array([w in set(ids) for w in pool])
    residuals = [distance.get(w, 0.0) for w in pool]
    _, pi, _, _ = union_probabilities(
        np.array([p[w] for w in pool]),
        labelled,
        [level[w] for w in pool],
        residuals,
        12,
    )
    for row, pi_w in zip(sorted(rows, key=lambda r: r.window_id), pi):
        assert row.pilot_probability == pytest.approx(p[row.window_id])
        assert row.probability == pytest.approx(pi_w)
        assert row.probability >= row.pilot_probability - 1e-12
        assert row.phase != "pilot" or row.window_id in set(ids)
    assert {r.window_id for r in rows if r.phase == "pilot"} == set(ids)
    assert f"pilot of draw {first.pk}" in rows[0].source
    # Not a uniform pilot: the first draw's probabilities differ by level.
    assert len({round(r.pilot_probability, 9) for r in rows}) > 1


def test_no_new_draw_while_the_earlier_draws_windows_wait_for_labels(two_runs):
    # The first draw's Gold windows are labelled but two: those two would be
    # missing labels that the weights take as answered. The second draw is
    # refused, names them, and writes nothing; once they are labelled it runs.
    first = _draw(two_runs, name="first", budget=32, floor=None, seed=1)
    first_rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=first)}
    drawn = [w for w in two_runs["windows"] if first_rows[w.pk].phase == "active"]
    _physicians_label(two_runs, first, drawn[:-2])
    campaigns, rows = Campaign.objects.count(), GoldInclusion.objects.count()
    with pytest.raises(ValidationError, match="2 Gold window") as refused:
        _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    assert str(drawn[-1].pk) in str(refused.value)
    assert (Campaign.objects.count(), GoldInclusion.objects.count()) == (
        campaigns,
        rows,
    )
    _physicians_label(two_runs, first, drawn[-2:])
    second = _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    assert GoldInclusion.objects.filter(campaign=second).count() == 40


def test_a_disputed_window_holds_the_next_draw_and_a_dropped_one_does_not(two_runs):
    # Every Gold window of the first draw has a consensus, but one has an open
    # dispute: it is not settled, so the next draw is refused and names it.
    # Once the admins drop that window instead, it is settled and the draw runs.
    first = _draw(two_runs, name="first", budget=32, floor=None, seed=1)
    first_rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=first)}
    drawn = [w for w in two_runs["windows"] if first_rows[w.pk].phase == "active"]
    _physicians_label(two_runs, first, drawn)
    disputed = ConsensusLabel.objects.get(campaign=first, window=drawn[0])
    disputed.dispute_count = 1
    disputed.save(update_fields=["dispute_count"])
    with pytest.raises(
        ValidationError, match=rf"1 Gold window.*windows {drawn[0].pk}\)"
    ):
        _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    assert not Campaign.objects.filter(name="second").exists()
    disputed.dropped = True
    disputed.save(update_fields=["dropped"])
    second = _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    rows = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=second)}
    # The dropped window has no label: it is no pilot window of the new draw.
    assert rows[drawn[0].pk].phase != GoldInclusionPhase.PILOT
    assert rows[drawn[1].pk].phase == GoldInclusionPhase.PILOT


def test_labels_from_outside_the_earlier_draw_count_as_a_uniform_pilot(two_runs):
    first = _draw(two_runs, name="first", budget=32, floor=None, seed=1)
    rows = GoldInclusion.objects.filter(campaign=first)
    drawn = [w for w in two_runs["windows"] if rows.get(window=w).phase == "active"]
    outside = [w for w in two_runs["windows"] if rows.get(window=w).phase == "none"]
    _physicians_label(two_runs, first, drawn)
    # One window the first draw did not take was labelled in another campaign:
    # the labels so far are not that draw's sample.
    _label_earlier(two_runs, outside[:1], ("stable", ["AKI"]), "by hand")
    second = _draw(two_runs, name="second", budget=12, floor=None, seed=2)
    pilots = set(
        GoldInclusion.objects.filter(campaign=second).values_list(
            "pilot_probability", flat=True
        )
    )
    assert len(pilots) == 1
    assert pilots.pop() == pytest.approx((len(drawn) + 1) / 40)
    assert "pilot counted uniform" in (
        GoldInclusion.objects.filter(campaign=second).first().source
    )


def test_the_floor_defaults_to_the_wide_one_without_labels(two_runs):
    campaign = _draw(two_runs, floor=None)
    floors = set(
        GoldInclusion.objects.filter(campaign=campaign).values_list("floor", flat=True)
    )
    assert floors == {DEFAULT_FLOOR}


def test_more_runs_average_their_disagreement(two_runs):
    from tests.exports.helpers import make_oracle_run, oracle_payload

    windows = two_runs["windows"]
    # A third run agrees with run a everywhere: the uncertainty on the 10
    # windows where b disagrees halves, to 1/4 (level 1).
    third = make_oracle_run(
        admin=two_runs["admin"],
        labels={w: ("stable", oracle_payload(problems=["AKI"])) for w in windows},
        validated=False,
        name="c",
    )
    campaign = _draw(two_runs, more_runs=[third])
    disagree = {w.pk for w in windows[30:]}
    for row in GoldInclusion.objects.filter(campaign=campaign):
        if row.window_id in disagree:
            assert row.uncertainty == pytest.approx(0.25)
            assert row.level == 1
        else:
            assert row.level == 0


def test_the_migration_reads_old_draws_floor_from_their_source(two_runs):
    migration = importlib.import_module(
        "oracle.migrations.0009_goldinclusion_floor_level"
    )
    campaign = _draw(two_runs)
    rows = list(GoldInclusion.objects.filter(campaign=campaign)[:2])
    GoldInclusion.objects.filter(pk=rows[0].pk).update(
        floor=1.0, source="disagreement of Oracle runs 1 and 2; uniform floor 0.35"
    )
    GoldInclusion.objects.filter(pk=rows[1].pk).update(floor=1.0, source="by hand")
    migration.floors_from_source(apps, None)
    rows[0].refresh_from_db()
    rows[1].refresh_from_db()
    assert rows[0].floor == 0.35
    # No floor in the text: the default of the time.
    assert rows[1].floor == 0.7


def test_the_command_draws_and_reports(two_runs):

    out = io.StringIO()
    names = ",".join(p.get_username() for p in two_runs["physicians"])
    call_command(
        "gold_draw_active",
        name="by command",
        run=two_runs["a"].pk,
        second_run=two_runs["b"].pk,
        budget=12,
        physicians=names,
        admin=two_runs["admin"].get_username(),
        stdout=out,
    )
    campaign = Campaign.objects.get(name="by command")
    assert f"Campaign {campaign.pk}" in out.getvalue()
    assert "uniform floor 0.7" in out.getvalue()
    assert GoldInclusion.objects.filter(campaign=campaign, floor=0.7).exists()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"budget": 0}, "budget"),
        ({"floor": 0.0}, "floor"),
        ({"second_run": "same"}, "different Oracle runs"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_written(two_runs, overrides, message):
    if overrides.get("second_run") == "same":
        overrides = {"second_run": two_runs["a"]}
    before = Campaign.objects.count()
    with pytest.raises(ValidationError, match=message):
        _draw(two_runs, **overrides)
    assert Campaign.objects.count() == before
    assert not GoldInclusion.objects.exists()


def test_the_command_names_an_unknown_run(two_runs):
    with pytest.raises(CommandError, match="No Oracle run 999999"):
        call_command(
            "gold_draw_active",
            name="x",
            run=two_runs["a"].pk,
            second_run=999999,
            budget=5,
            physicians="nobody",
            admin=two_runs["admin"].get_username(),
        )
    assert not Campaign.objects.exists()


def test_the_command_takes_several_other_runs(two_runs):
    from tests.exports.helpers import make_oracle_run, oracle_payload

    third = make_oracle_run(
        admin=two_runs["admin"],
        labels={
            w: ("stable", oracle_payload(problems=["AKI"])) for w in two_runs["windows"]
        },
        validated=False,
        name="c",
    )
    names = ",".join(p.get_username() for p in two_runs["physicians"])
    options = {
        "name": "three runs",
        "run": two_runs["a"].pk,
        "budget": 12,
        "physicians": names,
        "admin": two_runs["admin"].get_username(),
        "stdout": io.StringIO(),
    }
    with pytest.raises(CommandError, match="comma-separated"):
        call_command("gold_draw_active", second_run="b", **options)
    call_command(
        "gold_draw_active", second_run=f"{two_runs['b'].pk},{third.pk}", **options
    )
    rows = GoldInclusion.objects.filter(campaign__name="three runs")
    # Run c agrees with a: b's disagreement of 1/2 is averaged to 1/4.
    assert set(rows.values_list("uncertainty", flat=True)) <= {0.0, 0.25}
    assert f"Oracle runs {two_runs['a'].pk} and {two_runs['b'].pk}, {third.pk}" in (
        rows.first().source
    )
