"""The event behind each plotted point (tracks JSON with ?sources=1), which the
annotation page cites when a physician clicks a point of a plot."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse

from tests.factories import drip, lab, make_admission, make_event, make_stay
from windows.models import Domain
from windows.tracks import track_sources

pytestmark = pytest.mark.django_db


@pytest.fixture
def stay():
    stay = make_stay(admission=make_admission(), hours=12)
    t0 = stay.intime
    a = stay.admission
    stay.hr_early = make_event(
        admission=a, time=t0 + timedelta(minutes=10), value_num=90
    )
    stay.hr_late = make_event(
        admission=a, time=t0 + timedelta(minutes=50), value_num=100
    )
    stay.hr_hour3 = make_event(
        admission=a, time=t0 + timedelta(hours=2, minutes=30), value_num=80
    )
    stay.lactate = lab(stay, "lactate", 4.0, 0.5, unit="mmol/L", name="Lactate")
    stay.norepinephrine = drip(stay, "norepinephrine", 0.1, 20 / 60)
    # Another admission's heart rate in the same hour is never a source.
    other = make_stay(admission=make_admission(), hours=12)
    make_event(admission=other.admission, time=t0 + timedelta(minutes=40))
    return stay


def _tracks(client, stay, **query):
    url = reverse("windows:stay_tracks_json", args=[stay.pk])
    response = client.get(url, query)
    assert response.status_code == 200
    return json.loads(response.content)


def test_each_point_names_the_latest_event_behind_it(signed_in, stay):
    data = _tracks(signed_in, stay, sources="1")
    at = {h: i for i, h in enumerate(data["hours"])}
    hr = data["sources"]["hr"]
    assert len(hr) == len(data["hours"])
    # Hour 1 covers (0, 1 h]: its mean heart rate comes from two chartings; the
    # latest is cited. Hour 2 has no charting: no value, no source.
    assert data["series"]["hr"][at[1.0]] == 95
    assert hr[at[1.0]] == stay.hr_late.pk
    assert data["series"]["hr"][at[2.0]] is None and hr[at[2.0]] is None
    assert hr[at[3.0]] == stay.hr_hour3.pk
    # A lab is carried forward for 12 h, and so is its source.
    lactate = data["sources"]["lactate"]
    assert lactate[at[1.0]] == lactate[at[6.0]] == stay.lactate.pk
    assert data["sources"]["ned"][at[4.0]] == stay.norepinephrine.pk
    # Composite scores have no single event behind a value.
    assert "sofa" not in data["sources"] and "aki_stage" not in data["sources"]
    assert set(data["sources"]) <= set(track_sources())


def test_sources_only_when_asked_and_cached_apart(signed_in, stay):
    plain = signed_in.get(reverse("windows:stay_tracks_json", args=[stay.pk]))
    assert "sources" not in json.loads(plain.content)
    with_sources = signed_in.get(
        reverse("windows:stay_tracks_json", args=[stay.pk]), {"sources": "1"}
    )
    assert with_sources["ETag"] != plain["ETag"]


def test_an_event_after_icu_discharge_is_never_a_source(signed_in):
    stay = make_stay(admission=make_admission(), hours=2.5)
    t0 = stay.intime
    before = make_event(
        admission=stay.admission, time=t0 + timedelta(hours=2, minutes=20), value_num=90
    )
    make_event(
        admission=stay.admission, time=t0 + timedelta(hours=2, minutes=40), value_num=40
    )
    data = _tracks(signed_in, stay, sources="1")
    last = data["hours"].index(3.0)
    # The last hour ends at discharge (2.5 h): the 2:40 charting is not in it.
    assert data["series"]["hr"][last] == 90
    assert data["sources"]["hr"][last] == before.pk


def test_a_venous_po2_is_never_the_source_of_a_p_f_ratio(signed_in):
    stay = make_stay(admission=make_admission(), hours=6)
    t0, a = stay.intime, stay.admission
    make_event(
        admission=a,
        time=t0 + timedelta(minutes=30),
        domain=Domain.RESPIRATORY,
        category="fio2_set",
        name="fio2 set",
        value_num=0.5,
    )
    po2 = {"unit": "mmHg", "name": "pO2"}
    arterial = lab(stay, "po2_arterial", 90, 40 / 60, value_text="arterial", **po2)
    lab(stay, "po2_arterial", 35, 1.5, value_text="venous", **po2)
    data = _tracks(signed_in, stay, sources="1")
    at = {h: i for i, h in enumerate(data["hours"])}
    # The venous gas of 1:30 gives no P/F: hour 2 shows the arterial 180.
    assert data["series"]["pf_ratio"][at[2.0]] == 180
    assert data["sources"]["pf_ratio"][at[2.0]] == arterial.pk
