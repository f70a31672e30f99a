"""The Oracle's reply: its JSON schema (the four tasks of spec section 3, every
item with evidence) and the parser that turns a reply into a label payload in
the physicians' shape, or says exactly what is wrong with it."""

from __future__ import annotations

import json
import re

import jsonschema

from annotation.models import ActionRating, PatientStatus
from annotation.services import MAX_EVIDENCE_PER_ITEM, MAX_ITEM_CHARS, MAX_ITEMS_PER_LIST

_EVIDENCE = {
    "type": "array",
    "items": {"type": "integer"},
    "maxItems": MAX_EVIDENCE_PER_ITEM,
}
_TEXT_ITEM = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "evidence": _EVIDENCE},
    "required": ["text", "evidence"],
}
_TEXT_LIST = {"type": "array", "items": _TEXT_ITEM, "maxItems": MAX_ITEMS_PER_LIST}

REPLY_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(PatientStatus.values)},
        "status_evidence": _EVIDENCE,
        "acute_problems": _TEXT_LIST,
        "action_ratings": {
            "type": "array",
            "maxItems": MAX_ITEMS_PER_LIST,
            "items": {
                "type": "object",
                "properties": {
                    "event_id": {"type": "integer"},
                    "rating": {"type": "string", "enum": list(ActionRating.values)},
                    "evidence": _EVIDENCE,
                },
                "required": ["event_id", "rating", "evidence"],
            },
        },
        "added_actions": _TEXT_LIST,
        "red_flags": _TEXT_LIST,
    },
    "required": [
        "status",
        "status_evidence",
        "acute_problems",
        "action_ratings",
        "added_actions",
        "red_flags",
    ],
}
_VALIDATOR = jsonschema.Draft202012Validator(REPLY_SCHEMA)

TEXT_LISTS = {
    "acute_problems": "Acute problem",
    "added_actions": "Added action",
    "red_flags": "Red flag",
}
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


# Bounds of a schema-constrained reply (oracle.schema.reply_schema_for): few
# enough items and characters that the worst reply fits the backbone's
# max_tokens, so a constrained reply is never cut off mid-object.
CONSTRAINED_ITEMS = 3
CONSTRAINED_EVIDENCE = 3
CONSTRAINED_TEXT_CHARS = 120
# Worst case characters per token of a JSON reply (ids and punctuation tokenize
# densely; prose at about 4): the bound is meant to be safe, not tight.
REPLY_CHARS_PER_TOKEN = 2.0


def _bounded_schema(*, ids, recorded, items, evidence, text_chars) -> dict:
    cite = {"type": "integer", "enum": ids} if ids else {"type": "integer"}
    cited = {
        "type": "array",
        "items": cite,
        "minItems": 1 if ids else 0,
        "maxItems": evidence if ids else 0,
    }
    ratings_evidence = {"type": "array", "items": cite, "maxItems": evidence if ids else 0}
    text_item = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": text_chars},
            "evidence": cited,
        },
        "required": ["text", "evidence"],
        "additionalProperties": False,
    }
    text_list = {"type": "array", "items": text_item, "maxItems": items}

    def rating(event_id) -> dict:
        return {
            "type": "object",
            "properties": {
                "event_id": {"type": "integer", "enum": [event_id]},
                "rating": {"type": "string", "enum": list(ActionRating.values)},
                "evidence": ratings_evidence,
            },
            "required": ["event_id", "rating", "evidence"],
            "additionalProperties": False,
        }

    # One rating per recorded action, in order: a tuple of fixed event ids, so
    # a constrained reply rates each exactly once.
    ratings = (
        {
            "type": "array",
            "prefixItems": [rating(pk) for pk in recorded],
            "items": False,
            "minItems": len(recorded),
            "maxItems": len(recorded),
        }
        if recorded
        else {"type": "array", "maxItems": 0, "items": rating(0)}
    )
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": list(PatientStatus.values)},
            "status_evidence": cited,
            "acute_problems": text_list,
            "action_ratings": ratings,
            "added_actions": text_list,
            "red_flags": text_list,
        },
        "required": list(REPLY_SCHEMA["required"]),
        "additionalProperties": False,
    }


def reply_tokens_bound(*, ids, recorded, items, evidence, text_chars) -> int:
    """Tokens of the longest reply the bounded schema allows (at
    REPLY_CHARS_PER_TOKEN, with a token of whitespace per element)."""
    digits = max([len(str(i)) for i in ids] or [1])
    cites = evidence * (digits + 2) + 2
    text_item = 30 + text_chars + cites
    rating = 60 + digits + cites
    chars = 160 + cites + 3 * items * text_item + len(recorded) * rating
    elements = 12 + evidence + 3 * items * (4 + evidence) + len(recorded) * (6 + evidence)
    return int(chars / REPLY_CHARS_PER_TOKEN) + elements


def reply_schema_for(*, event_ids, recorded_ids, max_tokens: int | None = None) -> dict:
    """The label's JSON Schema for one prompt, for constrained decoding: the
    prompt's event ids as the only evidence values, the recorded actions each
    rated once in order, and items, evidence and texts bounded (CONSTRAINED_*)
    so that the longest allowed reply fits ``max_tokens``; the bounds shrink
    (items, then text length, then evidence) until it does, or are at their
    least. A reply it allows passes ``reply_parse``."""
    ids = sorted(set(int(i) for i in event_ids))
    recorded = list(dict.fromkeys(int(i) for i in recorded_ids))
    bounds = {
        "items": CONSTRAINED_ITEMS,
        "evidence": CONSTRAINED_EVIDENCE,
        "text_chars": CONSTRAINED_TEXT_CHARS,
    }
    if max_tokens:
        steps = [("items", 2), ("text_chars", 80), ("items", 1), ("evidence", 2),
                 ("text_chars", 60), ("evidence", 1), ("items", 0)]
        for key, value in steps:
            if reply_tokens_bound(ids=ids, recorded=recorded, **bounds) <= max_tokens:
                break
            bounds[key] = value
    return _bounded_schema(ids=ids, recorded=recorded, **bounds)


class ReplyError(ValueError):
    """A reply that cannot be a label; ``problems`` lists every reason, each
    one sentence a model (or an admin) can act on."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(" ".join(self.problems))


def _json_text(text: str) -> str:
    """The JSON of a reply: the whole text, or the first ```json fenced block."""
    stripped = (text or "").strip()
    if stripped.startswith("{"):
        return stripped
    match = _FENCE.search(stripped)
    return match.group(1).strip() if match else stripped


def _coerce_ids(value):
    """Digit strings as integers (models often quote ids); anything else is left
    for the schema to reject."""
    if isinstance(value, list):
        return [
            int(v) if isinstance(v, str) and v.strip().isdigit() else v for v in value
        ]
    return value


def _normalize(data: dict) -> dict:
    data = dict(data)
    if "status_evidence" in data:
        data["status_evidence"] = _coerce_ids(data["status_evidence"])
    for field in (*TEXT_LISTS, "action_ratings"):
        items = data.get(field)
        if isinstance(items, list):
            fixed = []
            for item in items:
                if isinstance(item, dict):
                    item = dict(item)
                    if isinstance(item.get("text"), str):
                        item["text"] = " ".join(item["text"].split())
                    if "evidence" in item:
                        item["evidence"] = _coerce_ids(item["evidence"])
                    event_id = item.get("event_id")
                    if isinstance(event_id, str) and event_id.strip().isdigit():
                        item["event_id"] = int(event_id)
                fixed.append(item)
            data[field] = fixed
    return data


def _schema_problem(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "the reply"
    return f"At {where}: {error.message}."


def payload_validate(
    status: str,
    payload: dict,
    *,
    allowed_event_ids,
    recorded_action_ids,
) -> tuple[str, dict]:
    """Reply-level rules on a label in canonical shape (a parsed reply, or a
    label made by the rules backbone): every item non-empty and at most
    MAX_ITEM_CHARS characters; evidence only from ``allowed_event_ids`` (the
    events the prompt showed) and, when there were any, at least one per
    status and free-text item; exactly the recorded actions rated, once each.
    Returns the status and payload with texts stripped and evidence deduplicated;
    raises ReplyError naming every problem (unknown ids by number)."""
    problems: list[str] = []
    allowed = set(allowed_event_ids)
    recorded = list(dict.fromkeys(recorded_action_ids))
    unknown: list[int] = []

    def evidence_of(ids: list, where: str) -> list[int]:
        ids = list(dict.fromkeys(ids))
        unknown.extend(i for i in ids if i not in allowed)
        if allowed and not ids:
            problems.append(f"{where} cites no evidence: cite at least one event id.")
        return ids

    clean: dict = {"status_evidence": evidence_of(payload["status_evidence"], "The status")}
    for field, noun in TEXT_LISTS.items():
        items = []
        for n, item in enumerate(payload[field], start=1):
            where = f"{noun} {n}"
            text = item["text"].strip()
            if not text:
                problems.append(f"{where} is empty: write it or leave it out.")
            elif len(text) > MAX_ITEM_CHARS:
                problems.append(
                    f"{where} is {len(text)} characters long; the limit is "
                    f"{MAX_ITEM_CHARS}."
                )
            items.append({"text": text, "evidence": evidence_of(item["evidence"], where)})
        clean[field] = items
    ratings = []
    rated: set[int] = set()
    recorded_set = set(recorded)
    for n, item in enumerate(payload["action_ratings"], start=1):
        event_id = item["event_id"]
        if event_id not in recorded_set:
            problems.append(
                f"Action rating {n} rates event {event_id}, which is not one of the "
                "window's recorded actions to rate"
                + (f" ({', '.join(map(str, recorded))})." if recorded else " (none).")
            )
            continue
        if event_id in rated:
            problems.append(f"Action rating {n} rates event {event_id} a second time.")
            continue
        rated.add(event_id)
        ids = list(dict.fromkeys(item["evidence"]))
        unknown.extend(i for i in ids if i not in allowed)
        ratings.append({"event_id": event_id, "rating": item["rating"], "evidence": ids})
    missing = [pk for pk in recorded if pk not in rated]
    if missing:
        problems.append(
            "Rate every recorded action: event"
            f"{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
            f"{'are' if len(missing) > 1 else 'is'} not rated."
        )
    clean["action_ratings"] = ratings
    if unknown:
        ids = list(dict.fromkeys(unknown))
        problems.append(
            f"Evidence cites event id{'s' if len(ids) > 1 else ''} "
            f"{', '.join(map(str, ids[:20]))}{' ...' if len(ids) > 20 else ''} "
            "that the prompt did not show; cite only ids shown in brackets."
        )
    if problems:
        raise ReplyError(problems)
    return status, {
        "status_evidence": clean["status_evidence"],
        "acute_problems": clean["acute_problems"],
        "action_ratings": clean["action_ratings"],
        "added_actions": clean["added_actions"],
        "red_flags": clean["red_flags"],
    }


def reply_parse(
    text: str, *, context, allowed_event_ids=None
) -> tuple[str, dict]:
    """The status and label payload (oracle.models.OracleLabel shape) of a reply.

    ``text`` is a JSON object matching REPLY_SCHEMA, bare or in a ```json fence.
    ``context`` is the window's WindowContext; ``allowed_event_ids`` narrows the
    ids evidence may cite to those the prompt actually showed (the context's by
    default). Raises ReplyError on malformed JSON, schema violations, empty or
    over-long items, unknown evidence ids, ratings of events that are not the
    window's recorded actions, or recorded actions left unrated.
    """
    raw = _json_text(text)
    try:
        # strict=False: a raw newline or tab inside a string (which some
        # servers' grammars let through) is read as the whitespace it is.
        data = json.loads(raw, strict=False)
    except (json.JSONDecodeError, TypeError) as error:
        raise ReplyError(
            [f"The reply is not valid JSON ({error}); reply with one JSON object."]
        ) from None
    if not isinstance(data, dict):
        raise ReplyError(["The reply must be one JSON object, not a list or a value."])
    data = _normalize(data)
    errors = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        raise ReplyError([_schema_problem(e) for e in errors[:10]])
    allowed = context.allowed_event_ids if allowed_event_ids is None else allowed_event_ids
    return payload_validate(
        data["status"],
        data,
        allowed_event_ids=allowed,
        recorded_action_ids=[e["id"] for e in context.recorded_actions],
    )


__all__ = [
    "REPLY_SCHEMA",
    "ReplyError",
    "payload_validate",
    "reply_parse",
    "reply_schema_for",
    "reply_tokens_bound",
]
