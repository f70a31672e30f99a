"""The stay page's window strip, the tracks JSON the plots read (what it holds,
its size, its ETag), and the queries of the window page and the JSON, which do
not grow with the stay."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import at, code_status, drip, make_events, make_stay, vital
from tests.windows.window_pages import (
    _stay_with_tracks,
    build_stay,
    tracks_url,
    window_url,
)
from windows.models import Domain, EventKind, StayTracks, Window
from windows.selectors import TRACK_SERIES, VENTILATION_LEVELS
from windows.tracks import stay_tracks_get
from windows.windowing import windows_build, windows_sample_gold

pytestmark = pytest.mark.django_db


def test_stay_page_links_each_window_with_density_and_gold_marks(signed_in):
    stay = build_stay(hours=12)  # windows 0..5
    windows_sample_gold(stay=stay, seed=3, per_stay=2)
    gold = set(
        Window.objects.filter(stay=stay, sampled_gold=True).values_list(
            "index", flat=True
        )
    )
    html = signed_in.get(
        reverse("windows:stay_detail", args=[stay.pk])
    ).content.decode()

    marks = re.findall(r'<a class="wmark( is-gold)?" href="([^"]+)"', html)
    assert [href for _, href in marks] == [window_url(stay, i) for i in range(6)]
    assert {i for i, (g, _) in enumerate(marks) if g} == gold
    assert "6 windows of 30 min" in html
    assert f'data-tracks-url="{tracks_url(stay)}"' in html


def test_stay_page_window_mark_tells_its_hours_counts_density_and_gold(signed_in):
    stay = make_stay(hours=12)  # windows 0..5, window 2 from 4 h to 4.5 h
    # Window 2: 8 events, 1 an action: density 0.125, which the title rounds
    # half up as it always has (0.13, not 0.12).
    make_events(
        admission=stay.admission,
        count=7,
        start=at(stay, 4.0),
        every=timedelta(minutes=3),
    )
    drip(stay, "norepinephrine", 0.1, 4.25)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    Window.objects.filter(stay=stay, index=2).update(sampled_gold=True)

    html = signed_in.get(
        reverse("windows:stay_detail", args=[stay.pk])
    ).content.decode()

    assert (
        f'<a class="wmark is-gold" href="{window_url(stay, 2)}" style="--h: 23%" '
        'title="Window 2 · 4.0 h · 8 events, 1 actions (density 0.13) · Gold">'
        '<span class="visually-hidden">Window 2 (Gold)</span></a>'
    ) in html
    # An empty window keeps the floor height, and no Gold mark.
    assert (
        f'<a class="wmark" href="{window_url(stay, 3)}" style="--h: 12%" '
        'title="Window 3 · 6.0 h · 0 events, 0 actions (density 0.00)">'
        '<span class="visually-hidden">Window 3</span></a>'
    ) in html
    assert (
        '<div class="window-strip-axis muted"><span>0 h</span><span>10 h</span></div>'
    ) in html


def test_stay_page_without_windows_says_so(signed_in):
    stay = make_stay(hours=6)
    html = signed_in.get(
        reverse("windows:stay_detail", args=[stay.pk])
    ).content.decode()
    assert "No windows yet" in html


def test_tracks_json_holds_the_stored_tracks_and_the_windows(signed_in):
    stay = _stay_with_tracks()
    tracks = stay_tracks_get(stay=stay)

    response = signed_in.get(tracks_url(stay, window=3))
    data = json.loads(response.content)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert set(data) == {
        "stay",
        "hours",
        "series",
        "levels",
        "windows",
        "current",
        "weight_kg",
    }
    assert data["hours"] == tracks.hours
    assert set(data["series"]) == set(TRACK_SERIES)
    for name, decimals in TRACK_SERIES.items():
        stored = tracks.columns[name]
        if name == "ventilation":
            expected = [
                None if v is None else VENTILATION_LEVELS.index(v) for v in stored
            ]
        else:
            expected = [None if v is None else round(v, decimals) for v in stored]
        assert data["series"][name] == pytest.approx(expected), name
        assert len(data["series"][name]) == len(data["hours"])
    assert data["series"]["map"][3] == 71  # whole mmHg
    assert 0.123 in data["series"]["ned"]  # 3 decimals for doses
    assert data["levels"]["ventilation"] == list(VENTILATION_LEVELS)
    assert VENTILATION_LEVELS.index("invasive") in data["series"]["ventilation"]
    assert data["weight_kg"] == tracks.meta["weight_kg"] == 80.0

    windows = list(Window.objects.filter(stay=stay).order_by("index"))
    assert [w["index"] for w in data["windows"]] == [w.index for w in windows]
    assert [w["gold"] for w in data["windows"]] == [w.sampled_gold for w in windows]
    assert data["windows"][3] == {
        "index": 3,
        "start_h": 6.0,
        "end_h": 6.5,
        "gold": windows[3].sampled_gold,
        "density": round(windows[3].action_density, 3),
    }
    assert data["current"] == {"index": 3, "start_h": 6.0, "end_h": 6.5}
    assert data["stay"] == stay.pk


def test_tracks_json_without_a_window_has_no_current(signed_in):
    stay = _stay_with_tracks()
    data = json.loads(signed_in.get(tracks_url(stay)).content)
    assert data["current"] is None


def test_tracks_json_is_compact(signed_in):
    stay = _stay_with_tracks()
    body = signed_in.get(tracks_url(stay, window=1)).content.decode()
    assert ", " not in body and ": " not in body
    assert "NaN" not in body
    # No more decimals than each series keeps.
    assert not re.search(r"\d\.\d{4,}", body)


def test_tracks_json_computes_missing_tracks(signed_in):
    stay = _stay_with_tracks()
    assert not StayTracks.objects.filter(stay=stay).exists()
    data = json.loads(signed_in.get(tracks_url(stay)).content)
    assert StayTracks.objects.filter(stay=stay).exists()
    assert data["hours"] == StayTracks.objects.get(stay=stay).hours


def test_tracks_json_answers_304_while_nothing_changed(signed_in):
    stay = _stay_with_tracks()
    first = signed_in.get(tracks_url(stay, window=2))
    etag = first["ETag"]
    assert etag.startswith('"') and "no-cache" in first["Cache-Control"]
    assert "private" in first["Cache-Control"]

    again = signed_in.get(tracks_url(stay, window=2), HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag

    # Another window is another document.
    other = signed_in.get(tracks_url(stay, window=3), HTTP_IF_NONE_MATCH=etag)
    assert other.status_code == 200 and other["ETag"] != etag


def test_tracks_json_etag_changes_with_the_events(signed_in):
    stay = _stay_with_tracks()
    etag = signed_in.get(tracks_url(stay))["ETag"]
    vital(stay, "map", 40.0, 5, unit="mmHg", name="MAP")

    response = signed_in.get(tracks_url(stay), HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 200
    assert response["ETag"] != etag
    tracks = StayTracks.objects.get(stay=stay)
    assert json.loads(response.content)["series"]["map"] == [
        None if v is None else round(v) for v in tracks.columns["map"]
    ]


def test_tracks_json_etag_changes_with_the_gold_draw(signed_in):
    stay = _stay_with_tracks()
    etag = signed_in.get(tracks_url(stay))["ETag"]
    Window.objects.filter(stay=stay).update(sampled_gold=True)
    response = signed_in.get(tracks_url(stay), HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200
    assert all(w["gold"] for w in json.loads(response.content)["windows"])


def _stay_of(hours: int):
    """A stay with vitals every 15 min, a lab every 6 h and an infusion change
    every 4 h, its windows and its stored tracks."""
    stay = build_stay(hours=hours)
    admission = stay.admission
    t0 = stay.intime
    every_15_min = timedelta(minutes=15)
    creatinine = {"domain": Domain.LABS, "category": "creatinine", "unit": "mg/dL"}
    norepinephrine = {
        "kind": EventKind.ACTION,
        "domain": Domain.MED_CONTINUOUS,
        "category": "norepinephrine",
        "unit": "mcg/kg/min",
    }
    for count, every, fields in (
        (hours * 4, every_15_min, {"category": "heart_rate"}),
        (hours * 4, every_15_min, {"category": "map", "value_num": 70.0}),
        (hours // 6, timedelta(hours=6), {**creatinine, "value_num": 1.2}),
        (hours // 4, timedelta(hours=4), {**norepinephrine, "value_num": 0.05}),
    ):
        make_events(admission=admission, count=count, start=t0, every=every, **fields)
    code_status(stay, 0)
    windows_sample_gold(stay=stay, seed=0)
    stay_tracks_get(stay=stay)
    return stay


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_window_page_and_json_queries_do_not_grow_with_the_stay(
    signed_in, django_assert_max_num_queries
):
    short, long = _stay_of(10), _stay_of(300)
    middle = Window.objects.filter(stay=long).count() // 2

    page_short = _queries(signed_in, window_url(short, 2))
    page_long = _queries(signed_in, window_url(long, middle))
    stay_scope_short = _queries(signed_in, window_url(short, 2, scope="stay"))
    stay_scope_long = _queries(signed_in, window_url(long, middle, scope="stay"))
    json_short = _queries(signed_in, tracks_url(short, window=2))
    json_long = _queries(signed_in, tracks_url(long, window=middle))

    assert page_long == page_short
    assert stay_scope_long == stay_scope_short
    assert json_long == json_short
    # session, user, the user's roles, window, code status and weight, Gold
    # windows, domain counts, one page of events, the coded records
    with django_assert_max_num_queries(9):
        signed_in.get(window_url(long, middle))
    # session, user, the user's roles, stay, windows, events signature, tracks
    # version, series
    with django_assert_max_num_queries(8):
        signed_in.get(tracks_url(long, window=middle))
