"""Building the hindsight context of many windows: few queries, the events
around each window, its recorded critical actions under a campaign's rules."""

from datetime import timedelta

import pytest

from annotation.critical import default_critical_action_rules
from oracle.context import window_contexts_build
from tests.factories import (
    coded_procedure,
    death,
    discharge_summary,
    drip,
    lab,
    make_admission,
    make_patient,
    make_stay,
    radiology_report,
    vital,
)
from tests.oracle.helpers import stable_stay, windows_of
from windows.models import Domain, Outcome

pytestmark = pytest.mark.django_db


def test_a_batch_of_many_windows_over_several_stays_costs_a_fixed_number_of_queries(
    django_assert_max_num_queries,
):
    stays = [stable_stay(hours=24) for _ in range(3)]
    windows = [w for stay in stays for w in windows_of(stay)]
    window_contexts_build(windows=windows)  # stores the tracks

    # stays, event signatures, stored tracks, events, key labs, coded records
    with django_assert_max_num_queries(6):
        contexts = window_contexts_build(windows=list(reversed(windows)))

    assert [c.window_id for c in contexts] == [w.pk for w in reversed(windows)]


def test_context_holds_the_events_around_the_window_and_its_recorded_actions():
    stay = stable_stay(hours=24)
    lab(stay, "creatinine", 1.3, -10, "mg/dL")
    action = drip(stay, "norepinephrine", 0.1, 10.2)
    routine = drip(stay, "insulin", 2, 10.3)
    death(stay, 10.25)
    window = windows_of(stay)[5]  # 10-10.5 h

    [context] = window_contexts_build(windows=[window], hours_before=2, hours_after=1)

    hours = [e["hours"] for e in context.events if not e.get("latest_before")]
    assert hours and min(hours) >= 8 and max(hours) < 11.5
    assert [e["id"] for e in context.recorded_actions] == [action.pk]
    assert routine.pk in context.allowed_event_ids
    assert all(e["category"] != "death" for e in context.events)
    [creat] = [e for e in context.events if e.get("latest_before")]
    assert creat["category"] == "creatinine" and creat["hours"] == -10
    assert context.allowed_event_ids == frozenset(e["id"] for e in context.events)
    assert context.static["hospital_outcome"] == "survived"
    assert context.static["disease_group"] == "Sepsis & Severe Infection"
    assert context.summary[0]["from_h"] == 0 and context.summary[-1]["to_h"] == 24
    assert context.tracks is not None and "sofa" in context.tracks


def test_a_campaigns_rules_decide_which_actions_are_rated():
    stay = stable_stay(hours=24)
    drip(stay, "norepinephrine", 0.1, 10.2)
    insulin = drip(stay, "insulin", 2, 10.3)
    rules = [
        r
        for r in default_critical_action_rules()
        if r["key"] != "vasoactives_inotropes"
    ]
    rules.append(
        {
            "key": "insulin",
            "label": "Insulin",
            "domains": [Domain.MED_CONTINUOUS.value],
            "categories": ["insulin"],
        }
    )

    [context] = window_contexts_build(
        windows=[windows_of(stay)[5]], critical_rules=rules
    )

    assert [e["id"] for e in context.recorded_actions] == [insulin.pk]


def test_coded_records_are_hindsight_facts_apart_from_the_events_and_not_citable():
    stay = stable_stay(hours=24)
    # Billed at a date inside the window's span: it must not appear as an event
    # there, nor be rated as one of the window's actions.
    coded = coded_procedure(stay, 6.1)
    coded_procedure(stay, 6.1, "ICD9", "9672")
    window = windows_of(stay)[3]  # [+6 h, +6.5 h)

    [context] = window_contexts_build(windows=[window])

    assert coded.pk not in {e["id"] for e in context.events}
    assert coded.pk not in {e["id"] for e in context.recorded_actions}
    assert coded.pk not in context.allowed_event_ids
    records = context.static["coded_after_discharge"]
    assert records == [
        {
            "date": coded.time.date().isoformat(),
            "system": "ICD-10-PCS",
            "code": "5A1955Z",
            "title": "Respiratory Ventilation, Greater than 96 Consecutive Hours",
        },
        {
            "date": coded.time.date().isoformat(),
            "system": "ICD-9-CM procedure",
            "code": "96.72",
            "title": "Continuous invasive mechanical ventilation for 96 consecutive hours "
            "or more",
        },
    ]


def test_events_carry_their_concept_name_and_the_unit_of_their_value():
    stay = stable_stay(hours=24)
    vital(stay, "temp_c", 36.7, 6.2, "°C", name="Temperature Fahrenheit")
    [context] = window_contexts_build(windows=[windows_of(stay)[3]])
    [temp] = [e for e in context.events if e["category"] == "temp_c"]
    assert (temp["concept"], temp["unit"], temp["name"]) == (
        "Temperature",
        "°C",
        "Temperature Fahrenheit",
    )


# Clinical notes (issue 21) ------------------------------------------------------


def test_context_holds_reports_around_and_before_the_window_and_the_discharge_summary(
    django_assert_max_num_queries,
):
    stay = stable_stay(hours=24)
    old = radiology_report(stay, -40, "FINDINGS: Old film.")  # more than 48 h before
    earlier = [radiology_report(stay, h, f"FINDINGS: earlier {h}") for h in (-5, 2, 4)]
    inside = radiology_report(stay, 10.1, "FINDINGS: New bilateral opacities.")
    discharge_summary(stay, 30, "Brief Hospital Course: recovered.")
    window = windows_of(stay)[5]  # 10-10.5 h
    window_contexts_build(windows=[window])  # stores the tracks

    with django_assert_max_num_queries(6):
        [context] = window_contexts_build(
            windows=[window], hours_before=2, hours_after=1
        )

    ids = [e["id"] for e in context.events]
    assert inside.pk in ids
    # The latest two reports before the span (8 h), marked as such.
    before = [e for e in context.events if e.get("latest_before")]
    assert [e["id"] for e in before if e["domain"] == "notes"] == [
        earlier[1].pk,
        earlier[2].pk,
    ]
    assert old.pk not in ids and earlier[0].pk not in ids
    assert context.allowed_event_ids == frozenset(ids)
    assert all(e["category"] != "discharge_summary" for e in context.events)
    [summary] = context.static["discharge_summaries"]
    assert summary["text"] == "Brief Hospital Course: recovered."


def test_the_context_gives_the_hours_from_icu_admission_to_death():
    """The death outcome event first; else the discharge of an admission whose
    disposition says expired; nothing for a survivor, whatever events say."""
    by_event = make_stay(hours=24, hospital_outcome=Outcome.DIED)
    death(by_event, 20.5)
    admission = make_admission(discharge_disposition="Expired")
    by_discharge = make_stay(
        admission=admission,
        hours=24,
        hospital_outcome=Outcome.DIED,
        intime=admission.discharge_time - timedelta(hours=30),
    )
    survivor = make_stay(hours=24)
    death(survivor, 5)
    windows = [windows_of(s)[0] for s in (by_event, by_discharge, survivor)]

    deaths = [c.static["death_h"] for c in window_contexts_build(windows=windows)]

    assert deaths == [20.5, 30.0, None]


def test_a_patient_death_time_within_the_admission_is_the_time_of_death():
    patient = make_patient()
    admission = make_admission(patient=patient)
    stay = make_stay(admission=admission, hours=24, hospital_outcome=Outcome.DIED)
    patient.death_time = stay.intime + timedelta(hours=26.25)
    patient.save()

    [context] = window_contexts_build(windows=[windows_of(stay)[0]])

    assert context.static["death_h"] == 26.25
