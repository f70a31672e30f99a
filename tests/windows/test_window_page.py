"""The window page physicians label on, the stay page's window strip, and the
tracks JSON the plots read."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import (
    at,
    code_status,
    coded_procedure,
    death,
    drip,
    lab,
    make_admission,
    make_event,
    make_events,
    make_patient,
    make_stay,
    ventilation,
    vital,
)
from windows.models import (
    DiseaseGroup,
    Domain,
    EventKind,
    StayTracks,
    Window,
)
from windows.selectors import TRACK_SERIES, VENTILATION_LEVELS
from windows.tracks import stay_tracks_get
from windows.windowing import windows_build, windows_sample_gold

pytestmark = pytest.mark.django_db


def build_stay(hours: float = 48, **fields):
    """A stay with its 30-minute windows every 2 h (window i starts at 2i h)."""
    stay = make_stay(hours=hours, **fields)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    return stay


def window_url(stay, index: int, **query) -> str:
    url = reverse("windows:window_detail", args=[stay.pk, index])
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return url


def tracks_url(stay, **query) -> str:
    url = reverse("windows:stay_tracks_json", args=[stay.pk])
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return url


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


# Header and window bounds ---------------------------------------------------


def test_window_page_shows_the_patient_header_and_the_window_bounds(signed_in):
    patient = make_patient(pseudo_id="PWIN0001", sex="Male", age=71)
    stay = build_stay(
        admission=make_admission(patient=patient),
        admission_diagnosis="J96.01 Acute respiratory failure with hypoxia",
        disease_group=DiseaseGroup.RESPIRATORY,
        care_unit="Medical ICU",
    )
    window = Window.objects.get(stay=stay, index=3)  # [+6 h, +6.5 h)
    code_status(stay, 1)
    # An hour after the window: not yet known.
    assert window.end == at(stay, 6.5)
    code_status(stay, 7.5, "DNR", "DNR (do not resuscitate)")
    vital(stay, "weight_kg", 82.5, 2, unit="kg", name="Daily weight")

    response = signed_in.get(window_url(stay, 3))
    html = response.content.decode()

    assert response.status_code == 200
    for text in (
        "PWIN0001",
        "Male",
        "71",
        "J96.01 Acute respiratory failure with hypoxia",
        "Respiratory Disorders",
        "Medical ICU",
        "82.5 kg",
        ">Full</span>",
        "Window 3",
        "6.0 h to 6.5 h since ICU admission",
        "2024-01-02 14:00–14:30",
    ):
        assert text in html, text
    assert "DNR" not in html
    # The hospital outcome is not part of the labelling page's header.
    assert "Survived" not in html


def test_code_status_charted_at_the_window_end_is_not_yet_known(signed_in):
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=2)
    # A window is [start, end): a charting at its end belongs to what follows.
    assert window.end == at(stay, 4.5)
    code_status(stay, 4.5, "DNR", "DNR")
    html = signed_in.get(window_url(stay, 2)).content.decode()
    assert "Not recorded" in html and ">DNR<" not in html
    html = signed_in.get(window_url(stay, 3)).content.decode()
    assert ">DNR</span>" in html


def test_weight_without_charting_falls_back_to_the_tracks_weight(signed_in):
    stay = build_stay()
    drip(stay, "norepinephrine", 0.1, 1)
    StayTracks.objects.update_or_create(
        stay=stay,
        defaults={
            "events_signature": "x",
            "hours": [],
            "columns": {},
            "meta": {"weight_kg": 70.25},
        },
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "70.2 kg" in html or "70.3 kg" in html


# Event table -----------------------------------------------------------------


@pytest.fixture
def stay_with_events():
    """A 48 h stay and events around its window 5 ([+10 h, +10.5 h))."""
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=5)
    assert (window.start, window.end) == (at(stay, 10), at(stay, 10.5))
    heart_rate = {"category": "heart_rate", "value": 88.0, "unit": "bpm"}
    events = {
        "seven_h_before": vital(stay, hours=3, name="HR 7 h before", **heart_rate),
        "five_h_before": vital(stay, hours=5, name="HR 5 h before", **heart_rate),
        "action_before": drip(
            stay, "norepinephrine", 0.05, 9, name="Norepinephrine earlier"
        ),
        "in_window": lab(
            stay, "lactate", 3.1, 10 + 5 / 60, "mmol/L", name="Lactate in window"
        ),
        "window_action": drip(
            stay,
            "norepinephrine",
            0.2,
            10 + 10 / 60,
            "dose_change",
            name="Norepinephrine up",
        ),
        "at_end": vital(stay, hours=10.5, name="HR at window end", **heart_rate),
        "after": vital(stay, hours=13.5, name="HR later", **heart_rate),
        "death": death(stay, 10 + 20 / 60),
    }
    return stay, window, events


def test_event_table_covers_six_hours_before_the_window_to_its_end(
    signed_in, stay_with_events
):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert event_row(html, events["five_h_before"]) is not None
    assert event_row(html, events["seven_h_before"]) is None
    assert event_row(html, events["in_window"]) is not None
    assert event_row(html, events["window_action"]) is not None
    assert event_row(html, events["at_end"]) is None
    assert event_row(html, events["after"]) is None
    assert event_row(html, events["death"]) is None  # outcomes are never shown
    assert "Showing 1–4 of 4 events" in html


def test_window_actions_are_highlighted(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert "window-action" in row_classes(html, events["window_action"])
    assert "pos-in" in row_classes(html, events["window_action"])
    # An action before the window and an observation in it are not its actions.
    assert "window-action" not in row_classes(html, events["action_before"])
    assert "pos-before" in row_classes(html, events["action_before"])
    assert row_classes(html, events["in_window"]) == {"pos-in"}


def test_events_are_grouped_by_domain_in_reading_order(signed_in, stay_with_events):
    stay, _, _ = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert group_heads(html) == ["Vitals", "Labs", "Continuous medications"]
    # Within a group, time order.
    body = html.split('data-domain="medication_admin_continuous"')[1]
    assert body.index("Norepinephrine earlier") < body.index("Norepinephrine up")


def test_widening_shows_the_whole_stay(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5, scope="stay")).content.decode()

    for key in ("seven_h_before", "five_h_before", "window_action", "at_end", "after"):
        assert event_row(html, events[key]) is not None, key
    assert "pos-after" in row_classes(html, events["after"])
    assert "window-action" in row_classes(html, events["window_action"])
    assert event_row(html, events["death"]) is None
    assert "Showing 1–7 of 7 events" in html
    # The control that narrows it back.
    assert 'href="?scope=window"' in html


def test_window_page_offers_the_whole_stay_control(signed_in, stay_with_events):
    stay, _, _ = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()
    assert re.search(
        r'<a class="button button-small" href="\?scope=stay"[^>]*'
        r'hx-get="\?scope=stay"[^>]*data-shortcut-scope',
        html,
    )


def test_whole_stay_pages_its_events_and_says_how_many(signed_in):
    stay = build_stay(hours=100)
    make_events(
        admission=stay.admission,
        count=600,
        start=stay.intime,
        every=timedelta(minutes=10),
    )
    first = signed_in.get(window_url(stay, 10, scope="stay")).content.decode()
    third = signed_in.get(window_url(stay, 10, scope="stay", page=3)).content.decode()

    assert "Showing 1–250 of 600 events" in first
    assert "Page 1 of 3" in first
    assert "page=2" in first and "data-page-next" in first
    assert first.count("data-event-id=") == 250
    assert "Showing 501–600 of 600 events" in third
    assert third.count("data-event-id=") == 100
    # The group heading says the domain's whole count, and what this page holds.
    assert "600 events, 100 on this page" in third


def test_event_table_filters_by_domain(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5, domain="labs")).content.decode()
    assert group_heads(html) == ["Labs"]
    assert event_row(html, events["in_window"]) is not None
    assert "Showing 1–1 of 1 event" in html
    # An unknown domain is ignored.
    html = signed_in.get(window_url(stay, 5, domain="nope")).content.decode()
    assert "Showing 1–4 of 4 events" in html


def test_htmx_request_gets_only_the_event_table(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    response = signed_in.get(window_url(stay, 5, scope="stay"), HTTP_HX_REQUEST="true")
    html = response.content.decode()

    assert html.lstrip().startswith('<section id="window-events"')
    assert "<html" not in html and "Stay overview" not in html
    assert event_row(html, events["after"]) is not None
    assert "HX-Request" in response["Vary"]


def test_event_text_from_a_data_file_is_escaped(signed_in):
    stay = build_stay(admission_diagnosis="<img src=x onerror=alert(2)>")
    window = Window.objects.get(stay=stay, index=1)
    make_event(
        admission=stay.admission,
        time=window.start + timedelta(minutes=1),
        kind=EventKind.ACTION,
        domain=Domain.MED_INTERMITTENT,
        category="<b>cat</b>",
        name="<script>alert(1)</script>",
        value_num=None,
        value_text='"><svg onload=alert(3)>',
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<svg onload" not in html
    assert "<b>cat</b>" not in html


# Navigation -----------------------------------------------------------------


def test_previous_and_next_windows_are_linked_with_their_keys(signed_in):
    stay = build_stay(hours=8)  # windows 0..3
    first = signed_in.get(window_url(stay, 0)).content.decode()
    middle = signed_in.get(window_url(stay, 1)).content.decode()
    last = signed_in.get(window_url(stay, 3)).content.decode()

    assert f'href="{window_url(stay, 1)}" data-shortcut-next' in first
    assert "data-shortcut-prev" not in first
    assert f'href="{window_url(stay, 0)}" data-shortcut-prev' in middle
    assert f'href="{window_url(stay, 2)}" data-shortcut-next' in middle
    assert "data-shortcut-next" not in last
    # The keys are shown on the page and in the "?" panel.
    assert "<kbd>[</kbd>" in middle and "<kbd>]</kbd>" in middle
    panel = middle.split('id="shortcut-help"')[1]
    assert "Next window" in panel and "Previous window" in panel
    assert reverse("windows:stay_detail", args=[stay.pk]) in middle


def test_window_page_loads_the_plots_and_their_data(signed_in):
    stay = build_stay(hours=8)
    html = signed_in.get(window_url(stay, 2)).content.decode()
    assert "vendor/uPlot.iife.min.js" in html and "vendor/uPlot.min.css" in html
    assert "js/trajectory.js" in html
    assert f'data-tracks-url="{tracks_url(stay)}?window=2"' in html
    assert "data-overview" in html and "data-plots" in html


def test_gold_windows_are_listed_on_the_window_page(signed_in):
    stay = build_stay(hours=24)
    gold = windows_sample_gold(stay=stay, seed=1, per_stay=3)
    html = signed_in.get(window_url(stay, gold[0].index)).content.decode()
    assert "Gold windows of this stay" in html
    for window in gold[1:]:
        assert f'href="{window_url(stay, window.index)}"' in html
    assert "badge-gold" in html


@pytest.mark.parametrize(
    "make_url",
    [
        lambda stay: reverse("windows:window_detail", args=[stay.pk + 1000, 0]),
        lambda stay: reverse("windows:window_detail", args=[stay.pk, 99]),
        lambda stay: reverse("windows:stay_tracks_json", args=[stay.pk + 1000]),
        lambda stay: tracks_url(stay, window=99),
        lambda stay: tracks_url(stay, window="x"),
    ],
)
def test_unknown_stay_or_window_is_404(signed_in, make_url):
    stay = build_stay(hours=8)
    assert signed_in.get(make_url(stay)).status_code == 404


@pytest.mark.parametrize("name", ["window_detail", "stay_tracks_json"])
def test_signed_out_visitor_is_sent_to_the_login_page(client, name):
    stay = build_stay(hours=8)
    args = [stay.pk, 0] if name == "window_detail" else [stay.pk]
    response = client.get(reverse(f"windows:{name}", args=args))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# Stay page -----------------------------------------------------------------


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


# Tracks JSON ----------------------------------------------------------------


def _stay_with_tracks(hours: float = 24):
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


# Queries do not grow with the stay ------------------------------------------


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


# Coded records and concept names ---------------------------------------------


def coded_section(html: str) -> str:
    match = re.search(r"<section class=\"coded-records\".*?</section>", html, re.DOTALL)
    assert match, "no coded-after-discharge section"
    return match.group(0)


def test_coded_records_are_listed_apart_marked_and_titled_never_in_the_window_table(
    signed_in,
):
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=3)
    # Billed at 05:00 of a date inside the window's look-back: it must not be
    # interleaved as if ventilation > 96 h had been charted then.
    assert window.start == at(stay, 6)
    coded = coded_procedure(stay, 5)
    coded_procedure(stay, 5, "ICD9", "9671")
    charted = make_event(admission=stay.admission, time=window.start)

    for url in (window_url(stay, 3), window_url(stay, 3, scope="stay")):
        html = signed_in.get(url).content.decode()
        assert event_row(html, charted) is not None
        assert event_row(html, coded) is None
        section = coded_section(html)
        assert "Coded after discharge" in section
        assert "5A1955Z" in section
        assert "Respiratory Ventilation, Greater than 96 Consecutive Hours" in section
        assert "96.71" in section
        assert "Continuous invasive mechanical ventilation" in section
        # Not citable as evidence: coded rows carry no event id.
        assert "data-event-id" not in section
        # The domain filter does not count them either.
        assert "Procedures (" not in html.split("coded-records")[0]


def test_htmx_event_table_keeps_the_coded_section(signed_in):
    """The annotation page embeds the event table partial: the coded section
    comes with it."""
    stay = build_stay()
    coded_procedure(stay, 30)
    html = signed_in.get(window_url(stay, 1), HTTP_HX_REQUEST="true").content.decode()
    assert "5A1955Z" in coded_section(html)


def test_window_without_coded_records_has_no_coded_section(signed_in):
    stay = build_stay()
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "coded-records" not in html


def test_events_are_named_by_their_concept_with_the_unit_of_their_value(signed_in):
    stay = build_stay()
    start = 2  # window 1's start, in hours since ICU admission
    temperature = vital(
        stay, "temp_c", 36.7, start, unit="°C", name="Temperature Fahrenheit"
    )
    weight = vital(
        stay, "weight_kg", 77.8, start, unit="kg", name="Admission Weight (lbs.)"
    )
    drug = drip(stay, "albumin_infusion", 20, start, name="Albumin 25%", unit="mL/hour")
    html = signed_in.get(window_url(stay, 1)).content.decode()
    temp_row, weight_row = event_row(html, temperature), event_row(html, weight)
    # The concept is what the row says; the source label is only a tooltip.
    assert ">Temperature</td>" in temp_row.replace("\n", "")
    assert "36.7 °C" in temp_row
    assert "source label: Temperature Fahrenheit" in temp_row
    assert ">Temperature Fahrenheit<" not in temp_row
    assert ">Weight</td>" in weight_row.replace("\n", "")
    assert "77.8 kg" in weight_row
    assert ">Admission Weight (lbs.)<" not in weight_row
    # A drug's product name says more than its category: shown beside it.
    drug_row = event_row(html, drug)
    assert "Albumin infusion" in drug_row
    assert '<span class="muted">Albumin 25%</span>' in drug_row


def test_admission_diagnosis_is_marked_as_coded_after_discharge(signed_in):
    stay = build_stay(
        admission_diagnosis="414.01 Coronary atherosclerosis of native coronary "
        "artery (ICD-9-CM)"
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "Admission diagnosis" in html
    assert "(coded after discharge)" in html
    assert "414.01 Coronary atherosclerosis of native coronary artery" in html
