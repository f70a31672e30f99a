"""The active Gold draw (issue 33): windows where two Oracle runs disagree are
drawn with a higher probability, every window keeps the uniform floor's, the
drawn windows' probabilities are stored, and bad settings change nothing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.roles import Role
from annotation.models import Campaign, CampaignWindow
from oracle.models import GoldInclusion
from oracle.services.gold_draw import gold_campaign_draw_active, label_disagreement
from tests.annotation.conftest import make_role_user
from tests.exports.helpers import make_oracle_run, oracle_payload
from tests.factories import make_stay
from windows.models import Window
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_runs():
    """Two runs over 40 sampled Gold windows: they agree on 30, and on the
    other 10 they differ in status and problems."""
    stay = make_stay(hours=80)
    windows = windows_build(stay=stay)[:40]
    Window.objects.filter(pk__in=[w.pk for w in windows]).update(sampled_gold=True)
    admin = make_role_user(Role.ADMIN)
    same = {w: ("stable", oracle_payload(problems=["AKI"])) for w in windows}
    other = dict(same)
    for w in windows[30:]:
        other[w] = ("deteriorating", oracle_payload(problems=["Septic shock"]))
    a = make_oracle_run(admin=admin, labels=same, validated=False, name="a")
    b = make_oracle_run(admin=admin, labels=other, validated=False, name="b")
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    return {
        "admin": admin,
        "a": a,
        "b": b,
        "windows": windows,
        "physicians": physicians,
    }


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
    stored = {g.window_id: g for g in GoldInclusion.objects.filter(campaign=campaign)}
    in_campaign = set(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )
    assert stored and set(stored) == in_campaign
    disagree = {w.pk for w in two_runs["windows"][30:]}
    # Floor: half the budget over 40 windows; the rest over the 10 uncertain
    # ones (uncertainty 1/2 each): 20 * (0.5/40 + 0.5/10) = 1.25, capped at 1
    # with the excess going back to the 30 others.
    for window_id, row in stored.items():
        if window_id in disagree:
            assert row.probability == pytest.approx(1.0)
            assert row.uncertainty == pytest.approx(0.5)
        else:
            assert row.probability == pytest.approx((20 - 10) / 30)
            assert row.uncertainty == 0.0
    assert disagree <= set(stored)
    assert "disagreement of Oracle runs" in next(iter(stored.values())).source


def test_the_command_draws_and_reports(two_runs):
    import io

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
    assert GoldInclusion.objects.filter(campaign=campaign).exists()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"budget": 0}, "budget"),
        ({"floor": 0.0}, "floor"),
        ({"second_run": "same"}, "two different Oracle runs"),
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
