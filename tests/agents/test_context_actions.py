"""A window's own recorded actions are the answer of the Recommended Actions
task (spec section 1): they are never in its context, for reference agents and
online endpoints alike, and they are in every later window's context."""

from datetime import timedelta

import pytest

from agents.base import WindowContext
from agents.context import stay_contexts
from tests.factories import make_event

pytestmark = pytest.mark.django_db


def test_own_actions_left_out_and_seen_by_the_next_window(tiny_stays):
    stay = tiny_stays["stays"][0]
    a0, a1 = tiny_stays["windows"]["A"]
    action = tiny_stays["events"]["norepinephrine"]
    observation = make_event(
        admission=stay.admission, time=stay.intime + timedelta(minutes=15)
    )
    contexts = {c.window_id: c for c in stay_contexts(stay, [a0.pk, a1.pk])}
    first = {e["event_id"] for e in contexts[a0.pk].events}
    second = {e["event_id"] for e in contexts[a1.pk].events}
    # The window's own observation is there; its own action is not.
    assert observation.pk in first and action.pk not in first
    assert action.pk not in {e["event_id"] for e in contexts[a0.pk].payload()["events"]}
    # At the next window the action is in the past, and shown.
    assert {observation.pk, action.pk} <= second


def test_a_context_holding_its_own_action_is_refused(tiny_stays):
    stay = tiny_stays["stays"][0]
    a0 = tiny_stays["windows"]["A"][0]
    action = tiny_stays["events"]["norepinephrine"]
    with pytest.raises(ValueError, match="own recorded actions"):
        WindowContext(
            stay_id=stay.pk,
            window_id=a0.pk,
            window_index=a0.index,
            start=a0.start,
            end=a0.end,
            hours_since_admission=0.0,
            events=({"event_id": action.pk, "kind": "action"},),
            static={},
            event_times=(action.time,),
        )
