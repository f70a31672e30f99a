"""Parsing an Oracle reply: what is accepted and every way it is refused, with
the reason named."""

import json
from datetime import UTC, datetime

import pytest

from oracle.backbones.base import WindowContext
from oracle.schema import ReplyError, reply_parse
from tests.factories import complete_label as reply

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def context(allowed=(1, 2, 3, 10), recorded=(10,)):
    return WindowContext(
        window_id=1,
        stay_id=1,
        window_index=0,
        start=T0,
        end=T0,
        hours_since_admit=0.0,
        static={},
        summary=[],
        events=[],
        allowed_event_ids=frozenset(allowed),
        recorded_actions=[{"id": pk} for pk in recorded],
    )


def test_a_valid_reply_in_a_json_fence_is_a_label():
    text = (
        "Here it is:\n```json\n" + json.dumps(reply(status_evidence=["1", 1])) + "\n```"
    )

    status, payload = reply_parse(text, context=context())

    assert status == "deteriorating"
    assert payload["status_evidence"] == [1]
    assert payload["acute_problems"] == [{"text": "septic shock", "evidence": [1, 2]}]
    assert set(payload) == {
        "status_evidence",
        "acute_problems",
        "action_ratings",
        "added_actions",
        "red_flags",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "one JSON object"),
        (json.dumps(reply(status="better")), "At status"),
        (json.dumps({"status": "stable"}), "required property"),
        (
            json.dumps(reply(acute_problems=[{"text": "x" * 301, "evidence": [1]}])),
            "301 characters long; the limit is 300",
        ),
        (
            json.dumps(reply(red_flags=[{"text": "  ", "evidence": [1]}])),
            "Red flag 1 is empty",
        ),
        (
            json.dumps(reply(added_actions=[{"text": "x", "evidence": [77, 88]}])),
            "event ids 77, 88 that the prompt did not show",
        ),
        (
            json.dumps(reply(added_actions=[{"text": "x", "evidence": []}])),
            "Added action 1 cites no evidence",
        ),
        (
            json.dumps(
                reply(
                    action_ratings=[
                        {"event_id": 10, "rating": "acceptable", "evidence": []},
                        {"event_id": 2, "rating": "acceptable", "evidence": []},
                    ]
                )
            ),
            "rates event 2, which is not one of the window's recorded actions",
        ),
        (json.dumps(reply(action_ratings=[])), "event 10 is not rated"),
        (
            json.dumps(
                reply(
                    action_ratings=[{"event_id": 10, "rating": "great", "evidence": []}]
                )
            ),
            "action_ratings/0/rating",
        ),
    ],
)
def test_bad_replies_are_refused_with_the_reason(text, message):
    with pytest.raises(ReplyError, match=message.replace("(", r"\(")):
        reply_parse(text, context=context())


def test_a_raw_newline_inside_a_text_is_read_as_a_space():
    text = json.dumps(reply()).replace("septic shock", "septic\nshock\t")
    _, payload = reply_parse(text, context=context())
    assert payload["acute_problems"][0]["text"] == "septic shock"


def test_any_reply_the_constrained_schema_allows_is_a_label():
    import jsonschema

    from oracle.schema import reply_schema_for, reply_tokens_bound

    schema = reply_schema_for(
        event_ids=[1, 2, 3, 10], recorded_ids=[10], max_tokens=400
    )
    jsonschema.Draft202012Validator(schema).validate(reply())
    status, _ = reply_parse(json.dumps(reply()), context=context())
    assert status == "deteriorating"
    # Unknown evidence, a second rating or an extra field are outside it.
    for bad in (
        reply(status_evidence=[99]),
        reply(
            action_ratings=[{"event_id": 10, "rating": "acceptable", "evidence": []}]
            * 2
        ),
        {**reply(), "note": "x"},
    ):
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    # Its bounds shrink until the longest reply fits max_tokens.
    small = reply_schema_for(
        event_ids=range(1000, 1100), recorded_ids=[1000], max_tokens=300
    )
    items = small["properties"]["acute_problems"]["maxItems"]
    chars = small["properties"]["acute_problems"]["items"]["properties"]["text"][
        "maxLength"
    ]
    evidence = small["properties"]["status_evidence"]["maxItems"]
    assert (
        reply_tokens_bound(
            ids=range(1000, 1100),
            recorded=[1000],
            items=items,
            evidence=evidence,
            text_chars=chars,
        )
        <= 300
    )
