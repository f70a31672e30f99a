"""Checkpoint labels of the surveillance companion (spec section 10) on
hand-built trajectories: every family, the monotonic and current-evidence
rules, the decision, and that a checkpoint reads nothing recorded after it.
Pure pandas, no database."""

import pandas as pd
import pytest

from surveillance.checkpoints import (
    FINDINGS,
    checkpoint_hours,
    stay_checkpoints,
)
from windows.concepts.synthetic import event, events_frame

T0 = pd.Timestamp("2150-01-01 00:00", tz="UTC")
MED = "medication_admin_continuous"
RESP = "respiratory_support"


def points(rows, hours=60, **kwargs):
    return stay_checkpoints(
        events_frame(T0, rows),
        intime=T0,
        outtime=T0 + pd.Timedelta(hours=hours),
        **kwargs,
    )


def active(pts, name) -> list[int]:
    """The checkpoint hours at which ``name`` is active."""
    return [p.hours_since_admit for p in pts if any(f.name == name for f in p.findings)]


def antibiotic(hours):
    return event(
        hours,
        "medication_admin_intermittent",
        "vancomycin",
        1000,
        unit="mg",
        text="given",
        kind="action",
    )


def culture(hours):
    return event(hours, "microbiology_culture", "blood culture", text="no growth")


def test_checkpoints_every_4_hours_to_48_or_to_discharge():
    assert checkpoint_hours(60) == list(range(0, 49, 4))
    assert checkpoint_hours(10.5) == [0, 4, 8]
    assert len(points([], hours=60)) == 13


def test_every_finding_has_a_cited_definition():
    for spec in FINDINGS:
        doc = spec.rule.__doc__ or ""
        assert "CLINICAL_CONCEPTS.md" in doc or "spec section 10" in doc, spec.name


def test_suspected_infection_is_monotonic_from_the_antibiotic_after_the_culture():
    # Culture at 1.5 h, antibiotic at 9.5 h: suspicion is documented only once
    # the antibiotic is given; it stays active after.
    pts = points([culture(1.5), antibiotic(9.5)])
    assert active(pts, "suspected_infection") == list(range(12, 49, 4))


def test_sepsis_needs_organ_dysfunction_and_stays_active_once_triggered():
    rows = [culture(1.5), antibiotic(2.5), event(3.5, "labs", "platelet_count", 40)]
    pts = points(rows)
    assert active(pts, "sepsis") == list(range(4, 49, 4))
    assert pts[1].global_action == "escalate" and "sepsis" in pts[1].alerts
    # Without the organ dysfunction: infection only, no sepsis.
    pts = points(rows[:2])
    assert active(pts, "sepsis") == []
    assert active(pts, "suspected_infection") == list(range(4, 49, 4))


def test_worst_aki_stage_is_kept_once_reached():
    rows = [
        event(-30, "labs", "creatinine", 1.0),
        event(5.5, "labs", "creatinine", 2.2),  # >= 2 x baseline: stage 2
        event(20.5, "labs", "creatinine", 1.0),  # recovered
    ]
    pts = points(rows)
    assert active(pts, "aki_stage_2") == list(range(8, 49, 4))
    assert active(pts, "aki_stage_1") == []
    assert "aki_stage_2" in pts[-1].suspected_conditions


def test_worst_aki_stage_moves_up_not_down():
    rows = [
        event(-30, "labs", "creatinine", 1.0),
        event(1.5, "labs", "creatinine", 1.4),  # +0.4 within 48 h: stage 1
        event(9.5, "labs", "creatinine", 3.2),  # >= 3 x baseline: stage 3
    ]
    pts = points(rows)
    assert active(pts, "aki_stage_1") == [4, 8]
    assert active(pts, "aki_stage_3") == list(range(12, 49, 4))


def test_oliguria_is_current_and_ends_when_urine_returns():
    rows = [event(-2, "vitals", "weight_kg", 100)]
    rows += [
        event(h + 0.5, "output", "indwelling_urinary_catheter", 30 if h < 14 else 100)
        for h in range(0, 40)
    ]
    pts = points(rows)
    got = active(pts, "oliguria")
    assert 8 in got and 12 in got
    assert 24 not in got and 36 not in got


def test_crrt_is_current_support():
    # A running charting carries CRRT up to 6 h (CLINICAL_CONCEPTS.md 11a).
    rows = [event(5.5, "crrt_therapy", "crrt:cvvhdf"), event(7.5, "crrt_therapy",
            "crrt:cvvhdf")]  # fmt: skip
    pts = points(rows)
    assert active(pts, "crrt") == [8, 12]
    assert "crrt" in pts[2].alerts and "crrt" not in pts[4].alerts


def test_invasive_ventilation_is_an_alert_only_while_current():
    rows = [event(h, RESP, "IMV") for h in (1.0, 3.0, 6.0)]
    rows += [event(9.0, RESP, "Nasal Cannula"), event(10.0, RESP, "Nasal Cannula")]
    pts = points(rows)
    assert active(pts, "invasive_ventilation") == [4, 8]
    assert pts[1].global_action == "escalate"
    assert pts[3].global_action == "continue_monitoring"


def test_high_flow_is_support_escalation_not_an_alert():
    pts = points([event(1.0, RESP, "High Flow NC"), event(2.5, RESP, "High Flow NC")])
    assert active(pts, "noninvasive_support") == [4, 8, 12, 16]
    assert pts[1].suspected_conditions == ["noninvasive_support"]
    assert pts[1].alerts == [] and pts[1].priority == "medium"


def test_hypoxemia_from_an_arterial_pf_below_300():
    rows = [event(1.0, RESP, "fio2_set", 0.5), event(2.0, "labs", "po2_arterial", 120)]
    pts = points(rows)  # 120 / 0.5 = 240
    assert active(pts, "hypoxemia") == [4, 8, 12]  # P/F holds 12 h


def test_vasoactive_support_and_shock_only_while_running():
    rows = [
        event(1.5, "labs", "lactate", 3.0),
        event(2.5, MED, "norepinephrine", 0.1, unit="mcg/kg/min", text="start"),
        event(6.5, MED, "norepinephrine", 0, unit="mcg/kg/min", text="stop"),
    ]
    pts = points(rows)
    assert active(pts, "vasoactive_support") == [4]
    assert active(pts, "shock") == [4]
    assert active(pts, "hyperlactatemia") == [4, 8, 12]


def test_septic_shock_needs_sepsis_and_shock():
    rows = [
        culture(0.5),
        antibiotic(1.0),
        event(1.2, "labs", "platelet_count", 40),
        event(1.5, "labs", "lactate", 3.0),
        event(2.5, MED, "norepinephrine", 0.1, unit="mcg/kg/min", text="start"),
        event(6.5, MED, "norepinephrine", 0, unit="mcg/kg/min", text="stop"),
    ]
    pts = points(rows)
    assert active(pts, "septic_shock") == [4]
    assert active(pts, "sepsis") == list(range(4, 49, 4))


def test_hypotension_from_the_hour_before_the_checkpoint():
    pts = points([event(7.5, "vitals", "map", 58), event(11.5, "vitals", "map", 80)])
    assert active(pts, "hypotension") == [8]


def test_gcs_at_most_8_is_severe_and_expires_after_6_hours():
    pts = points([event(1.5, "patient_assessments", "gcs_total", 7)])
    assert active(pts, "severe_neurologic_deterioration") == [4]
    assert active(pts, "depressed_consciousness") == [4]
    pts = points([event(1.5, "patient_assessments", "gcs_total", 11)])
    assert active(pts, "severe_neurologic_deterioration") == []
    assert active(pts, "depressed_consciousness") == [4]


@pytest.mark.parametrize(
    "value, mild, severe",
    [(1.9, False, False), (2.0, True, False), (3.9, True, False), (4.0, True, True)],
)
def test_lactate_thresholds(value, mild, severe):
    pts = points([event(1.5, "labs", "lactate", value)])
    assert (4 in active(pts, "hyperlactatemia")) is mild
    assert (4 in active(pts, "severe_hyperlactatemia")) is severe


@pytest.mark.parametrize(
    "value, mild, severe",
    [
        (7.30, False, False),
        (7.29, True, False),
        (7.21, True, False),
        (7.20, True, True),
    ],
)
def test_ph_thresholds(value, mild, severe):
    pts = points([event(1.5, "labs", "ph_arterial", value)])
    assert (4 in active(pts, "acidemia")) is mild
    assert (4 in active(pts, "severe_acidemia")) is severe


def test_lactate_and_ph_expire_when_not_refreshed():
    pts = points([event(1.5, "labs", "lactate", 5.0), event(1.5, "labs",
                  "ph_arterial", 7.1)])  # fmt: skip
    assert active(pts, "severe_hyperlactatemia") == [4, 8, 12]
    assert active(pts, "severe_acidemia") == [4, 8, 12]


@pytest.mark.parametrize(
    "value, mild, severe",
    [(1.4, False, False), (1.5, True, False), (1.9, True, False), (2.0, True, True)],
)
def test_inr_thresholds_and_24_hour_currency(value, mild, severe):
    pts = points([event(1.5, "labs", "inr", value)])
    expected = [4, 8, 12, 16, 20, 24]
    assert active(pts, "coagulopathy") == (expected if mild else [])
    assert active(pts, "severe_coagulopathy") == (expected if severe else [])


def test_decision_escalates_iff_alerts_and_sets_priority():
    pts = points(
        [event(1.5, "labs", "inr", 1.6), event(5.5, "labs", "inr", 2.5)], hours=10
    )
    assert [p.priority for p in pts] == ["low", "medium", "high"]
    assert [p.global_action for p in pts] == [
        "continue_monitoring",
        "continue_monitoring",
        "escalate",
    ]
    assert pts[2].alerts == ["severe_coagulopathy"]
    assert pts[2].suspected_conditions == ["coagulopathy"]


def test_an_event_at_or_after_a_checkpoint_changes_nothing_at_it():
    base = [
        event(-30, "labs", "creatinine", 1.0),
        culture(1.5),
        antibiotic(2.5),
        event(3.0, RESP, "IMV"),
        event(3.5, RESP, "IMV"),
        event(3.7, "labs", "lactate", 2.5),
    ]
    later = [
        event(8.0, "labs", "lactate", 9.0),  # exactly at the 8 h checkpoint
        event(8.0, "labs", "creatinine", 4.0),
        event(9.0, MED, "norepinephrine", 0.5, unit="mcg/kg/min", text="start"),
        event(9.5, "labs", "platelet_count", 10),  # SOFA for a later sepsis
        event(10.0, "patient_assessments", "gcs_total", 3),
        event(12.0, "labs", "inr", 4.0),
        event(20.0, "labs", "ph_arterial", 6.9),
    ]
    before = points(base)
    after = points(base + later)
    for a, b in zip(before, after):
        if a.hours_since_admit > 8:
            break
        assert a.as_dict() == b.as_dict(), a.hours_since_admit
    # ...and the later events do show from their checkpoint on.
    assert "severe_hyperlactatemia" in after[3].alerts  # t = 12
    assert "aki_stage_3" in after[3].alerts


def test_an_inr_holds_its_findings_at_each_checkpoint_after_it():
    pts = points([event(1.5, "labs", "inr", 2.5)], hours=10)
    holding = {
        name: [p.hours_since_admit for p in pts if name in {f.name for f in p.findings}]
        for name in ("severe_coagulopathy", "coagulopathy")
    }
    assert holding == {"severe_coagulopathy": [4, 8], "coagulopathy": [4, 8]}
