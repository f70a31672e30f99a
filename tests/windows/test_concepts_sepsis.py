"""Antibiotics, suspicion of infection and Sepsis-3 (CLINICAL_CONCEPTS.md
section 10). Pure pandas, no database."""

import pandas as pd

from tests.windows.concept_tracks import T0, at, column, tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(72)


def antibiotic(hours, category="vancomycin", kind="action", text="given"):
    return event(
        hours,
        "medication_admin_intermittent",
        category,
        1000,
        unit="mg",
        text=text,
        kind=kind,
    )


def culture(hours):
    return event(hours, "microbiology_culture", "blood culture", text="no growth")


def platelets(hours, value=40):  # 40 -> coagulation 3, a SOFA of 3
    return event(hours, "labs", "platelet_count", value)


def test_a_culture_then_an_antibiotic_within_72_hours_is_suspicion_from_the_culture():
    frame = tracks([culture(1.5), antibiotic(60.0)])
    assert column(frame, "suspected_infection", [1, 2, 72]) == [0, 1, 1]
    assert at(frame, 60, "antibiotic") == 1 and at(frame, 59, "antibiotic") == 0


def test_an_antibiotic_then_a_culture_within_24_hours_is_suspicion_from_the_dose():
    frame = tracks([antibiotic(5.5), culture(29.0)])
    assert column(frame, "suspected_infection", [5, 6]) == [0, 1]


def test_cultures_too_far_from_the_antibiotic_are_no_suspicion():
    # The culture 73 h before the dose, then a culture 24.5 h after a dose.
    for rows in ([culture(1.0), antibiotic(74.0)], [antibiotic(10.0), culture(34.5)]):
        frame = tracks(rows + [platelets(12.5)], hours=80)
        assert (frame["suspected_infection"] == 0).all()
        assert (frame["sepsis3"] == 0).all()


def test_an_antibiotic_at_the_culture_time_pairs_with_neither_direction():
    frame = tracks([culture(5.0), antibiotic(5.0)])
    assert (frame["suspected_infection"] == 0).all()


def test_antibiotics_without_culture_data_are_not_suspicion_but_unknown():
    frame = tracks([antibiotic(2.5), platelets(3.5)])
    assert at(frame, 3, "antibiotic") == 1
    assert frame["suspected_infection"].isna().all() and frame["sepsis3"].isna().all()
    known = tracks([antibiotic(2.5), platelets(3.5)], cultures_available=True)
    assert (known["suspected_infection"] == 0).all() and (known["sepsis3"] == 0).all()


def test_a_dose_not_given_and_non_antibiotics_do_not_count():
    frame = tracks(
        [
            culture(1.5),
            antibiotic(3.5, kind="observation", text="not_given"),
            antibiotic(4.5, category="acetaminophen"),
        ]
    )
    assert (frame["antibiotic"] == 0).all()
    assert (frame["suspected_infection"] == 0).all()


def test_sepsis_3_is_suspicion_with_sofa_2_from_48_hours_before_to_24_after_onset():
    frame = tracks([culture(10.5), antibiotic(12.5), platelets(20.5)])
    # Onset 10.5 h (culture), SOFA >= 2 from hour 21 (within onset + 24 h):
    # both criteria documented at the end of hour 21.
    assert column(frame, "suspected_infection", [10, 11]) == [0, 1]
    assert column(frame, "sepsis3", [20, 21, 72]) == [0, 1, 1]
    match = frame.attrs["sepsis3"]
    assert match["onset"] == T0 + pd.Timedelta(hours=10.5)
    assert match["sofa_time"] == T0 + pd.Timedelta(hours=21)
    assert match["antibiotic_time"] == T0 + pd.Timedelta(hours=12.5)


def test_organ_dysfunction_before_the_onset_counts_back_to_48_hours():
    frame = tracks([platelets(0.5), culture(40.5), antibiotic(41.0)])
    assert column(frame, "sepsis3", [40, 41]) == [0, 1]
    assert frame.attrs["sepsis3"]["sofa_time"] == T0 + pd.Timedelta(hours=1)


def test_sofa_2_only_more_than_24_hours_after_the_onset_is_not_sepsis_3():
    frame = tracks([culture(2.5), antibiotic(3.0), platelets(30.0)], hours=60)
    assert at(frame, 40, "suspected_infection") == 1
    assert (frame["sepsis3"] == 0).all()
    assert frame.attrs["sepsis3"] is None


def test_sofa_below_2_is_not_sepsis_3():
    frame = tracks([culture(2.5), antibiotic(3.0), platelets(4.0, value=120)])
    assert (frame["sofa"] <= 1).all()
    assert (frame["sepsis3"] == 0).all()


def test_antibiotics_given_before_icu_admission_start_no_icu_suspicion():
    frame = tracks([culture(-6.0), antibiotic(-5.0), platelets(1.5)])
    assert (frame["suspected_infection"] == 0).all()
    assert at(frame, -5, "antibiotic") == 1
