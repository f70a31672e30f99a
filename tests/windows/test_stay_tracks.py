"""Stored concept tracks: computed from the admission's events, recomputed when
the events change, read back as they were computed."""

import pandas as pd
import pytest
from django.core.management import call_command

from tests.factories import drip, make_stay, vital
from windows.concepts import CONCEPTS_VERSION, compute_stay_tracks
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import StayTracks
from windows.tracks import stay_tracks_get, tracks_build_all

pytestmark = pytest.mark.django_db


def _norepinephrine_stay():
    stay = make_stay(hours=6)
    vital(stay, "weight_kg", 80.0, -1, unit="kg")
    drip(stay, "norepinephrine", 0.1, 0.5)
    for h in range(6):
        vital(stay, "map", 60.0 + h, h + 10 / 60, unit="mmHg")
    return stay


def test_tracks_are_stored_and_match_the_concepts():
    stay = _norepinephrine_stay()
    tracks = stay_tracks_get(stay=stay)
    assert StayTracks.objects.count() == 1
    hours = tracks.hours
    ne = dict(zip(hours, tracks.columns["norepinephrine"]))
    assert ne[1.0] == pytest.approx(0.1)
    assert dict(zip(hours, tracks.columns["sofa_cardiovascular"]))[2.0] == 3
    assert dict(zip(hours, tracks.columns["map"]))[3.0] == pytest.approx(62.0)
    # The same numbers as computing directly.
    from windows.models import Event

    frame = pd.DataFrame.from_records(
        list(
            Event.objects.filter(admission=stay.admission).values(
                "time",
                "end_time",
                *EVENT_VALUE_FIELDS,
            )
        )
    )
    direct = compute_stay_tracks(
        frame, intime=pd.Timestamp(stay.intime), outtime=pd.Timestamp(stay.outtime)
    )
    assert direct["ned"].fillna(-1).round(4).tolist() == [
        -1 if v is None else v for v in tracks.columns["ned"]
    ]


def test_new_events_recompute_the_tracks():
    stay = _norepinephrine_stay()
    first = stay_tracks_get(stay=stay)
    assert stay_tracks_get(stay=stay).computed_at == first.computed_at  # still current
    drip(stay, "norepinephrine", 0.3, 3 + 5 / 60, "dose_change")
    again = stay_tracks_get(stay=stay)
    assert again.events_signature != first.events_signature
    assert dict(zip(again.hours, again.columns["sofa_cardiovascular"]))[4.0] == 4


def test_tracks_stored_by_an_older_concepts_version_are_recomputed_on_read():
    stay = _norepinephrine_stay()
    first = stay_tracks_get(stay=stay)
    assert first.events_signature.startswith(f"v{CONCEPTS_VERSION}:")
    # as an older version stored them: another signature form, a wrong value
    old_signature = first.events_signature.split(":", 1)[1]
    StayTracks.objects.filter(pk=first.pk).update(
        events_signature=old_signature,
        columns={**first.columns, "norepinephrine": [0.0] * len(first.hours)},
    )
    again = stay_tracks_get(stay=stay)
    assert again.events_signature == first.events_signature
    assert dict(zip(again.hours, again.columns["norepinephrine"]))[
        1.0
    ] == pytest.approx(0.1)


def test_build_all_skips_current_stays_and_command_reports(capsys):
    stays = [_norepinephrine_stay(), _norepinephrine_stay()]
    assert tracks_build_all(stays=stays) == 2
    assert tracks_build_all(stays=stays) == 0
    call_command("build_concepts", force=True, inline=True)
    assert "2 stays computed" in capsys.readouterr().out
