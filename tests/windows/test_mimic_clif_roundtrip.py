"""The same real patients through both importers: the CLIF demo imported by
``import_clif``, and a MIMIC-IV folder generated from it by inverting the CLIF
consortium's conversion (tests/windows/mimic_roundtrip.py) imported by
``import_mimic``. Cohort, times, events, actions per window, the Gold draw and
the hourly concept tracks must agree, except for what the inversion cannot carry
(``NOT_CARRIED`` below, each with its reason)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.windows import clif_mimic_facts, mimic_roundtrip
from windows.concepts import CONCEPT_COLUMNS, EVENT_COLUMNS, compute_stay_tracks
from windows.importers.clif import clif_import
from windows.importers.mimic import mimic_import
from windows.models import Admission, Event, Patient, Source, Stay, Window
from windows.windowing import windows_build, windows_sample_gold

pytestmark = pytest.mark.django_db


def test_the_kept_mapping_facts_are_the_consortium_tables():
    """The round trip inverts tests/windows/clif_mimic_facts.py, so it runs where
    ../shared is absent; where the tables are, the facts must be theirs."""
    if not mimic_roundtrip.MAPPINGS.is_dir():
        pytest.skip(f"no consortium tables at {mimic_roundtrip.MAPPINGS} to compare")
    tables = mimic_roundtrip.inversion_facts_from_tables()
    assert clif_mimic_facts.VITALS == tables["vitals"]
    assert clif_mimic_facts.LABS == tables["labs"]
    assert clif_mimic_facts.MEDS == tables["meds"]
    assert clif_mimic_facts.MODES == tables["modes"]


# What the MIMIC-IV folder cannot give back, as (reason, side, rule): rows of
# that side matching the rule are left out of the event comparison.
NOT_CARRIED_ROWS = [
    (
        "gcs_total, braden_total and cam_total are computed by the consortium from "
        "their components; MIMIC-IV (MetaVision) charts only the components",
        "clif",
        lambda e: (
            (e["domain"] == "patient_assessments")
            & e["category"].isin(["gcs_total", "braden_total", "cam_total"])
        ),
    ),
    (
        "Ventilator Type (223848) is CLIF's vent_brand_name, which the CLIF importer "
        "does not read",
        "mimic",
        lambda e: e["category"] == "vent_brand_name",
    ),
]
# Columns that cannot agree for some rows, as (reason, column, rule): the column
# is blanked on both sides for rows matching the rule.
NOT_CARRIED_COLUMNS = [
    (
        "CLIF names respiratory and CRRT parameters by their column (fio2_set); "
        "MIMIC-IV by the item's label (Inspired O2 Fraction)",
        "name",
        lambda e: (
            e["domain"].isin(["respiratory_support", "crrt_therapy"])
            & ~e["category"].str.contains(":")
            & ~e["category"].isin(mimic_roundtrip.DEVICE_CATEGORIES_OF_DEMO)
        ),
    ),
    (
        "the consortium names GCS components gcs_eyes, gcs_verbal, gcs_motor and "
        "drops their text; MIMIC-IV names them by label and charts them as text",
        "name",
        lambda e: e["category"].isin(["gcs_eye", "gcs_verbal", "gcs_motor"]),
    ),
    (
        "(as above)",
        "value_text",
        lambda e: e["category"].isin(["gcs_eye", "gcs_verbal", "gcs_motor"]),
    ),
    (
        "CLIF's tracheostomy flag is carried forward by the consortium from "
        "tracheostomy procedures; MIMIC-IV's device row says only its device",
        "value_text",
        lambda e: (
            (e["domain"] == "respiratory_support")
            & e["category"].isin(mimic_roundtrip.DEVICE_CATEGORIES_OF_DEMO)
        ),
    ),
    (
        "procedure codes carry a date only: the consortium places them at local "
        "midnight (05:00 UTC), MIMIC-IV's chartdate at midnight; compared by date",
        "time",
        lambda e: e["kind"] == "coded",
    ),
]
MAR_ORDER_REASON = (
    "an order whose first CLIF MAR record is not a start (the consortium's records "
    "of one order out of step): MIMIC-IV's intervals start every order, so start "
    "and dose_change are compared alike in those orders"
)
# Hourly tracks that may differ, with the reason: none. (CLIF's gcs_total is the
# consortium's sum of the components, which MIMIC-IV does not chart; the concept
# derives the same total from the components on every stay-hour of the demo.)
NOT_CARRIED_TRACKS: dict[str, str] = {}


@pytest.fixture(scope="session")
def mimic_folder(tmp_path_factory, clif_demo_dir):
    folder = tmp_path_factory.mktemp("mimic_from_clif")
    mimic_roundtrip.write_mimic_folder(clif_demo_dir, folder)
    return folder


class RoundTrip:
    """Both imports, their events per hospitalization, stays matched by
    (hospitalization, intime)."""

    def __init__(self, clif_dir, mimic_dir):
        self.clif_summary = clif_import(directory=clif_dir)
        self.mimic_summary = mimic_import(directory=mimic_dir)
        self.events = {src: self._events(src) for src in (Source.CLIF, Source.MIMIC)}
        stays = {
            src: {
                (s.admission.source_id, s.intime): s
                for s in Stay.objects.filter(source=src).select_related("admission")
            }
            for src in (Source.CLIF, Source.MIMIC)
        }
        self.stay_keys = sorted(stays[Source.CLIF])
        self.stays = stays

    @staticmethod
    def _events(source) -> pd.DataFrame:
        rows = Event.objects.filter(admission__source=source).values_list(
            "admission__source_id", *EVENT_COLUMNS
        )
        frame = pd.DataFrame.from_records(list(rows), columns=["hosp", *EVENT_COLUMNS])
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
        frame["end_time"] = pd.to_datetime(frame["end_time"], utc=True)
        return frame


@pytest.fixture(scope="module")
def roundtrip(django_db_setup, django_db_blocker, clif_demo_dir, mimic_folder):
    with django_db_blocker.unblock():
        Patient.objects.all().delete()
        trip = RoundTrip(clif_demo_dir, mimic_folder)
        yield trip
        Patient.objects.all().delete()


def _orders_not_started(clif: pd.DataFrame) -> set:
    meds = clif[clif["domain"] == "medication_admin_continuous"].sort_values("time")
    first = meds.groupby(["hosp", "order_id", "name"])["value_text"].first()
    return set(first[first != "start"].index)


def _comparable(
    events: pd.DataFrame, side: str, odd_orders: set = frozenset()
) -> pd.DataFrame:
    e = events.copy()
    if odd_orders:
        keys = pd.Series(list(zip(e["hosp"], e["order_id"], e["name"])), index=e.index)
        odd = keys.isin(odd_orders) & e["value_text"].isin(["start", "dose_change"])
        e.loc[odd, "value_text"] = "start|dose_change"
    for _reason, who, rule in NOT_CARRIED_ROWS:
        if who == side:
            e = e[~rule(e)]
    for _reason, column, rule in NOT_CARRIED_COLUMNS:
        mask = rule(e)
        if column == "time":
            e.loc[mask, "time"] = e.loc[mask, "time"].dt.floor("D")
        elif column == "end_time":
            e.loc[mask, "end_time"] = pd.NaT
        else:
            e.loc[mask, column] = ""
    e["value_num"] = e["value_num"].astype("float64").round(6)
    e["end_time"] = e["end_time"].astype("int64").where(e["end_time"].notna(), 0)
    return e


EVENT_KEY = [
    "hosp",
    "time",
    "end_time",
    "domain",
    "category",
    "name",
    "value_num",
    "unit",
    "value_text",
    "order_id",
]


def _multiset_diff(
    clif: pd.DataFrame, mimic: pd.DataFrame, key: list[str]
) -> pd.DataFrame:
    a = clif[key].fillna({"value_num": -1e300}).value_counts().rename("clif")
    b = mimic[key].fillna({"value_num": -1e300}).value_counts().rename("mimic")
    both = pd.concat([a, b], axis=1).fillna(0)
    return both[both["clif"] != both["mimic"]].reset_index()


def event_differences(trip: RoundTrip) -> pd.DataFrame:
    odd = _orders_not_started(trip.events[Source.CLIF])
    clif = _comparable(trip.events[Source.CLIF], "clif", odd)
    mimic = _comparable(trip.events[Source.MIMIC], "mimic", odd)
    return _multiset_diff(clif, mimic, EVENT_KEY)


def _described(diff: pd.DataFrame) -> str:
    by = diff.assign(
        extra_clif=(diff["clif"] - diff["mimic"]).clip(lower=0),
        extra_mimic=(diff["mimic"] - diff["clif"]).clip(lower=0),
    )
    summary = by.groupby(["domain", "category"])[["extra_clif", "extra_mimic"]].sum()
    return summary.to_string() + "\n" + by.head(20).to_string()


def test_cohort_and_times_agree(roundtrip):
    def cohort(source):
        return sorted(
            (
                a.source_id,
                a.patient.source_id,
                a.admit_time,
                a.discharge_time,
                a.discharge_disposition,
                a.admission_type,
                a.patient.sex,
                [d["code"] for d in a.diagnoses],
            )
            for a in Admission.objects.filter(source=source).select_related("patient")
        )

    assert cohort(Source.CLIF) == cohort(Source.MIMIC)
    assert len(roundtrip.stay_keys) == 145
    assert sorted(roundtrip.stays[Source.MIMIC]) == roundtrip.stay_keys
    for key in roundtrip.stay_keys:
        c, m = roundtrip.stays[Source.CLIF][key], roundtrip.stays[Source.MIMIC][key]
        assert (c.outtime, c.care_unit, c.hospital_outcome) == (
            m.outtime,
            m.care_unit,
            m.hospital_outcome,
        ), key


def test_patient_ages_and_deaths_agree_but_where_mimic_keeps_only_a_date(roundtrip):
    """Age comes from anchor_age and anchor_year in MIMIC-IV: an admission's age is
    the first admission's age plus the years between, which the consortium's age
    at admission matches for all but one admission of the demo. A death after
    discharge has only a date in MIMIC-IV (dod)."""
    ages = {
        src: {
            a.source_id: a.age_at_admission
            for a in Admission.objects.filter(source=src)
        }
        for src in (Source.CLIF, Source.MIMIC)
    }
    differ = [
        h for h in ages[Source.CLIF] if ages[Source.CLIF][h] != ages[Source.MIMIC][h]
    ]
    assert len(differ) <= 1
    deaths = {
        src: {p.source_id: p.death_time for p in Patient.objects.filter(source=src)}
        for src in (Source.CLIF, Source.MIMIC)
    }
    for pid, died in deaths[Source.CLIF].items():
        other = deaths[Source.MIMIC][pid]
        assert (died is None) == (other is None), pid
        if died is not None:
            assert died.date() == other.date(), pid


def test_events_agree_in_time_category_value_and_unit(roundtrip):
    diff = event_differences(roundtrip)
    assert diff.empty, _described(diff)


def test_event_kinds_agree_per_domain_and_category(roundtrip):
    def counts(source, side):
        e = _comparable(roundtrip.events[source], side)
        return e.groupby(["domain", "category", "kind"]).size()

    both = pd.concat(
        [
            counts(Source.CLIF, "clif").rename("clif"),
            counts(Source.MIMIC, "mimic").rename("mimic"),
        ],
        axis=1,
    ).fillna(0)
    differ = both[both["clif"] != both["mimic"]]
    assert differ.empty, differ.to_string()


def _drop_not_carried_events() -> None:
    """Delete the events NOT_CARRIED_ROWS leaves out of the comparison, so that
    windows count the same records on both sides."""
    for _reason, side, rule in NOT_CARRIED_ROWS:
        source = Source.CLIF if side == "clif" else Source.MIMIC
        Event.objects.filter(pk__in=_event_ids(source, rule)).delete()


def _event_ids(source, rule) -> list[int]:
    rows = Event.objects.filter(admission__source=source).values_list(
        "pk", "admission__source_id", *EVENT_COLUMNS
    )
    frame = pd.DataFrame.from_records(
        list(rows), columns=["pk", "hosp", *EVENT_COLUMNS]
    )
    return frame.loc[rule(frame).to_numpy(), "pk"].tolist()


def test_actions_per_window_and_the_gold_draw_agree(roundtrip):
    """Windows, their action counts and high-density regimes agree once the events
    the inversion cannot carry are left out on both sides; the draw itself is
    seeded by the stay's source id (CLIF: hospitalization and ADT row, MIMIC-IV:
    stay_id), so the same pools give draws of the same size, not the same windows."""
    _drop_not_carried_events()
    differ = []
    for key in roundtrip.stay_keys:
        sides = []
        for src in (Source.CLIF, Source.MIMIC):
            stay = roundtrip.stays[src][key]
            windows_build(stay=stay)
            windows_sample_gold(stay=stay, seed=7)
            sides.append(
                [
                    (w.start, w.action_count, w.sample_regime, w.sampled_gold)
                    for w in Window.objects.filter(stay=stay).order_by("index")
                ]
            )
        clif, mimic = sides
        if [w[:3] for w in clif] != [w[:3] for w in mimic]:
            differ.append((key[0], sum(w[1] for w in clif), sum(w[1] for w in mimic)))
        assert sum(w[3] for w in clif) == sum(w[3] for w in mimic), key
    assert not differ, f"{len(differ)} stays (hosp, actions CLIF, MIMIC): {differ[:20]}"


def _tracks(trip, src, key):
    """The stay's tracks from all its admission's events: records coded after
    discharge carry a date only (05:00 UTC in the consortium's demo, midnight in
    MIMIC-IV), and windows.concepts leaves them out of the grid."""
    stay = trip.stays[src][key]
    events = trip.events[src]
    events = events[events["hosp"] == key[0]]
    events = events[list(EVENT_COLUMNS)]
    return compute_stay_tracks(
        events, intime=pd.Timestamp(stay.intime), outtime=pd.Timestamp(stay.outtime)
    )


def track_agreement(trip) -> pd.DataFrame:
    """Per concept, stay-hours in all and stay-hours equal between the importers."""
    total = {c: 0 for c in CONCEPT_COLUMNS}
    equal = {c: 0 for c in CONCEPT_COLUMNS}
    stays_differing: dict[str, list] = {c: [] for c in CONCEPT_COLUMNS}
    for key in trip.stay_keys:
        clif = _tracks(trip, Source.CLIF, key).set_index("hour")
        mimic = _tracks(trip, Source.MIMIC, key).set_index("hour")
        hours = clif.index.union(mimic.index)
        clif, mimic = clif.reindex(hours), mimic.reindex(hours)
        for col in CONCEPT_COLUMNS:
            a = pd.to_numeric(clif.get(col), errors="coerce").to_numpy(dtype=float)
            b = pd.to_numeric(mimic.get(col), errors="coerce").to_numpy(dtype=float)
            same = np.isclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)
            total[col] += len(hours)
            equal[col] += int(same.sum())
            if not same.all():
                stays_differing[col].append(key[0])
    return pd.DataFrame(
        {
            "stay_hours": total,
            "equal": equal,
            "share": {
                c: equal[c] / total[c] if total[c] else 1.0 for c in CONCEPT_COLUMNS
            },
            "stays": {c: stays_differing[c][:5] for c in CONCEPT_COLUMNS},
        }
    )


def test_hourly_tracks_agree(roundtrip):
    agreement = track_agreement(roundtrip)
    print("\n" + agreement.to_string())
    carried = agreement.drop(index=list(NOT_CARRIED_TRACKS))
    differ = carried[carried["share"] < 1.0]
    assert differ.empty, differ.to_string()


def test_mimic_import_summary_names_what_was_not_imported(roundtrip):
    """Admissions without an ICU stay and transfers' discharge rows are not
    imported, and the summary says so; every itemid of the generated folder is
    mapped, so none is reported unknown. The summary's events are those stored
    (issue 30: it counted the Temperature Site rows merged into their
    temperatures)."""
    summary = roundtrip.mimic_summary
    notes = "\n".join(summary.notes)
    assert "177 admissions without an ICU stay" in notes
    dropped = summary.dropped
    assert (
        dropped["hosp/transfers"][
            "discharge rows (the admissions' hospital-discharge outcome events say it)"
        ]
        == 133
    )
    # Every Temperature Site row has its temperature: all merged, none stored.
    assert dropped["icu/chartevents"] == {
        "Temperature Site rows (224642) merged into the temperature charted at "
        "their time (its site)": 3844
    }
    assert "unknown itemid" not in notes
    # The events as stored right after the import (a test above deletes some).
    assert summary.total_events == len(roundtrip.events[Source.MIMIC])
