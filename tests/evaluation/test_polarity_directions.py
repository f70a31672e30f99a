"""The polarity guard knows which way ICU actions move sedation, ventilatory
support, fluid balance and a drug's dose: a table of opposite actions that must
never match (wean / deepen sedation, diurese / give fluids, titrate up / down,
extubate / reintubate, ...) and of same-direction paraphrases that must still
match with the shipped model at its tau ("wean sedation" / "lighten
sedation", "start diuresis" / "diurese")."""

import pytest

from evaluation.matcher import DEFAULT_MODEL, SemanticMatcher
from evaluation.metrics import window_harmful_fraction
from evaluation.polarity import harmful_direction_conflict, opposed, polarity

# Pairs of actions a clinician would read as going opposite ways.
OPPOSITES = [
    # Sedation.
    ("Wean sedation", "Deepen sedation"),
    ("Lighten sedation", "Deepen sedation"),
    ("Lighten sedation", "Increase sedation"),
    ("Deepen sedation", "Reduce sedation"),
    ("Increase propofol", "Lighten sedation"),
    ("Wean propofol", "Deepen sedation"),
    ("Start a daily sedation interruption", "Deepen sedation"),
    ("Uptitrate dexmedetomidine", "Downtitrate dexmedetomidine"),
    ("Titrate midazolam up", "Titrate midazolam down"),
    ("Hold sedation for an awakening trial", "Resume sedation"),
    ("Target light sedation", "Keep deeply sedated"),
    ("Do not lighten sedation", "Do not deepen sedation"),
    ("Decrease the propofol rate", "Deepen sedation to RASS -4"),
    ("Lighten sedation for a neurological exam", "Increase the midazolam infusion"),
    ("Perform a sedation vacation", "Uptitrate propofol"),
    ("Wean dexmedetomidine", "Increase dexmedetomidine"),
    ("Increase the fentanyl infusion", "Wean fentanyl"),
    ("Stop sedation", "Restart sedation"),
    # Ventilation and oxygen.
    ("Wean the ventilator", "Increase ventilator support"),
    ("Extubate", "Reintubate"),
    ("Escalate to BiPAP", "De-escalate from BiPAP to nasal cannula"),
    ("Increase PEEP", "Wean PEEP"),
    ("Start a spontaneous breathing trial", "Increase pressure support"),
    ("Decrease FiO2", "Uptitrate FiO2"),
    ("Liberate from mechanical ventilation", "Resume mechanical ventilation"),
    ("Escalate to HFNC", "Wean off HFNC"),
    ("Extubate to high-flow nasal cannula", "Intubate and ventilate"),
    ("Lower the tidal volume", "Increase the tidal volume"),
    ("Titrate oxygen down", "Titrate oxygen up"),
    ("Step up to BiPAP", "Step down to nasal cannula"),
    ("Wean off mechanical ventilation", "Escalate ventilatory support"),
    ("Reduce pressure support to 5", "Increase pressure support to 15"),
    ("Wean oxygen to nasal cannula", "Escalate oxygen to high-flow"),
    ("Increase the set respiratory rate", "Decrease the ventilator rate"),
    ("Extubate today", "Keep intubated and increase PEEP"),
    ("Trial of extubation", "Re-intubate"),
    # Fluid balance.
    ("Diurese", "Give fluids"),
    ("Diurese with furosemide", "Give a fluid bolus"),
    ("Give IV furosemide", "Give a 1 L crystalloid bolus"),
    ("Restrict fluids", "Liberalize fluids"),
    ("Hold diuretics", "Start diuretics"),
    ("Remove fluid with CRRT", "Give IV fluids"),
    ("Target a net negative fluid balance", "Target a net positive fluid balance"),
    ("Increase ultrafiltration", "Reduce the ultrafiltration rate"),
    ("Avoid diuretics", "Avoid fluid boluses"),
    ("Hold IV fluids", "Continue maintenance fluids"),
    ("Diurese aggressively", "Resuscitate with crystalloid"),
    ("Push fluids", "Restrict fluids"),
    ("Start IV fluid resuscitation", "Start diuresis"),
    ("Give furosemide 40 mg IV", "Give a normal saline bolus"),
    ("Fluid restrict to 1 L per day", "Liberalize IV fluids"),
    ("Stop the furosemide drip", "Uptitrate the furosemide drip"),
    ("Increase net fluid removal on CRRT", "Decrease fluid removal on CRRT"),
    ("Hold maintenance IV fluids", "Resume maintenance IV fluids"),
    ("Diurese to net negative 1 L", "Bolus 1 L lactated Ringer's"),
    # Drug titration.
    ("Titrate norepinephrine up", "Titrate norepinephrine down"),
    ("Uptitrate vasopressin", "Wean vasopressin"),
    ("Increase the insulin infusion rate", "Decrease the insulin infusion rate"),
    ("Escalate antibiotics", "De-escalate antibiotics"),
    ("Start heparin drip", "Hold heparin drip"),
    ("Resume enteral feeds", "Hold enteral feeds"),
    ("Double the furosemide dose", "Halve the furosemide dose"),
    ("Turn up the norepinephrine", "Turn down the norepinephrine"),
    ("Add vasopressin", "Stop vasopressin"),
    ("Restart amiodarone", "Discontinue amiodarone"),
    ("Trial off norepinephrine", "Increase norepinephrine"),
    ("Deescalate vasopressors", "Escalate the vasopressor dose"),
    ("Bring the norepinephrine down", "Uptitrate norepinephrine"),
    ("Wean epinephrine", "Increase epinephrine"),
    ("Titrate dobutamine up", "Wean dobutamine off"),
    ("Reduce the heparin infusion rate", "Increase the heparin infusion rate"),
    ("Stop the insulin drip", "Restart the insulin drip"),
    ("Reduce vasopressin", "Escalate vasopressin"),
]

# Opposites the guard does not read, kept apart by the model's cosine alone:
# "Bolus" used as a verb reads as the noun, which says no direction.
GUARD_GAPS = {
    ("Diurese to net negative 1 L", "Bolus 1 L lactated Ringer's"),
}

# Pairs of actions going the same way, worded differently.
PARAPHRASES = [
    ("Wean sedation", "Lighten sedation"),
    ("Titrate norepinephrine down", "Reduce norepinephrine"),
    ("Deepen sedation", "Increase sedation"),
    ("Uptitrate norepinephrine", "Increase the norepinephrine dose"),
    ("Downtitrate propofol", "Wean propofol"),
    ("Diurese", "Give furosemide"),
    ("Diurese with furosemide", "Start IV furosemide"),
    ("Give a fluid bolus", "Give IV fluids"),
    ("Restrict fluids", "Limit IV fluid intake"),
    ("Extubate", "Remove the endotracheal tube"),
    ("Wean the ventilator", "Wean mechanical ventilation"),
    ("Increase PEEP", "Uptitrate PEEP"),
    ("Decrease FiO2", "Wean FiO2"),
    ("Hold heparin", "Stop heparin infusion"),
    ("Resume enteral feeds", "Restart tube feeds"),
    ("De-escalate antibiotics", "Narrow antibiotics"),
    ("Escalate vasopressors", "Increase the vasopressor dose"),
    ("Lighten sedation", "Reduce propofol"),
    ("Start a spontaneous breathing trial", "Perform an SBT"),
    ("Intubate", "Intubate for airway protection"),
    ("Liberalize fluids", "Give more IV fluids"),
    ("Stop diuretics", "Hold furosemide"),
    ("Titrate vasopressin down", "Wean vasopressin"),
    ("Escalate to BiPAP", "Start non-invasive ventilation"),
    ("Daily sedation interruption", "Sedation holiday"),
    ("Reduce the insulin infusion", "Decrease the insulin drip rate"),
    ("Increase the ultrafiltration rate", "Remove more fluid with CRRT"),
    ("Stop propofol", "Discontinue propofol"),
    ("Turn down the norepinephrine", "Wean norepinephrine"),
    ("Start diuresis", "Diurese"),
    ("Hold sedation", "Start a sedation holiday"),
    ("Reduce sedation", "Lighten propofol sedation"),
    ("Wean propofol", "Decrease the propofol infusion"),
    ("Increase sedation", "Deepen sedation"),
    ("Daily sedation vacation", "Daily awakening trial"),
    ("Wean ventilator support", "Reduce ventilator settings"),
    ("Escalate to high-flow nasal cannula", "Increase oxygen support to HFNC"),
    ("Extubate", "Extubate to nasal cannula"),
    ("Start furosemide", "Diurese with IV furosemide"),
    ("Give an IV fluid bolus", "Give a crystalloid bolus"),
    ("Restrict fluid intake", "Fluid restriction"),
    ("Hold diuretics", "Hold furosemide"),
    ("Wean norepinephrine", "Taper norepinephrine"),
    ("Increase norepinephrine", "Titrate norepinephrine up"),
    ("Stop the insulin infusion", "Discontinue the insulin drip"),
    ("Decrease FiO2", "Titrate FiO2 down"),
    ("Lower PEEP", "Wean PEEP"),
]

# Paraphrases the shipped model puts below its tau: the embedding misses them,
# the guard does not veto them (checked below), so a better model wins them.
MODEL_MISSES = {
    ("Diurese", "Give furosemide"),
    ("Extubate", "Remove the endotracheal tube"),
    ("Lighten sedation", "Reduce propofol"),
    ("Liberalize fluids", "Give more IV fluids"),
    ("Stop diuretics", "Hold furosemide"),
    ("Escalate to BiPAP", "Start non-invasive ventilation"),
    ("Increase the ultrafiltration rate", "Remove more fluid with CRRT"),
    ("Daily sedation vacation", "Daily awakening trial"),
    ("Extubate", "Extubate to nasal cannula"),
    ("Hold diuretics", "Hold furosemide"),
}


def test_the_table_is_large_enough_and_its_lists_name_its_pairs():
    assert len(OPPOSITES) >= 40 and len(set(OPPOSITES)) == len(OPPOSITES)
    assert len(PARAPHRASES) - len(MODEL_MISSES) >= 20
    assert len(set(PARAPHRASES)) == len(PARAPHRASES)
    assert GUARD_GAPS <= set(OPPOSITES) and MODEL_MISSES <= set(PARAPHRASES)


def test_the_guard_refuses_every_opposite_but_its_listed_gaps():
    not_refused = {(a, b) for a, b in OPPOSITES if not opposed(a, b)}
    one_way = {(a, b) for a, b in OPPOSITES if opposed(a, b) != opposed(b, a)}
    assert one_way == set()
    assert not_refused - GUARD_GAPS == set(), "opposites now matched"
    assert GUARD_GAPS - not_refused == set(), "gaps now closed: take them off"


def test_the_guard_refuses_no_paraphrase():
    refused = [(a, b) for a, b in PARAPHRASES if opposed(a, b) or opposed(b, a)]
    assert refused == []


@pytest.fixture(scope="module")
def shipped(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        matcher = SemanticMatcher(DEFAULT_MODEL)
        # One batch through the model; every match below reads the memo.
        matcher.embed([text for pair in OPPOSITES + PARAPHRASES for text in pair])
    return matcher


@pytest.mark.django_db
def test_no_opposite_matches_with_the_shipped_model_at_its_tau(shipped):
    assert shipped.tau == 0.5
    matched = [(a, b) for a, b in OPPOSITES if shipped.match(a, b)]
    assert matched == []


@pytest.mark.django_db
def test_paraphrases_match_with_the_shipped_model_at_its_tau(shipped):
    missed = {(a, b) for a, b in PARAPHRASES if not shipped.match(a, b)}
    assert missed - MODEL_MISSES == set(), "paraphrases now missed"
    assert MODEL_MISSES - missed == set(), "now matched: take them off MODEL_MISSES"


def test_an_action_is_read_on_the_axis_of_what_it_acts_on():
    assert polarity("Diurese").along("fluid balance") == -1
    assert polarity("Start a low-dose furosemide infusion").along("fluid balance") == -1
    assert polarity("Hold furosemide").along("fluid balance") == 1
    assert polarity("Give a 500 mL crystalloid bolus").along("fluid balance") == 1
    assert polarity("Start a sedation holiday").along("sedation") == -1
    assert polarity("Wean sedation for an SBT").axis == ("sedation", 1)
    # A noun phrase may be done or avoided: no direction unless read as done.
    assert polarity("Fluid boluses").along("fluid balance") == 0
    assert polarity("Fluid boluses").along("fluid balance", noun_as=1) == 1
    # What an action acts on is near it, not anywhere in the sentence.
    assert polarity("Start norepinephrine for MAP < 65 rather than fluid").axis is None


def always(a: str, b: str) -> bool:
    """A matcher that matches everything: what is left is the guard's work."""
    return True


@pytest.mark.parametrize(
    "red_flag, harmful, not_harmful",
    [
        ("Avoid fluid boluses", "Give a fluid bolus", "Diurese"),
        ("Avoid diuretics", "Start furosemide", "Hold furosemide"),
        (
            "Avoid deep sedation without a secured airway",
            "Deepen sedation",
            "Lighten sedation",
        ),
        ("Do not lighten sedation", "Wean propofol", "Increase propofol"),
        ("Do not extubate while on FiO2 0.6", "Extubate to BiPAP", "Increase PEEP"),
        ("Do not wean norepinephrine", "Titrate norepinephrine down", None),
        ("Do not wean norepinephrine", "Reduce norepinephrine", "Turn it up"),
    ],
)
def test_hrr_reads_the_direction_of_a_red_flag_on_these_axes(
    red_flag, harmful, not_harmful
):
    assert window_harmful_fraction([harmful], {red_flag}, always) == 1.0
    assert not harmful_direction_conflict(harmful, red_flag)
    if not_harmful is not None:
        assert window_harmful_fraction([not_harmful], {red_flag}, always) == 0.0
