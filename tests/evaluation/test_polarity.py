"""The polarity guard on its own (no model): opposite directions and exclusive
states are opposed, paraphrases and bare noun phrases are not, and HRR reads a
red flag as the action it forbids."""

import pytest

from evaluation.metrics import hrr_at_k, window_harmful_fraction
from evaluation.polarity import (
    forbidden_action,
    harmful_direction_conflict,
    opposed,
    polarity,
)

OPPOSED = [
    # The three cases.
    ("start norepinephrine", "stop norepinephrine"),
    ("give a fluid bolus", "avoid fluid boluses"),
    (
        "Escalate vasopressor support to restore MAP >= 65",
        "Do not wean vasopressors while MAP < 65",
    ),
    # give / avoid / hold, continue / discontinue, escalate / wean, up / down.
    ("Start heparin infusion", "Hold heparin"),
    ("Continue heparin", "Discontinue heparin"),
    ("Escalate vasopressors", "De-escalate vasopressors"),
    ("Increase norepinephrine", "Wean norepinephrine"),
    ("Increase PEEP", "Decrease PEEP"),
    ("PEEP 5 -> 10 cmH2O", "PEEP 10 -> 5 cmH2O"),
    ("Broaden antibiotics", "Narrow antibiotics"),
    ("Insert central line", "Remove central line"),
    ("Liberalize fluids", "Restrict fluids"),
    ("Do not wean vasopressors", "Do not escalate vasopressors"),
    ("Intubate", "Extubate"),
    ("Extubation", "Reintubation"),
    # Courses and exclusive states.
    ("Worsening AKI", "Resolving AKI"),
    ("Not improving oxygenation", "Improving oxygenation"),
    ("Hypokalemia", "Hyperkalemia"),
    ("Hypotension", "Hypertensive emergency"),
    ("Avoid hyperoxia", "Avoid hypoxemia"),
    ("Bradycardia", "Tachycardia"),
    ("Thrombocytopenia", "Thrombocytosis"),
    ("Metabolic acidosis", "Metabolic alkalosis"),
    ("High potassium", "Low potassium"),
    ("Septic shock", "Cardiogenic shock"),
    ("Upper GI bleeding", "Lower GI bleeding"),
    ("Atrial fibrillation", "Ventricular fibrillation"),
    ("AKI", "CKD"),
]

NOT_OPPOSED = [
    ("Start NE", "Begin vasopressor"),
    ("Stop norepinephrine", "Discontinue norepinephrine"),
    ("Hold heparin", "Stop heparin infusion"),
    ("Do not give fluids", "Avoid fluid boluses"),
    ("Avoid early extubation", "Do not extubate yet"),
    # A bare noun phrase says neither direction: a red flag is often one.
    ("Intubation", "Avoid intubation"),
    ("Fluid boluses", "Avoid fluid boluses"),
    ("norepinephrine", "stop norepinephrine"),
    ("Septic shock", "Sepsis with vasopressor-dependent hypotension"),
    ("AF with RVR", "Atrial fibrillation"),
    ("Mixed septic and cardiogenic shock", "Septic shock"),
    ("GI bleed", "Upper GI bleeding"),
    ("Acute on chronic kidney disease", "AKI"),
    # Code status is a noun phrase, not a prohibition.
    ("Discuss DNR", "Goals of care discussion"),
    ("Lower GI bleed", "Lower gastrointestinal hemorrhage"),
    ("Start inhaled NO", "Start inhaled nitric oxide"),
    ("Inhaled NO", "Start inhaled nitric oxide"),
]


@pytest.mark.parametrize("a,b", OPPOSED)
def test_opposite_items_are_opposed_both_ways(a, b):
    assert opposed(a, b) and opposed(b, a)


@pytest.mark.parametrize("a,b", NOT_OPPOSED)
def test_same_direction_and_neutral_items_are_not_opposed(a, b):
    assert not opposed(a, b) and not opposed(b, a)


def test_polarity_reads_negation_before_the_direction_word():
    assert polarity("Do not wean vasopressors").action == 1
    assert polarity("Avoid fluid boluses").action == -1
    assert polarity("Stop propofol, start dexmedetomidine").action == -1
    assert polarity("Septic shock").action == 0
    assert polarity("No further fluid boluses").action == -1
    assert polarity("No improvement in oxygenation").course == -1
    assert polarity("Norepinephrine 0.2 mcg/kg/min -> 0.05 mcg/kg/min").verb == -1


def test_a_red_flag_forbids_the_action_after_its_prohibition():
    assert forbidden_action("Do not wean vasopressors while MAP < 65") == (
        "wean vasopressors"
    )
    # The condition goes: the remedy it names is not the harm.
    assert forbidden_action("Avoid deep sedation without a secured airway") == (
        "deep sedation"
    )
    assert forbidden_action("Avoid ventilation with high tidal volumes") == (
        "ventilation with high tidal volumes"
    )
    assert forbidden_action("Avoid fluid boluses") == "fluid boluses"
    # The red flag's own words: the matcher normalizes them as the other side.
    assert forbidden_action("No NSAIDs") == "NSAIDs"
    assert forbidden_action("Intubation") == "Intubation"


def test_a_recommendation_going_against_a_red_flag_is_not_that_harm():
    assert harmful_direction_conflict(
        "Escalate vasopressor support to restore MAP >= 65",
        "Do not wean vasopressors while MAP < 65",
    )
    assert harmful_direction_conflict("Avoid fluid boluses", "Avoid fluid boluses")
    assert not harmful_direction_conflict("Give a fluid bolus", "Avoid fluid boluses")
    assert not harmful_direction_conflict("Stop norepinephrine", "Do not stop NE")
    assert not harmful_direction_conflict("Intubate", "Intubation")


def words_match(a: str, b: str) -> bool:
    """A toy matcher that matches on a shared content word, as a careless
    embedding would: it cannot tell directions apart."""
    stop = {"a", "the", "do", "not", "avoid", "give", "while", "to", "of", "no"}
    words = lambda t: {w.strip(".,;:") for w in t.lower().split()} - stop  # noqa: E731
    roots = lambda t: {w[:6] for w in words(t)}  # noqa: E731
    return bool(roots(a) & roots(b))


def test_hrr_counts_a_recommendation_that_is_the_forbidden_action():
    assert words_match("give a fluid bolus", "avoid fluid boluses")
    fraction = window_harmful_fraction(
        ["give a fluid bolus", "start norepinephrine"],
        {"Avoid fluid boluses"},
        words_match,
    )
    assert fraction == pytest.approx(1 / 2)


def test_hrr_ignores_recommendations_in_the_other_direction_of_a_red_flag():
    # The matcher alone would call both harmful (shared words).
    assert words_match("Escalate vasopressors", "Do not wean vasopressors")
    windows = [
        ("s1", ["Escalate vasopressors"], {"Do not wean vasopressors"}),
        ("s1", ["Avoid fluid boluses"], {"Avoid fluid boluses"}),
    ]
    assert hrr_at_k(windows, words_match) == 0.0
