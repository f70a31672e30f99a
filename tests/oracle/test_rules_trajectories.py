"""The rules backbone, rule by rule, on hand-built hourly trajectories: each test
writes the concept tracks of a stay hour by hour (the columns of
windows.concepts.columns) and reads the label of one window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from oracle.backbones import rules
from oracle.backbones.base import WindowContext

T0 = datetime(2150, 1, 1, 8, 0, tzinfo=UTC)
EVENTS = [
    # One event per kind the rules cite, so every label can carry evidence.
    {"id": 1, "hours": 9.5, "category": "map", "domain": "vitals"},
    {
        "id": 2,
        "hours": 9.0,
        "category": "norepinephrine",
        "domain": "medication_admin_continuous",
    },
    {"id": 3, "hours": 8.0, "category": "lactate", "domain": "labs"},
    {"id": 4, "hours": 7.0, "category": "creatinine", "domain": "labs"},
    {"id": 5, "hours": 9.2, "category": "spo2", "domain": "vitals"},
    {"id": 6, "hours": 6.0, "category": "fio2_set", "domain": "respiratory_support"},
]


def context(
    *,
    start_h: float = 10.0,
    hours: int | None = None,
    static=None,
    recorded=(),
    **tracks,
) -> WindowContext:
    """The context of the 30-min window starting at ``start_h`` of a stay whose
    tracks are ``tracks``: column -> hourly values from hour 0 (a scalar is
    the same value every hour)."""
    hours = hours or 1 + max(
        (len(v) - 1 for v in tracks.values() if isinstance(v, list)), default=24
    )
    columns = {
        name: values if isinstance(values, list) else [values] * hours
        for name, values in tracks.items()
    }
    for name, values in columns.items():
        assert len(values) == hours, f"{name} has {len(values)} hours, not {hours}"
    frame = pd.DataFrame(columns, index=pd.Index(range(hours), name="hour"))
    events = [
        {
            "time": T0 + timedelta(hours=e["hours"]),
            "kind": "observation",
            "name": "",
            "value": None,
            "unit": "",
            "text": "",
            **e,
        }
        for e in [*EVENTS, *recorded]
    ]
    start = T0 + timedelta(hours=start_h)
    return WindowContext(
        window_id=1,
        stay_id=1,
        window_index=int(start_h // 2),
        start=start,
        end=start + timedelta(minutes=30),
        hours_since_admit=start_h,
        static={"hospital_outcome": "survived", "stay_hours": hours, **(static or {})},
        summary=[],
        events=events,
        recorded_actions=list(recorded),
        tracks=frame,
        allowed_event_ids=frozenset(e["id"] for e in events),
    )


def label(**kwargs):
    return rules.rules_label(context(**kwargs))


def steps(before, now, *, split: int = 9, hours: int = 24) -> list:
    """``before`` in the hours before ``split``, ``now`` from then on (a window
    at 10 h: "before" is hours 3-8, "now" hours 9-11)."""
    return [before] * split + [now] * (hours - split)


def texts(payload, field) -> list[str]:
    return [item["text"] for item in payload[field]]


NORMAL = {"map": 80.0, "map_min": 75.0, "hr": 85.0, "spo2": 97.0, "sofa": 2.0}


def weaning_at_21_h() -> dict:
    """A 30 h stay whose vasopressors and invasive ventilation stop at 21 h,
    MAP 70 (minimum 66) and SOFA 9: the window 22-22.5 h is a weaning."""
    return {
        **NORMAL,
        "ned": steps(0.3, 0.0, split=21, hours=30),
        "norepinephrine": steps(0.3, 0.0, split=21, hours=30),
        "ventilation": steps("invasive", "none", split=21, hours=30),
        "map": 70.0,
        "map_min": 66.0,
        "sofa": 9.0,
    }


def test_an_unchanging_patient_is_stable():
    status, payload = label(**NORMAL)

    assert status == "stable"
    assert payload["status_evidence"]
    assert payload["acute_problems"] == payload["added_actions"] == []


def test_a_sofa_rise_of_two_points_is_deteriorating():
    status, payload = label(**{**NORMAL, "sofa": steps(2.0, 4.0)})

    assert status == "deteriorating"
    assert payload["status_evidence"]


def test_vasopressor_weaning_with_map_at_target_is_improving():
    status, _ = label(
        **{**NORMAL, "ned": steps(0.3, 0.1), "norepinephrine": steps(0.3, 0.1)}
    )

    assert status == "improving"


def test_a_rising_vasopressor_dose_is_deteriorating():
    status, _ = label(
        **{**NORMAL, "ned": steps(0.1, 0.2), "norepinephrine": steps(0.1, 0.2)}
    )

    assert status == "deteriorating"


def test_map_below_65_on_rising_vasopressors_is_deteriorating_whatever_improves():
    # Off the ventilator (2 points better), lactate clearing (1 better), but the
    # norepinephrine dose climbs (2 worse) and MAP stays at 58 (was already low).
    status, _ = label(
        map=58.0,
        map_min=55.0,
        sofa=8.0,
        ventilation=steps("invasive", "supplemental_o2"),
        lactate=steps(4.0, 2.5),
        ned=steps(0.15, 0.25),
        norepinephrine=steps(0.15, 0.25),
    )

    assert status == "deteriorating"


def test_never_improving_while_hypotension_persists():
    # Lactate clears and FiO2 falls, but the hourly mean MAP stays at 60.
    status, _ = label(
        map=60.0, map_min=57.0, sofa=6.0, lactate=steps(4.0, 2.0), fio2=steps(0.8, 0.4)
    )

    assert status == "stable"


def test_sustained_profound_hypotension_is_deteriorating_without_a_trend():
    status, _ = label(map=42.0, map_min=38.0, sofa=6.0, ned=0.16, norepinephrine=0.16)

    assert status == "deteriorating"


def test_weaning_in_the_last_12_hours_before_death_is_not_improving():
    tracks = weaning_at_21_h()
    survivor, _ = label(start_h=22.0, **tracks)
    dying, payload = label(start_h=22.0, static={"hospital_outcome": "died"}, **tracks)
    # The same trajectory far from the end of the stay of a patient who died.
    earlier, _ = label(
        start_h=22.0, static={"hospital_outcome": "died", "stay_hours": 200}, **tracks
    )

    assert survivor == "improving" and earlier == "improving"
    assert dying == "stable"
    assert payload["status_evidence"]
    # A death up to 5 h before the recorded end of the ICU stay: a window 16 h
    # before that end may be 11 h before death, and is not improving either.
    before_death, _ = label(
        start_h=22.0, static={"hospital_outcome": "died", "stay_hours": 38.5}, **tracks
    )
    assert before_death == "stable"


def test_the_death_guard_holds_exactly_in_the_last_12_hours_before_death():
    """Issue 30, item 5: the rules Oracle is never "improving" in the last 12 h
    before death, counted from the time of death the context gives (death_h);
    the window 22-22.5 h weans vasopressors and ventilation."""
    tracks = weaning_at_21_h()

    def status(death_h: float) -> str:
        died = {"hospital_outcome": "died", "stay_hours": 30, "death_h": death_h}
        return label(start_h=22.0, static=died, **tracks)[0]

    # The window ends at 22.5 h: death 11.9 h and 12.1 h after its end.
    assert status(22.5 + 11.9) == "stable"
    assert status(22.5 + 12.1) == "improving"
    # A death on the ward 20 h after the window, though it lies in the last
    # 12 + 5 h of the ICU stay (the guard without a time of death).
    assert status(22.5 + 20.0) == "improving"


def test_a_lactate_rise_is_deteriorating_and_lactate_clearance_improving():
    rising, _ = label(**{**NORMAL, "lactate": steps(1.5, 3.0)})
    clearing, _ = label(**{**NORMAL, "lactate": steps(5.0, 3.5)})
    small_fall, _ = label(**{**NORMAL, "lactate": steps(5.0, 4.5)})

    assert (rising, clearing, small_fall) == ("deteriorating", "improving", "stable")


def test_worsening_oxygenation_is_deteriorating():
    fio2, _ = label(**{**NORMAL, "fio2": steps(0.4, 0.7)})
    pf, _ = label(**{**NORMAL, "pf_ratio": steps(280.0, 180.0)})
    escalated, _ = label(**{**NORMAL, "ventilation": steps("hfnc", "invasive")})

    assert (fio2, pf, escalated) == ("deteriorating",) * 3


def test_aki_lasts_48_hours_after_its_last_criterion():
    # KDIGO stage 2 charted at hours 10 and 12 only (the stage exists at the
    # creatinine's time); the problem stays until 48 h without criteria.
    aki = [0.0] * 80
    aki[10] = aki[12] = 2.0
    tracks = {**NORMAL, "aki_stage": aki, "creatinine": 2.4}
    found = {
        start_h: [
            t
            for t in texts(label(start_h=start_h, **tracks)[1], "acute_problems")
            if t.startswith("AKI")
        ]
        for start_h in (12.0, 20.0, 40.0, 58.0, 62.0)
    }

    stage_2 = ["AKI KDIGO stage 2 (creatinine 2.4 mg/dL)"]
    assert all(found[h] == stage_2 for h in (12.0, 20.0, 40.0, 58.0))
    assert found[62.0] == []


def test_aki_is_stage_3_while_on_crrt():
    tracks = {
        **NORMAL,
        "aki_stage": steps(1.0, 0.0),
        "crrt_active": 1.0,
        "creatinine": 1.8,
    }

    _, payload = label(**tracks)

    assert "AKI KDIGO stage 3 on CRRT (creatinine 1.8 mg/dL)" in texts(
        payload, "acute_problems"
    )


@pytest.mark.parametrize("ned", [0.02, 0.05, 0.1])
def test_no_shock_at_or_below_the_sofa_cardiovascular_4_dose(ned):
    _, payload = label(**{**NORMAL, "ned": ned, "norepinephrine": ned})

    assert not [t for t in texts(payload, "acute_problems") if "shock" in t]
    assert payload["acute_problems"] == []  # MAP at target, lactate normal


def test_low_dose_vasopressors_with_hypotension_are_circulatory_failure_not_shock():
    _, payload = label(map=60.0, map_min=55.0, ned=0.08, norepinephrine=0.08)

    [problem] = texts(payload, "acute_problems")
    assert problem.startswith("circulatory failure on low-dose vasopressors")
    assert "shock" not in problem


def test_shock_above_the_threshold_and_septic_with_infection_and_lactate_above_2():
    shock = {**NORMAL, "ned": 0.2, "norepinephrine": 0.2}
    _, plain = label(**shock)
    _, septic = label(**{**shock, "sepsis3": 1.0, "lactate": 2.1})

    assert "shock on vasopressors (norepinephrine equivalent 0.2 mcg/kg/min)" in texts(
        plain, "acute_problems"
    )
    assert any(t.startswith("septic shock") for t in texts(septic, "acute_problems"))


@pytest.mark.parametrize("lactate", [2.0, 1.2, None])
def test_no_septic_shock_with_a_lactate_of_2_or_less_or_none(lactate):
    # Sepsis-3: vasopressors for MAP >= 65 and lactate > 2 mmol/L.
    tracks = {**NORMAL, "ned": 0.2, "norepinephrine": 0.2, "sepsis3": 1.0}
    tracks["lactate"] = lactate
    _, payload = label(**{k: v for k, v in tracks.items() if v is not None})

    problems = texts(payload, "acute_problems")
    assert not [t for t in problems if "septic shock" in t]
    assert any(t.startswith("shock on vasopressors") for t in problems)


def test_one_low_map_reading_gives_no_fluid_challenge():
    # The hour's lowest MAP is 50 (one reading), its mean 72.
    _, payload = label(**{**NORMAL, "map": 72.0, "map_min": steps(75.0, 50.0)})

    assert payload["added_actions"] == []
    assert payload["acute_problems"] == []


def test_one_low_hour_gives_no_fluid_challenge_two_do():
    one = [80.0] * 11 + [60.0]
    two = [80.0] * 10 + [60.0, 60.0]
    _, single = label(hours=12, start_h=10.0, map=one, map_min=[x - 5 for x in one])
    _, sustained = label(hours=12, start_h=10.0, map=two, map_min=[x - 5 for x in two])

    assert single["added_actions"] == []
    assert texts(sustained, "added_actions") == [
        "Give a 500 mL crystalloid fluid challenge and reassess; start norepinephrine "
        "if MAP stays below 65 mmHg"
    ]
    assert "hypotension (MAP 60 mmHg)" in texts(sustained, "acute_problems")


def test_hypotension_on_crrt_starts_norepinephrine_rather_than_fluid():
    _, payload = label(map=58.0, map_min=55.0, crrt_active=1.0, aki_stage=3.0)

    assert texts(payload, "added_actions") == [
        "Start norepinephrine for MAP < 65 mmHg rather than giving fluid (on CRRT)"
    ]
    assert not [t for t in texts(payload, "red_flags") if "fluid boluses" in t]


def test_hypotension_on_norepinephrine_titrates_then_adds_vasopressin():
    _, low = label(map=60.0, map_min=55.0, ned=0.15, norepinephrine=0.15)
    _, high = label(map=60.0, map_min=55.0, ned=0.3, norepinephrine=0.3)
    _, with_vasopressin = label(
        map=60.0, map_min=55.0, ned=0.43, norepinephrine=0.3, vasopressin=2.4
    )

    assert texts(low, "added_actions") == [
        "Titrate norepinephrine up to MAP >= 65 mmHg"
    ]
    assert texts(high, "added_actions") == [
        "Titrate norepinephrine up to MAP >= 65 mmHg",
        "Add vasopressin 0.03 U/min (norepinephrine >= 0.25 mcg/kg/min)",
    ]
    assert texts(with_vasopressin, "added_actions") == [
        "Titrate norepinephrine up to MAP >= 65 mmHg"
    ]
    assert "Do not wean vasopressors while MAP is below 65 mmHg" in texts(
        low, "red_flags"
    )


def test_vasopressor_cut_during_hypotension_is_rated_potentially_harmful():
    cut = {
        "id": 20,
        "hours": 10.1,
        "category": "norepinephrine",
        "domain": "medication_admin_continuous",
        "kind": "action",
        "value": 0.05,
        "text": "dose_change",
    }
    before = {**cut, "id": 19, "hours": 9.8, "value": 0.15, "text": "start"}
    ctx = context(map=58.0, map_min=55.0, ned=0.15, norepinephrine=0.15, recorded=[cut])
    ctx.events.append(
        {**before, "time": T0 + timedelta(hours=9.8), "name": "", "unit": ""}
    )

    _, payload = rules.rules_label(
        WindowContext(
            **{**ctx.__dict__, "allowed_event_ids": ctx.allowed_event_ids | {19}}
        )
    )

    [rating] = payload["action_ratings"]
    assert rating == {"event_id": 20, "rating": "potentially_harmful", "evidence": [1]}


def test_recommended_actions_are_clinical_actions_never_charting_names():
    trajectories = [
        dict(map=58.0, map_min=55.0),
        dict(map=58.0, map_min=55.0, ned=0.3, norepinephrine=0.3, sepsis3=1.0),
        dict(map=58.0, map_min=55.0, crrt_active=1.0),
        dict(**NORMAL, lactate=5.0, ventilation="invasive", pf_ratio=120.0, fio2=0.8),
        dict(**NORMAL, gcs=6.0),
    ]
    verbs = ("Titrate", "Add", "Start", "Give", "Repeat", "Prone", "Secure")
    seen = []
    for tracks in trajectories:
        _, payload = label(**tracks)
        seen += texts(payload, "added_actions")
    assert len(seen) >= 8
    for text in seen:
        assert text.startswith(verbs), text
        assert "_set" not in text and " set" not in text.lower()
        assert "endotracheal tube" not in text.lower()
