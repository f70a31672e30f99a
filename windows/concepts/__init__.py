"""Clinical concept tracks of one ICU stay on an hourly grid, computed with pandas
from the normalized (CLIF vocabulary) event table; no database access. pandas
and the computing modules are imported by the functions that compute, so that
naming the columns (CONCEPT_COLUMNS, columns.STATUSES) does not load them.

    from windows.concepts import compute_stay_tracks, CONCEPT_COLUMNS
    tracks = compute_stay_tracks(events, intime=stay.intime, outtime=stay.outtime)

Definitions: /work/shared/CLINICAL_CONCEPTS.md (mimic-code's MIMIC-IV concepts,
KDIGO 2012, Sepsis-3, SOFA); each module's docstrings cite the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from windows.concepts.columns import CONCEPT_COLUMNS, ConceptColumn

if TYPE_CHECKING:
    import pandas as pd

    from windows.concepts.grid import Stay

__all__ = [
    "CONCEPTS_VERSION",
    "CONCEPT_COLUMNS",
    "EVENT_COLUMNS",
    "ConceptColumn",
    "compute_stay_tracks",
]

# Bumped whenever a definition changes what a track holds, so tracks stored by
# an older version are recomputed on their next read (windows.tracks signature).
CONCEPTS_VERSION = "2"


def __getattr__(name: str):
    # The computing modules import pandas; a process that only names the columns
    # (the web's pages: windows.selectors) imports this package without it.
    if name == "EVENT_COLUMNS":
        from windows.concepts.grid import EVENT_COLUMNS

        return EVENT_COLUMNS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compute_stay_tracks(
    events: pd.DataFrame,
    *,
    intime: pd.Timestamp,
    outtime: pd.Timestamp,
    weight_kg: float | None = None,
    cultures_available: bool | None = None,
) -> pd.DataFrame:
    """Hourly concept tracks of one ICU stay.

    ``events``: one row per event with columns ``time`` (tz-aware; naive is read
    as UTC), ``end_time`` (interval records, else empty), ``kind``, ``domain``,
    ``category``, ``name``, ``value_num``, ``unit``, ``value_text`` (a numeric
    lab's specimen) and ``order_id`` (a MAR record's medication order; infusion
    rates are kept per order); only time, domain and category are required.
    Pass all events of the admission: labs up to 7 days before ``intime`` feed
    the KDIGO baseline; events after ``outtime`` are not read (cultures
    excepted, for the Sepsis-3 pairing), and the last hour ends at ``outtime``.

    ``weight_kg``: body weight used for per-kg rates; when None, the charted
    ``weight_kg`` vitals are used (each holds until the next, the first is
    carried back).

    ``cultures_available``: whether the source records microbiology cultures.
    None infers it from the presence of culture events; without cultures,
    suspicion of infection and Sepsis-3 are NaN (unknown).

    Returns one row per hour: ``hour`` (hours since ``intime`` of the hour's
    end; the row covers (end - 1 h, end]), ``hour_end`` (UTC) and the columns of
    CONCEPT_COLUMNS, NaN where unknown. Hours run from the first event's hour,
    at the earliest -24 and at the latest 0, to ceil(outtime - intime).
    ``attrs`` holds ``weight_kg`` (the weight reported for the stay) and
    ``sepsis3`` (None, or the onset, antibiotic, culture and SOFA times of the
    first Sepsis-3 match as UTC timestamps).
    """
    from windows.concepts.grid import prepare_stay

    stay = prepare_stay(events, intime=intime, outtime=outtime, weight_kg=weight_kg)
    return tracks_for(stay, cultures_available=cultures_available)


def tracks_for(stay: Stay, *, cultures_available: bool | None = None) -> pd.DataFrame:
    import pandas as pd

    from windows.concepts.labs import lab_tracks
    from windows.concepts.renal import renal_tracks
    from windows.concepts.respiratory import (
        pf_ratios,
        respiratory_tracks,
        ventilation_episodes,
    )
    from windows.concepts.sepsis import infection_tracks
    from windows.concepts.sofa import hourly_components, sofa_inputs, worst_24h
    from windows.concepts.vasoactive import vasoactive_tracks
    from windows.concepts.vitals import neuro_tracks, vital_tracks

    tracks: dict = {}
    tracks.update(vital_tracks(stay))
    tracks.update(neuro_tracks(stay))
    tracks.update(lab_tracks(stay))
    episodes = ventilation_episodes(stay)
    pf = pf_ratios(stay, episodes)
    tracks.update(respiratory_tracks(stay, episodes, pf))
    tracks.update(vasoactive_tracks(stay))
    renal, urine = renal_tracks(stay)
    tracks.update(renal)

    components = hourly_components(
        stay, sofa_inputs(stay, tracks=tracks, pf=pf, urine=urine)
    )
    worst = worst_24h(components)
    tracks.update({name: worst[name].to_numpy() for name in worst.columns})

    infection, _, match = infection_tracks(
        stay, tracks["sofa"], cultures_available=cultures_available
    )
    tracks.update(infection)

    # One frame built from all columns at once: inserting the columns one by
    # one cost 12 ms a stay (surveillance replays this 13 times per stay).
    frame = pd.DataFrame(
        {
            "hour": stay.hours,
            "hour_end": stay.hour_end,
            **{name: tracks[name] for name in CONCEPT_COLUMNS},
        }
    )
    frame.attrs["weight_kg"] = stay.weight_used()
    frame.attrs["sepsis3"] = (
        None
        if match is None
        else {
            key: stay.intime + pd.Timedelta(getattr(match, key), unit="ns")
            for key in ("onset", "antibiotic_time", "culture_time", "sofa_time", "met")
        }
    )
    return frame
