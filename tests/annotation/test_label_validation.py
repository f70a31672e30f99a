"""Every bad label a physician can send is refused with a message that says what to
fix, and nothing is written."""

import pytest
from django.core.exceptions import ValidationError

from .helpers import draft_as, submit_as, written_state


def _refused(call, field, message):
    before = written_state()
    with pytest.raises(ValidationError) as excinfo:
        call()
    assert message in excinfo.value.message_dict[field], excinfo.value.message_dict
    assert written_state() == before


def test_submit_without_status_is_refused(physicians, assignment, complete_payload):
    _refused(
        lambda: submit_as(
            physicians[0], assignment, {**complete_payload, "status": ""}
        ),
        "status",
        "Choose the patient status: improving, stable or deteriorating.",
    )


def test_unknown_status_is_refused_in_drafts_too(physicians, assignment):
    _refused(
        lambda: draft_as(physicians[0], assignment, {"status": "dying"}),
        "status",
        "Patient status must be improving, stable or deteriorating.",
    )


@pytest.mark.parametrize(
    "field,noun",
    [
        ("acute_problems", "Acute problem"),
        ("added_actions", "Added action"),
        ("red_flags", "Red flag"),
    ],
)
def test_empty_item_is_refused_on_submit(
    physicians, assignment, complete_payload, field, noun
):
    payload = {
        **complete_payload,
        field: complete_payload[field] + [{"text": "   ", "evidence": []}],
    }
    n = len(payload[field])
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        field,
        f"{noun} {n} is empty: write it or remove it.",
    )


@pytest.mark.parametrize("save", [draft_as, submit_as], ids=["draft", "submit"])
def test_item_of_301_characters_is_refused(
    physicians, assignment, complete_payload, save
):
    payload = {**complete_payload, "red_flags": [{"text": "x" * 301, "evidence": []}]}
    call = lambda: save(physicians[0], assignment, payload)
    _refused(call, "red_flags", "Red flag 1 is 301 characters long; the limit is 300.")


def test_item_of_300_characters_is_accepted(
    physicians, assignment, complete_payload, clinical
):
    flag = {"text": "x" * 300, "evidence": [clinical["heart_rate"].pk]}
    payload = {**complete_payload, "red_flags": [flag]}
    assert submit_as(physicians[0], assignment, payload).payload["red_flags"][0][
        "text"
    ] == ("x" * 300)


@pytest.mark.parametrize("save", [draft_as, submit_as], ids=["draft", "submit"])
def test_evidence_from_another_stays_admission_is_refused(
    physicians, assignment, complete_payload, clinical, save
):
    foreign = clinical["foreign"].pk
    payload = {
        **complete_payload,
        "acute_problems": [{"text": "Shock", "evidence": [foreign]}],
    }
    call = lambda: save(physicians[0], assignment, payload)
    _refused(
        call,
        "acute_problems",
        f"Evidence must come from this patient's stay; event {foreign} does not "
        "belong to it.",
    )


def test_status_evidence_from_another_admission_is_refused(
    physicians, assignment, complete_payload, clinical
):
    payload = {**complete_payload, "status_evidence": [clinical["foreign"].pk, 10**9]}
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        "status_evidence",
        f"Evidence must come from this patient's stay; events "
        f"{clinical['foreign'].pk}, {10**9} do not belong to it.",
    )


def test_evidence_that_is_not_an_event_id_is_refused(
    physicians, assignment, complete_payload
):
    payload = {
        **complete_payload,
        "red_flags": [{"text": "No NSAIDs", "evidence": ["row 3"]}],
    }
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        "red_flags",
        "Red flag 1: evidence must be events, not 'row 3'.",
    )


def test_rating_a_routine_action_is_refused(
    physicians, assignment, complete_payload, clinical
):
    payload = {
        **complete_payload,
        "action_ratings": complete_payload["action_ratings"]
        + [
            {"event_id": clinical["insulin"].pk, "rating": "acceptable", "evidence": []}
        ],
    }
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        "action_ratings",
        "Only this window's recorded critical actions can be rated; event "
        f"{clinical['insulin'].pk} is not one.",
    )


def test_rating_an_action_of_another_admission_is_refused(
    physicians, assignment, complete_payload, clinical
):
    foreign = clinical["foreign"].pk
    payload = {
        **complete_payload,
        "action_ratings": complete_payload["action_ratings"]
        + [{"event_id": foreign, "rating": "acceptable", "evidence": []}],
    }
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        "action_ratings",
        f"Evidence must come from this patient's stay; event {foreign} does not "
        "belong to it.",
    )


def test_rating_an_observation_of_the_window_is_refused(
    physicians, assignment, complete_payload, clinical
):
    payload = {
        **complete_payload,
        "action_ratings": complete_payload["action_ratings"]
        + [
            {
                "event_id": clinical["heart_rate"].pk,
                "rating": "acceptable",
                "evidence": [],
            }
        ],
    }
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        "action_ratings",
        "Only this window's recorded critical actions can be rated; event "
        f"{clinical['heart_rate'].pk} is not one.",
    )


@pytest.mark.parametrize(
    ("rated", "message"),
    [
        pytest.param(
            lambda ratings: ratings[1:],
            "Rate every recorded critical action: 1 of 2 not rated yet (first: "
            "norepinephrine at 08:05).",
            id="a-critical-action-unrated",
        ),
        pytest.param(
            lambda ratings: [{**ratings[0], "rating": "great"}, *ratings[1:]],
            "Rated action 1: the rating must be best practice, acceptable or "
            "potentially harmful.",
            id="a-rating-outside-the-three-values",
        ),
        pytest.param(
            lambda ratings: ratings + ratings[:1],
            "Rated action 3 rates the same action twice.",
            id="the-same-action-rated-twice",
        ),
    ],
)
def test_bad_action_ratings_are_refused_on_submit(
    physicians, assignment, complete_payload, rated, message
):
    ratings = rated(complete_payload["action_ratings"])
    payload = {**complete_payload, "action_ratings": ratings}
    _refused(
        lambda: submit_as(physicians[0], assignment, payload), "action_ratings", message
    )


def test_blank_rating_is_kept_in_a_draft_but_refused_on_submit(
    physicians, assignment, complete_payload
):
    ratings = [dict(r) for r in complete_payload["action_ratings"]]
    ratings[0]["rating"] = ""
    payload = {**complete_payload, "action_ratings": ratings}
    label = draft_as(physicians[0], assignment, payload)
    assert label.payload["action_ratings"][0]["rating"] == ""
    _refused(
        lambda: submit_as(physicians[0], assignment, payload, version=1),
        "action_ratings",
        "Rated action 1 is not rated: best practice, acceptable or potentially "
        "harmful.",
    )


def test_a_payload_that_is_not_an_object_is_refused(physicians, assignment):
    before = written_state()
    with pytest.raises(ValidationError, match="could not be read"):
        draft_as(physicians[0], assignment, ["status"])
    assert written_state() == before


def test_all_problems_are_reported_at_once(
    physicians, assignment, complete_payload, clinical
):
    payload = {
        **complete_payload,
        "status": "",
        "red_flags": [{"text": "", "evidence": [clinical["foreign"].pk]}],
    }
    with pytest.raises(ValidationError) as excinfo:
        submit_as(physicians[0], assignment, payload)
    assert set(excinfo.value.message_dict) == {"status", "red_flags"}
    assert len(excinfo.value.message_dict["red_flags"]) == 2


def test_items_are_stored_trimmed_with_evidence_deduplicated(
    physicians, assignment, complete_payload, clinical
):
    lactate = clinical["lactate"].pk
    payload = {
        **complete_payload,
        "acute_problems": [{"text": "  Shock  ", "evidence": [lactate, str(lactate)]}],
    }
    label = submit_as(physicians[0], assignment, payload)
    assert label.payload["acute_problems"] == [{"text": "Shock", "evidence": [lactate]}]


@pytest.mark.parametrize(
    "field,noun,text",
    [
        ("acute_problems", "Acute problem", "hyperlactatemia"),
        ("added_actions", "Added action", "Blood cultures"),
        ("red_flags", "Red flag", "Avoid fluid overload"),
    ],
)
def test_item_without_evidence_is_refused_on_submit_by_name(
    physicians, assignment, complete_payload, field, noun, text
):
    payload = {
        **complete_payload,
        field: complete_payload[field] + [{"text": f"  {text} ", "evidence": []}],
    }
    _refused(
        lambda: submit_as(physicians[0], assignment, payload),
        field,
        f'{noun} "{text}" has no evidence event; cite at least one (campaign setting).',
    )


def test_items_without_evidence_may_wait_in_a_draft(
    physicians, assignment, complete_payload
):
    payload = {
        **complete_payload,
        "acute_problems": [{"text": "Hyperlactatemia", "evidence": []}],
        "red_flags": [{"text": "Avoid fluid overload"}],
    }
    label = draft_as(physicians[0], assignment, payload)
    assert label.payload["acute_problems"] == [
        {"text": "Hyperlactatemia", "evidence": []}
    ]
    # Submitting the same draft names each item still without evidence.
    with pytest.raises(ValidationError) as excinfo:
        submit_as(physicians[0], assignment, payload, version=label.version)
    assert excinfo.value.message_dict["acute_problems"] == [
        'Acute problem "Hyperlactatemia" has no evidence event; cite at least one '
        "(campaign setting)."
    ]
    assert excinfo.value.message_dict["red_flags"] == [
        'Red flag "Avoid fluid overload" has no evidence event; cite at least one '
        "(campaign setting)."
    ]


def test_a_campaign_without_the_setting_takes_items_without_evidence(
    physicians, assignment, complete_payload
):
    from annotation.models import Campaign

    Campaign.objects.filter(pk=assignment.campaign_id).update(evidence_required=False)
    payload = {
        **complete_payload,
        "acute_problems": [{"text": "Hyperlactatemia", "evidence": []}],
        "added_actions": [],
        "red_flags": [{"text": "Avoid fluid overload", "evidence": []}],
    }
    label = submit_as(physicians[0], assignment, payload)
    assert label.payload["acute_problems"] == [
        {"text": "Hyperlactatemia", "evidence": []}
    ]
    assert label.assignment.state == "submitted"


def test_ratings_and_status_need_no_evidence_of_their_own(
    physicians, assignment, complete_payload, clinical
):
    payload = {
        **complete_payload,
        "status_evidence": [],
        "action_ratings": [
            {"event_id": clinical["norepinephrine"].pk, "rating": "acceptable"},
            {"event_id": clinical["intubation"].pk, "rating": "acceptable"},
        ],
    }
    label = submit_as(physicians[0], assignment, payload)
    assert label.payload["status_evidence"] == []
    assert [r["evidence"] for r in label.payload["action_ratings"]] == [[], []]
