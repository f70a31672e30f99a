"""The Oracle's reply: its JSON schema (the four tasks of spec section 3, every
item with evidence) and the parser that turns a reply into a label payload in
the physicians' shape, or says exactly what is wrong with it."""

from __future__ import annotations

import json
import re

import jsonschema

from evaluation.labelschema import (
    LABEL_SCHEMA,
    RATING_VALUES,
    STATUS_VALUES,
    TEXT_LISTS,
    label_read,
)

# A reply is a complete label, status included (evaluation.labelschema).
REPLY_SCHEMA: dict = LABEL_SCHEMA
_VALIDATOR = jsonschema.Draft202012Validator(REPLY_SCHEMA)
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


# An item is clinical text: a phrase of words (issue 32: "..." and
# "stall-dur%20fiz#DKC5kq8MzP" were accepted as labels). The schema's pattern
# keeps a constrained decoder to a phrase that starts with a letter and uses
# the characters clinical phrases use (its length bound included: a converter
# to a grammar reads the pattern and not minLength/maxLength beside it);
# ``clinical_text_problem`` is the check every reply passes, constrained or not.
TEXT_CHARACTERS = r"A-Za-z0-9 .,;:'()/+%<>=&?!-"
NOISE_CHARACTERS = set("#@{}|\\^~`*$_[]")
# A random-looking run: 6 or more letters and digits with no punctuation
# between them, mixing upper and lower case and digits, the three classes
# alternating at least four times ("DKC5kq8MzP", "EpuN23A"). Values with
# their units ("10.8g/dL", "PaO2/FiO2", "SpO2<90%") break into short runs at
# their punctuation, and clinical names ("HbA1c", "NaHCO3", "MgSO4",
# "COVID19", "CHA2DS2-VASc") are shorter or alternate less.
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{6,}")
_CHAR_CLASS = re.compile(r"[a-z]+|[A-Z]+|[0-9]+")


def _random_looking(run: str) -> bool:
    classes = _CHAR_CLASS.findall(run)
    kinds = {
        "digit" if c[0].isdigit() else "upper" if c[0].isupper() else "lower"
        for c in classes
    }
    return len(kinds) == 3 and len(classes) >= 5


def text_pattern(max_chars: int) -> str:
    return f"^[A-Za-z][{TEXT_CHARACTERS}]{{1,{max(1, max_chars - 1)}}}$"


def text_string(max_chars: int) -> dict:
    """The schema of a clinical phrase of 2 to ``max_chars`` characters
    (text_pattern): an Oracle label's texts and an agent's predictions."""
    return {
        "type": "string",
        "minLength": 2,
        "maxLength": max_chars,
        "pattern": text_pattern(max_chars),
    }


def reply_object(**properties: dict) -> dict:
    """The schema of a reply: its status (STATUS_VALUES) and ``properties``,
    in this order, each required and no other."""
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": list(STATUS_VALUES)},
            **properties,
        },
        "required": ["status", *properties],
        "additionalProperties": False,
    }


def clinical_text_problem(text: str) -> str:
    """Why ``text`` is not a clinical phrase ("" when it is one): it needs a
    word (two letters in a row), letters for a third of its characters at
    least ("fever (38.3 °C)" is one), none of NOISE_CHARACTERS and
    no random-looking run of letters and digits (_random_looking)."""
    text = (text or "").strip()
    if not re.search(r"[^\W\d_]{2}", text):
        return "has no word (punctuation or digits only)"
    noise = sorted({c for c in text if c in NOISE_CHARACTERS or not c.isprintable()})
    if noise:
        return (
            "holds characters clinical text does not use ("
            + " ".join(repr(c)[1:-1] for c in noise)
            + ")"
        )
    visible = [c for c in text if not c.isspace()]
    letters = sum(1 for c in visible if c.isalpha())
    if letters * 3 < len(visible):
        return "is mostly punctuation or digits, not words"
    for run in _ALNUM_RUN.findall(text):
        if _random_looking(run):
            return f"holds a random-looking string ({run[:40]})"
    return ""


def _bounded_schema(*, ids, recorded, items, evidence, text_chars) -> dict:
    cite = {"type": "integer", "enum": ids} if ids else {"type": "integer"}
    cited = {
        "type": "array",
        "items": cite,
        "minItems": 1 if ids else 0,
        "maxItems": evidence if ids else 0,
    }
    ratings_evidence = {
        "type": "array",
        "items": cite,
        "maxItems": evidence if ids else 0,
    }
    text_item = {
        "type": "object",
        "properties": {
            "text": text_string(text_chars),
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
                "rating": {"type": "string", "enum": list(RATING_VALUES)},
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
    return reply_object(
        status_evidence=cited,
        acute_problems=text_list,
        action_ratings=ratings,
        added_actions=text_list,
        red_flags=text_list,
    )


def reply_tokens_bound(*, ids, recorded, items, evidence, text_chars) -> int:
    """Tokens of the longest reply the bounded schema allows (at
    REPLY_CHARS_PER_TOKEN, with a token of whitespace per element)."""
    digits = max([len(str(i)) for i in ids] or [1])
    cites = evidence * (digits + 2) + 2
    text_item = 30 + text_chars + cites
    rating = 60 + digits + cites
    chars = 160 + cites + 3 * items * text_item + len(recorded) * rating
    elements = (
        12 + evidence + 3 * items * (4 + evidence) + len(recorded) * (6 + evidence)
    )
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
        steps = [
            ("items", 2),
            ("text_chars", 80),
            ("items", 1),
            ("evidence", 2),
            ("text_chars", 60),
            ("evidence", 1),
            ("items", 0),
        ]
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
    label made by the rules backbone): the label's shape as a complete label
    (``evaluation.labelschema.label_read``: every item non-empty and at most
    MAX_ITEM_CHARS characters, each action rated once); evidence only from
    ``allowed_event_ids`` (the events the prompt showed) and, when there were
    any, at least one per status and free-text item; exactly the recorded
    actions rated. Returns the status and payload with texts stripped and
    evidence deduplicated; raises ReplyError naming every problem (unknown ids
    by number)."""
    reading = label_read({**payload, "status": status}, complete=True)
    problems = [problem.message for problem in reading.problems]
    clean = reading.payload
    allowed = set(allowed_event_ids)
    recorded = list(dict.fromkeys(recorded_action_ids))
    recorded_set = set(recorded)

    for field, noun in TEXT_LISTS.items():
        for n, item in enumerate(clean[field], start=1):
            problem = clinical_text_problem(item["text"])
            if problem:
                problems.append(
                    f"{noun} {n} ({item['text'][:60]!r}) {problem}: write a short "
                    "clinical phrase."
                )
    if allowed:
        if not clean["status_evidence"]:
            problems.append("The status cites no evidence: cite at least one event id.")
        for field, noun in TEXT_LISTS.items():
            for n, item in enumerate(clean[field], start=1):
                if not item["evidence"]:
                    problems.append(
                        f"{noun} {n} cites no evidence: cite at least one event id."
                    )
    for n, item in enumerate(payload["action_ratings"], start=1):
        if item["event_id"] not in recorded_set:
            problems.append(
                f"Rated action {n} rates event {item['event_id']}, which is not one "
                "of the window's recorded actions to rate"
                + (f" ({', '.join(map(str, recorded))})." if recorded else " (none).")
            )
    ratings = [r for r in clean["action_ratings"] if r["event_id"] in recorded_set]
    rated = {r["event_id"] for r in ratings}
    missing = [pk for pk in recorded if pk not in rated]
    if missing:
        problems.append(
            "Rate every recorded action: event"
            f"{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
            f"{'are' if len(missing) > 1 else 'is'} not rated."
        )
    clean = {**clean, "action_ratings": ratings}
    items = [item for name in (*TEXT_LISTS, "action_ratings") for item in clean[name]]
    cited = clean["status_evidence"] + [i for item in items for i in item["evidence"]]
    unknown = list(dict.fromkeys(i for i in cited if i not in allowed))
    if unknown:
        problems.append(
            f"Evidence cites event id{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(str, unknown[:20]))}"
            f"{' ...' if len(unknown) > 20 else ''} "
            "that the prompt did not show; cite only ids shown in brackets."
        )
    if problems:
        raise ReplyError(problems)
    return reading.status, clean


def reply_parse(text: str, *, context, allowed_event_ids=None) -> tuple[str, dict]:
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
    allowed = (
        context.allowed_event_ids if allowed_event_ids is None else allowed_event_ids
    )
    return payload_validate(
        data["status"],
        data,
        allowed_event_ids=allowed,
        recorded_action_ids=[e["id"] for e in context.recorded_actions],
    )


__all__ = [
    "REPLY_SCHEMA",
    "clinical_text_problem",
    "ReplyError",
    "payload_validate",
    "reply_parse",
    "reply_schema_for",
    "reply_tokens_bound",
]
