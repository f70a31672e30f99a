"""The label's shape, defined once (evaluation.labelschema): what label_read
accepts, how it puts a payload in canonical form, and every way it refuses one,
each problem with its field, code and message."""

import jsonschema
import pytest

from evaluation.labelschema import (
    LABEL_SCHEMA,
    MAX_EVIDENCE_PER_ITEM,
    MAX_ITEM_CHARS,
    MAX_ITEMS_PER_LIST,
    PAYLOAD_FIELDS,
    STATUS_KEYS,
    STATUS_VALUES,
    label_read,
)
from tests.factories import complete_label as label


def problems(payload, *, complete=True):
    reading = label_read(payload, complete=complete)
    return [(p.field, p.code, p.message) for p in reading.problems]


def test_a_complete_label_reads_without_problems_and_fits_the_json_schema():
    reading = label_read(label(), complete=True)

    assert reading.problems == []
    assert reading.status == "deteriorating"
    assert tuple(reading.payload) == PAYLOAD_FIELDS
    assert reading.payload == {k: v for k, v in label().items() if k != "status"}
    assert reading.cited == {
        "status_evidence": [1],
        "acute_problems": [1, 2],
        "added_actions": [3],
        "red_flags": [3],
        "action_ratings": [10, 2],
    }
    jsonschema.Draft202012Validator(LABEL_SCHEMA).validate(
        {"status": reading.status, **reading.payload}
    )


def test_texts_are_stripped_and_evidence_read_as_ids_once_each():
    reading = label_read(
        label(
            status_evidence=["1", 1, 2],
            acute_problems=[{"text": "  septic shock\n", "evidence": [2, "2"]}],
        ),
        complete=True,
    )

    assert reading.problems == []
    assert reading.payload["status_evidence"] == [1, 2]
    assert reading.payload["acute_problems"] == [
        {"text": "septic shock", "evidence": [2]}
    ]


def test_a_draft_may_be_unfinished_but_a_complete_label_may_not():
    draft = {
        "acute_problems": [{"text": "", "evidence": []}],
        "action_ratings": [{"event_id": 10, "rating": "", "evidence": []}],
    }

    reading = label_read(draft, complete=False)

    assert reading.problems == []
    assert reading.status == ""
    assert reading.payload["red_flags"] == []
    assert problems(draft) == [
        (
            "status",
            "status_missing",
            "Choose the patient status: improving, stable or deteriorating.",
        ),
        (
            "acute_problems",
            "text_empty",
            "Acute problem 1 is empty: write it or remove it.",
        ),
        (
            "action_ratings",
            "rating_missing",
            "Rated action 1 is not rated: best practice, acceptable or potentially "
            "harmful.",
        ),
    ]


@pytest.mark.parametrize(
    ("changes", "field", "code", "message"),
    [
        (
            {"status": "critical"},
            "status",
            "status_unknown",
            "Patient status must be improving, stable or deteriorating.",
        ),
        (
            {"status_evidence": "1, 2"},
            "status_evidence",
            "evidence_not_list",
            "Patient status: evidence must be a list of events.",
        ),
        (
            {"red_flags": [{"text": "x", "evidence": ["row 3"]}]},
            "red_flags",
            "evidence_not_event",
            "Red flag 1: evidence must be events, not 'row 3'.",
        ),
        (
            {"red_flags": [{"text": "x", "evidence": [True]}]},
            "red_flags",
            "evidence_not_event",
            "Red flag 1: evidence must be events, not True.",
        ),
        (
            {"added_actions": [{"text": "x", "evidence": list(range(101))}]},
            "added_actions",
            "evidence_too_many",
            f"Added action 1 has 101 pieces of evidence; the limit is "
            f"{MAX_EVIDENCE_PER_ITEM}.",
        ),
        (
            {"acute_problems": "septic shock"},
            "acute_problems",
            "list_unreadable",
            "Acute problems could not be read.",
        ),
        (
            {"acute_problems": [{"text": "x", "evidence": []}] * 51},
            "acute_problems",
            "list_too_long",
            f"Acute problems has 51 items; the limit is {MAX_ITEMS_PER_LIST}.",
        ),
        (
            {"acute_problems": [{"text": 7, "evidence": []}]},
            "acute_problems",
            "text_not_text",
            "Acute problem 1 must be text.",
        ),
        (
            {"red_flags": [{"text": "x" * 301, "evidence": []}]},
            "red_flags",
            "text_too_long",
            f"Red flag 1 is 301 characters long; the limit is {MAX_ITEM_CHARS}.",
        ),
        (
            {"action_ratings": [{"event_id": "fluids", "rating": "acceptable"}]},
            "action_ratings",
            "rating_no_event",
            "Rated action 1 does not name a recorded action.",
        ),
        (
            {"action_ratings": [{"event_id": 10, "rating": "great"}]},
            "action_ratings",
            "rating_unknown",
            "Rated action 1: the rating must be best practice, acceptable or "
            "potentially harmful.",
        ),
        (
            {"action_ratings": [{"event_id": 10, "rating": "acceptable"}] * 2},
            "action_ratings",
            "rating_repeated",
            "Rated action 2 rates the same action twice.",
        ),
    ],
)
def test_each_misfit_is_named_with_its_field_code_and_message(
    changes, field, code, message
):
    assert problems(label(**changes), complete=False) == [(field, code, message)]
    assert (field, code, message) in problems(label(**changes), complete=True)


def test_unreadable_items_are_left_out_of_the_canonical_payload():
    reading = label_read(
        label(
            acute_problems=[{"text": "x", "evidence": []}] * 51,
            action_ratings=[
                {"event_id": "fluids", "rating": "acceptable"},
                {"event_id": "10", "rating": "great"},
                {"event_id": 10, "rating": "acceptable"},
            ],
        ),
        complete=False,
    )

    assert reading.payload["acute_problems"] == []
    assert reading.payload["action_ratings"] == [
        {"event_id": 10, "rating": "", "evidence": []}
    ]


def test_the_json_schema_refuses_what_a_complete_label_may_not_be():
    validator = jsonschema.Draft202012Validator(LABEL_SCHEMA)
    assert validator.is_valid(label())
    for bad in (
        label(status="critical"),
        label(status_evidence=["1"]),
        label(action_ratings=[{"event_id": 10, "rating": "great", "evidence": []}]),
        {k: v for k, v in label().items() if k != "red_flags"},
    ):
        assert not validator.is_valid(bad)


def test_status_keys_follow_the_status_order():
    assert STATUS_VALUES == ("improving", "stable", "deteriorating")
    assert STATUS_KEYS == {"improving": "1", "stable": "2", "deteriorating": "3"}
