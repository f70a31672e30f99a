"""Stays with their windows for the window page, stay page and tracks JSON tests,
the URLs of those pages, and readers of the event table's rows."""

import re
from datetime import timedelta

from django.urls import reverse

from tests.factories import drip, make_events, make_stay, ventilation, vital
from windows.windowing import windows_build, windows_sample_gold


def build_stay(hours: float = 48, **fields):
    """A stay with its 30-minute windows every 2 h (window i starts at 2i h)."""
    stay = make_stay(hours=hours, **fields)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    return stay


def _with_query(url: str, query: dict) -> str:
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return url


def window_url(stay, index: int, **query) -> str:
    return _with_query(reverse("windows:window_detail", args=[stay.pk, index]), query)


def tracks_url(stay, **query) -> str:
    return _with_query(reverse("windows:stay_tracks_json", args=[stay.pk]), query)


def event_row(html: str, event) -> str | None:
    """The table row of ``event``, or None when the table does not show it."""
    match = re.search(
        rf'<tr class="[^"]*" data-event-id="{event.pk}">.*?</tr>', html, re.DOTALL
    )
    return match.group(0) if match else None


def row_classes(html: str, event) -> set[str]:
    match = re.search(rf'<tr class="([^"]*)" data-event-id="{event.pk}">', html)
    assert match, f"event {event.pk} is not in the table"
    return set(match.group(1).split())


def group_heads(html: str) -> list[str]:
    return re.findall(r'<th scope="rowgroup" colspan="6">([^<]+?) <span', html)


def _stay_with_tracks(hours: float = 24):
    """A stay of ``hours`` with a weight, a MAP every 30 min, a drip, two
    ventilation chartings, its windows and two of them drawn Gold."""
    stay = build_stay(hours=hours)
    admission = stay.admission
    t0 = stay.intime
    vital(stay, "weight_kg", 80.0, -1, unit="kg")
    make_events(
        admission=admission,
        count=int(hours * 2),
        start=t0,
        every=timedelta(minutes=30),
        category="map",
        name="MAP",
        value_num=71.234,
        unit="mmHg",
    )
    drip(stay, "norepinephrine", 0.1234, 0.5)
    for hour in (2, 6):  # an episode needs two chartings
        ventilation(stay, hour)
    windows_sample_gold(stay=stay, seed=0, per_stay=2)
    return stay
