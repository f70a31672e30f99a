"""Blindness proven by a canary crawl (spec section 4, issue 12): physicians
write unique canary strings into every free-text field of their labels; a
physician who shares windows with them (in two campaigns) then requests every
URL of every app, with every reading method, every term-suggestion prefix of
the canaries, the calibration pages and the researcher API. No response may
carry a canary until the shared windows are closed; after closing they reach
the co-rater where the rule allows (suggestions, calibration), and never a
physician outside the campaigns.

The world::

    campaign one: windows w0, w1       raters A, B on both
    campaign two: w0  A, D             (B rates w0 open in campaign one)
                  w1  A, B
                  w2  A, D             (A reuses one item of w1 here)
                  w3  A, E             (E shares nothing with B: the control)

Before the crawl campaign two's w0, w2 and w3 are adjudicated (a window closed
in one campaign while B still rates it in the other) and released as Gold. A
and D co-rate B's open windows: none of their words may reach B. E's words
may, and do (the control shows the crawl can see a leak).

The world and the crawl are tests/annotation/canary_world.py; an admin who
also rates is tests/annotation/test_blindness_canary_admin.py.
"""

from __future__ import annotations

import pytest

from annotation.models import CalibrationPair

from .canary_world import (  # noqa: F401 - fixtures among them
    CONTROL_TEXTS,
    _isolated,
    calibration_walk,
    client_of,
    close_shared_windows,
    crawl,
    draw_calibration_set,
    leak_report,
    leaks_in,
    suggested_texts,
    world,
)

pytestmark = pytest.mark.django_db


def test_no_canary_reaches_a_co_rater_before_the_shared_windows_close(world):
    found = crawl(world, world["b"])
    assert not found, leak_report(found)
    # The control: words of a physician who shares no window with B reach B's
    # suggestions, so the crawl would see a leak.
    suggested = suggested_texts(client_of(world["b"]), world["b"], CONTROL_TEXTS)
    assert all(text in suggested for text in CONTROL_TEXTS)
    # and B was shown calibration pairs (and judged them), of E's words and
    # B's own only
    judged = CalibrationPair.objects.filter(judgments__judge=world["b"])
    assert judged.exists()
    texts = {t for p in judged for t in (p.text_a, p.text_b)}
    assert all(t.startswith(("ctrl", "own item of b")) for t in texts), texts


def test_no_canary_reaches_a_physician_outside_the_campaigns(world, matcher):
    found = crawl(world, world["outsider"])
    assert not found, leak_report(found)
    close_shared_windows(world, matcher)
    found = crawl(world, world["outsider"])
    assert not found, leak_report(found)


def test_after_the_shared_windows_close_the_canaries_reach_the_co_rater(world, matcher):
    b = world["b"]
    close_shared_windows(world, matcher)
    client = client_of(b)

    # Suggestions: every canary of the campaigns B works in.
    suggested = suggested_texts(client, b, world["canaries"])
    missing = [c for c in world["canaries"] if c.lower() not in suggested]
    assert not missing, missing

    # Calibration: a set drawn now pairs the canaries, and B, invited, judges them.
    draw_calibration_set(
        world["admin"], "after", [world["one"], world["two"]], matcher, judges=[b]
    )
    shown = b"".join(body for _, body in calibration_walk(client))
    assert leaks_in(shown, world["canaries"])
