"""Streamed contexts (agents.sessions) on the CLIF demo's longest real stays:
window by window, what a stay's session sent up to a window, rebuilt by the
client's ``Sessions`` as an endpoint would, is exactly that window's context
(the one bedside cut, windows.selectors_context: the window's own decisions
and their companion rows left out until the next window), every event is
sent once, and the last window's whole context is the union of the stay's
payloads. A stay's streamed bytes grow linearly with its windows; sent whole
with every window, with their square."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from realicu_client import Sessions

from agents.context import stay_contexts
from agents.sessions import StaySession
from windows.importers.clif import clif_import
from windows.models import Patient, Stay, Window
from windows.selectors_context import bedside_events
from windows.windowing import windows_build

STAYS = 3


@pytest.fixture(scope="module")
def demo_stays(django_db_setup, django_db_blocker, clif_demo_dir):
    """The demo imported and its longest stays' windows built."""
    with django_db_blocker.unblock():
        clif_import(directory=clif_demo_dir)
        stays = sorted(Stay.objects.all(), key=lambda s: (-s.length_hours, s.pk))
        stays = stays[:STAYS]
        for stay in stays:
            windows_build(stay=stay)
        yield stays
        Patient.objects.all().delete()


def _json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def _windows(stay) -> list[Window]:
    return list(Window.objects.filter(stay=stay).order_by("start", "id"))


@pytest.mark.django_db
def test_a_stays_payloads_add_up_to_each_windows_context(demo_stays):
    withheld = 0
    for stay in demo_stays:
        windows = _windows(stay)
        session, endpoint = StaySession(stay_id=stay.pk), Sessions()
        sent: set[int] = set()
        previous = None
        for ctx in stay_contexts(stay, [w.pk for w in windows]):
            payload = _json(session.payload(ctx))
            assert payload["sequence"] == ctx.window_index - windows[0].index
            ids = {e["event_id"] for e in payload["events"]}
            assert not ids & sent, ctx.window_id
            sent |= ids
            # Each event sent is the context's own row, as JSON gives it back.
            rows = {e["event_id"]: e for e in ctx.events}
            assert all(e == rows[e["event_id"]] for e in payload["events"])
            rebuilt = endpoint.receive(payload)
            assert [e["event_id"] for e in rebuilt["events"]] == list(rows)
            assert [w["window_id"] for w in rebuilt["past_windows"]] == [
                w.window_id for w in ctx.past_windows
            ]
            if previous is not None:
                # Sent now though older than the previous window's end: that
                # window's own decisions, withheld from its context.
                late = [
                    t
                    for e in payload["events"]
                    if (t := datetime.fromisoformat(e["time"])) < previous.end
                ]
                assert all(previous.start <= t for t in late)
                withheld += len(late)
            previous = ctx
        # The last window's context by the SQL form of the cut.
        expected = bedside_events(window=windows[-1], exclude_window_actions=True)
        assert sent == set(expected.values_list("pk", flat=True))
    assert withheld > 0  # the windows' own decisions were in play


@pytest.mark.django_db
def test_streamed_bytes_grow_linearly_whole_ones_quadratically(demo_stays):
    stay = demo_stays[0]
    windows = _windows(stay)
    streamed = StaySession(stay_id=stay.pk, mode="streamed")
    whole = StaySession(stay_id=stay.pk, mode="full")
    sizes: dict[str, list[int]] = {"streamed": [], "full": []}
    for ctx in stay_contexts(stay, [w.pk for w in windows]):
        for name, session in (("streamed", streamed), ("full", whole)):
            body = json.dumps(session.payload(ctx), ensure_ascii=False)
            sizes[name].append(len(body.encode("utf-8")))
    n, last = len(windows), sizes["full"][-1]
    assert n >= 40
    # Streamed: the history once, then a window's own fields and new events.
    assert sum(sizes["streamed"]) < 1.5 * last + 2048 * n
    # Whole: about half the last payload per window.
    assert sum(sizes["full"]) > n / 4 * last
