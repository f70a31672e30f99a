"""The rules backbone on constructed stays (expected labels) and on CLIF demo
stays (every label passes the reply-level rules)."""

import pytest

from oracle.backbones import rules
from oracle.backbones.rules import RulesBackbone
from oracle.context import window_contexts_build
from oracle.schema import payload_validate
from tests.factories import drip, lab, make_stay, vitals
from tests.oracle.helpers import stable_stay, windows_of
from windows.importers.clif import clif_import
from windows.models import Patient, Stay, Window
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db


def label_window(stay, index: int):
    windows = [w for w in windows_of(stay) if w.index == index]
    [context] = window_contexts_build(windows=windows)
    [result] = RulesBackbone().label_many([context])
    assert result.ok, result.error
    return context, result


def texts(items) -> list[str]:
    return [item["text"] for item in items]


def test_rising_creatinine_gives_an_aki_problem_citing_the_creatinine():
    stay = stable_stay(hours=48)
    lab(stay, "creatinine", 1.0, -20, "mg/dL")
    lab(stay, "creatinine", 1.4, 6, "mg/dL")
    lab(stay, "creatinine", 2.1, 18, "mg/dL")
    latest = lab(stay, "creatinine", 2.6, 30, "mg/dL")

    context, result = label_window(stay, 16)  # 32 h after admission

    [aki] = [p for p in result.payload["acute_problems"] if "AKI" in p["text"]]
    assert aki["text"].startswith("AKI KDIGO stage 2")
    assert latest.pk in aki["evidence"]
    assert any("nephrotoxic" in t for t in texts(result.payload["red_flags"]))


def test_norepinephrine_with_map_below_65_gives_an_escalation():
    stay = make_stay(hours=12)
    vitals(stay, "heart_rate", 95, start_h=-1, end_h=12, unit="bpm")
    vitals(stay, "map", 80, start_h=-1, end_h=2, every_min=15, unit="mmHg")
    vitals(stay, "map", 58, start_h=2, end_h=12, every_min=15, unit="mmHg")
    start = drip(stay, "norepinephrine", 0.1, 3.0)
    titration = drip(stay, "norepinephrine", 0.15, 4.1, text="dose_change")

    context, result = label_window(stay, 2)  # 4.0-4.5 h

    [escalate] = [
        a for a in result.payload["added_actions"] if a["text"].startswith("Titrate")
    ]
    assert escalate["text"] == "Titrate norepinephrine up to MAP >= 65 mmHg"
    assert {start.pk, titration.pk} & set(escalate["evidence"])
    assert "Do not wean vasopressors while MAP is below 65 mmHg" in texts(
        result.payload["red_flags"]
    )
    [rating] = result.payload["action_ratings"]
    assert rating["event_id"] == titration.pk and rating["rating"] == "best_practice"
    assert rating["evidence"]
    # 0.15 mcg/kg/min is above the SOFA cardiovascular 4 dose: shock.
    assert any(
        "shock on vasopressors" in t for t in texts(result.payload["acute_problems"])
    )
    assert result.status == "deteriorating"  # MAP fell below 65 on a rising dose


def test_worsening_sofa_gives_deteriorating():
    stay = stable_stay(hours=24)
    lab(stay, "platelet_count", 250, 0.5)
    lab(stay, "creatinine", 0.8, 0.5, "mg/dL")
    lab(stay, "bilirubin_total", 0.5, 0.5, "mg/dL")
    lab(stay, "platelet_count", 40, 11)
    lab(stay, "creatinine", 3.6, 11, "mg/dL")
    vitals(stay, "map", 55, start_h=11, end_h=14, every_min=15, unit="mmHg")
    drip(stay, "norepinephrine", 0.2, 11.2)

    context, result = label_window(stay, 6)  # 12-12.5 h

    assert result.status == "deteriorating"
    assert result.payload["status_evidence"]
    assert set(result.payload["status_evidence"]) <= context.allowed_event_ids


def test_a_stable_stay_is_stable_with_nothing_to_do():
    stay = stable_stay(hours=24)

    context, result = label_window(stay, 6)

    assert result.status == "stable"
    assert result.payload["acute_problems"] == []
    assert result.payload["added_actions"] == [] and result.payload["red_flags"] == []
    assert result.payload["status_evidence"]  # still cites what it read
    assert result.raw_response and result.tokens_in == 0


def test_rules_backbone_calls_on_result_and_honours_should_stop():
    stay = stable_stay(hours=24)
    contexts = window_contexts_build(windows=windows_of(stay))
    seen = []

    results = RulesBackbone().label_many(
        contexts, on_result=seen.append, should_stop=lambda: len(seen) >= 3
    )

    assert len(results) == 3 and seen == results


# --- the CLIF demo (imported once for this module; keep these tests last) -----------


@pytest.fixture(scope="module")
def demo_stays(django_db_setup, django_db_blocker, clif_demo_dir):
    """Eight demo stays, the longest first, with their windows."""
    with django_db_blocker.unblock():
        clif_import(directory=clif_demo_dir)
        stays = sorted(Stay.objects.all(), key=lambda s: -s.length_hours)[:8]
        for stay in stays:
            windows_build(stay=stay)
        yield stays
        Patient.objects.all().delete()


def test_rules_labels_of_demo_stays_all_pass_the_reply_rules(demo_stays):
    windows = list(
        Window.objects.filter(stay__in=demo_stays).order_by("stay_id", "index")
    )
    contexts = window_contexts_build(windows=windows)

    results = RulesBackbone().label_many(contexts)

    assert len(results) == len(windows) > 50
    by_window = {c.window_id: c for c in contexts}
    for result in results:
        assert result.ok, result.error
        context = by_window[result.window_id]
        payload_validate(
            result.status,
            result.payload,
            allowed_event_ids=context.allowed_event_ids,
            recorded_action_ids=[e["id"] for e in context.recorded_actions],
        )
        cited = set(result.payload["status_evidence"])
        for field in ("acute_problems", "added_actions", "red_flags", "action_ratings"):
            for item in result.payload[field]:
                cited |= set(item["evidence"])
        assert cited <= context.allowed_event_ids
    statuses = {r.status for r in results}
    assert statuses == {"improving", "stable", "deteriorating"}
    problems = [p["text"] for r in results for p in r.payload["acute_problems"]]
    assert any("invasive ventilation" in p for p in problems)
    assert any(p.startswith("AKI KDIGO stage") for p in problems)


def test_rules_on_demo_stays_keep_their_clinical_limits(demo_stays):
    """The rules' limits hold on real stays: no shock at or below the SOFA
    cardiovascular 4 dose, no fluid challenge while the window's hourly mean MAP
    is 65 or more, never improving with sustained hypotension, and none in the
    final 12 h of a stay of a patient who died in hospital."""
    windows = list(
        Window.objects.filter(stay__in=demo_stays).order_by("stay_id", "index")
    )
    contexts = window_contexts_build(windows=windows)
    died = 0
    for context in contexts:
        status, payload = rules.rules_label(context)
        f = rules._Window(context)
        problems = [p["text"] for p in payload["acute_problems"]]
        actions = [a["text"] for a in payload["added_actions"]]
        ned = f.value("ned", "last") or 0.0
        if any("shock" in p for p in problems):
            assert ned > rules.SHOCK_NED_MIN, (context.window_id, problems)
        window_map = f.numbers("map", f.rows(f.start_h, f.last_h))
        if any("fluid challenge" in a for a in actions):
            assert all(m < 65 for m in window_map), (context.window_id, window_map)
        if f.hypotension():
            assert status != "improving", context.window_id
        if f.final_hours_before_death():
            died += 1
            assert status != "improving", context.window_id
    assert died > 0  # the eight longest demo stays include deaths
