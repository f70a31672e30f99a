"""Liveness on the pages counts in seconds (accounts.templatetags.timing): a
worker last heard 43 s ago is not "0 minutes" ago."""

from datetime import timedelta

from django.template import Context, Template
from django.utils import timezone

from accounts.templatetags.timing import ago_text


def test_ago_counts_seconds_then_minutes_hours_and_days():
    now = timezone.now()
    assert ago_text(now - timedelta(seconds=43), now) == "43 s"
    assert ago_text(now - timedelta(seconds=119), now) == "119 s"
    assert ago_text(now - timedelta(minutes=7, seconds=5), now) == "7 min"
    assert ago_text(now - timedelta(hours=3, minutes=4), now) == "3 h 4 min"
    assert ago_text(now - timedelta(days=3), now) == "3 d"
    assert ago_text(None, now) == ""


def test_the_filter_renders_in_a_template():
    moment = timezone.now() - timedelta(seconds=43)
    out = Template("{% load timing %}last heard {{ t|ago }} ago").render(
        Context({"t": moment})
    )
    assert out in ("last heard 43 s ago", "last heard 44 s ago")
