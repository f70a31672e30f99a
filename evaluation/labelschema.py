"""The shape of a window's label (REALICU_SPEC section 3), defined once: the status
and rating vocabularies, the payload's fields and limits, its JSON Schema, and
``label_read``, which checks a payload against that shape and names, item by item,
what is wrong. Physicians' labels, Oracle replies and prediction files use it;
each caller adds its own rules (which events may be cited, which actions rated)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accounts.ids import id_parse
from evaluation.agreement import STATUS_ORDER

# Patient status, in order from best to worst.
STATUS_VALUES: tuple[str, ...] = STATUS_ORDER
RATING_VALUES: tuple[str, ...] = ("best_practice", "acceptable", "potentially_harmful")
# The key that picks each status on the labelling and adjudication pages.
STATUS_KEYS = {status: str(n) for n, status in enumerate(STATUS_VALUES, start=1)}

MAX_ITEM_CHARS = 300
MAX_ITEMS_PER_LIST = 50
MAX_EVIDENCE_PER_ITEM = 100

# Free-text lists of a label and how one item is named in messages.
TEXT_LISTS = {
    "acute_problems": "Acute problem",
    "added_actions": "Added action",
    "red_flags": "Red flag",
}
# The payload's fields (the status is stored apart from them).
PAYLOAD_FIELDS = (
    "status_evidence",
    "acute_problems",
    "action_ratings",
    "added_actions",
    "red_flags",
)

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

# A complete label, status included, as JSON Schema (draft 2020-12). Texts may
# still be blank or too long and evidence repeated: label_read says so.
LABEL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(STATUS_VALUES)},
        "status_evidence": _EVIDENCE,
        "acute_problems": _TEXT_LIST,
        "action_ratings": {
            "type": "array",
            "maxItems": MAX_ITEMS_PER_LIST,
            "items": {
                "type": "object",
                "properties": {
                    "event_id": {"type": "integer"},
                    "rating": {"type": "string", "enum": list(RATING_VALUES)},
                    "evidence": _EVIDENCE,
                },
                "required": ["event_id", "rating", "evidence"],
            },
        },
        "added_actions": _TEXT_LIST,
        "red_flags": _TEXT_LIST,
    },
    "required": ["status", *PAYLOAD_FIELDS],
}


def _spoken(values) -> str:
    """("a_b", "c", "d") as "a b, c or d"."""
    words = [v.replace("_", " ") for v in values]
    return ", ".join(words[:-1]) + " or " + words[-1]


@dataclass(frozen=True)
class LabelProblem:
    """One thing wrong with a payload: the payload field it belongs to, a code
    that says which rule it broke, and a sentence a person can act on."""

    field: str
    code: str
    message: str


@dataclass
class LabelReading:
    """A payload read by ``label_read``: the status ('' when missing or unknown),
    the payload in canonical form (PAYLOAD_FIELDS; texts stripped, evidence as
    integers without repeats, unreadable items left out), what is wrong with it,
    and the event ids each field cites (a rating's own event first)."""

    status: str
    payload: dict
    problems: list[LabelProblem] = field(default_factory=list)
    cited: dict[str, list[int]] = field(default_factory=dict)


def _event_ids(value, *, where: str, fail) -> list[int]:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        fail("evidence_not_list", f"{where}: evidence must be a list of events.")
        return []
    ids = []
    for item in value:
        # An event id in the database's range: 2**63 or 1.5e308 names no event
        # (and SQLite cannot even compare it).
        event_id = id_parse(item)
        if event_id is None:
            shown = repr(item) if len(repr(item)) <= 40 else repr(item)[:37] + "..."
            fail(
                "evidence_not_event", f"{where}: evidence must be events, not {shown}."
            )
        else:
            ids.append(event_id)
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_EVIDENCE_PER_ITEM:
        fail(
            "evidence_too_many",
            f"{where} has {len(ids)} pieces of evidence; the limit is "
            f"{MAX_EVIDENCE_PER_ITEM}.",
        )
    return ids


def label_read(payload: Mapping, *, complete: bool) -> LabelReading:
    """Check ``payload`` (the status and PAYLOAD_FIELDS) against the label's shape.

    A draft (``complete=False``) may be unfinished: no status, missing lists,
    empty items, unrated actions. Whatever it holds must still fit: a known
    status, items of at most MAX_ITEM_CHARS characters, at most
    MAX_ITEMS_PER_LIST items a list and MAX_EVIDENCE_PER_ITEM events an item,
    evidence as event ids, ratings from RATING_VALUES, each action rated once.
    A complete label also needs the status, no empty item and every rating.
    Event ids that are digit strings are read as numbers.
    """
    problems: list[LabelProblem] = []

    def failing(field_name: str):
        def fail(code: str, message: str) -> None:
            problems.append(LabelProblem(field_name, code, message))

        return fail

    status = payload.get("status") or ""
    if not isinstance(status, str) or (status and status not in STATUS_VALUES):
        failing("status")(
            "status_unknown", f"Patient status must be {_spoken(STATUS_VALUES)}."
        )
        status = ""
    elif complete and not status:
        failing("status")(
            "status_missing", f"Choose the patient status: {_spoken(STATUS_VALUES)}."
        )
    status_evidence = _event_ids(
        payload.get("status_evidence"),
        where="Patient status",
        fail=failing("status_evidence"),
    )
    body: dict = {"status_evidence": status_evidence}
    cited: dict[str, list[int]] = {"status_evidence": status_evidence}

    def items_of(field_name: str) -> list:
        value = payload.get(field_name)
        if value in (None, ""):
            return []
        title = field_name.replace("_", " ").capitalize()
        if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
            failing(field_name)("list_unreadable", f"{title} could not be read.")
            return []
        if len(value) > MAX_ITEMS_PER_LIST:
            failing(field_name)(
                "list_too_long",
                f"{title} has {len(value)} items; the limit is {MAX_ITEMS_PER_LIST}.",
            )
            return []
        return value

    for field_name, noun in TEXT_LISTS.items():
        fail = failing(field_name)
        cleaned = []
        cited[field_name] = []
        for n, item in enumerate(items_of(field_name), start=1):
            where = f"{noun} {n}"
            text = item.get("text", "")
            if not isinstance(text, str):
                fail("text_not_text", f"{where} must be text.")
                text = ""
            text = text.strip()
            if complete and not text:
                fail("text_empty", f"{where} is empty: write it or remove it.")
            if len(text) > MAX_ITEM_CHARS:
                fail(
                    "text_too_long",
                    f"{where} is {len(text)} characters long; the limit is "
                    f"{MAX_ITEM_CHARS}.",
                )
            evidence = _event_ids(item.get("evidence"), where=where, fail=fail)
            cited[field_name] += evidence
            cleaned.append({"text": text, "evidence": evidence})
        body[field_name] = cleaned

    fail = failing("action_ratings")
    ratings = []
    rated: set[int] = set()
    cited["action_ratings"] = []
    for n, item in enumerate(items_of("action_ratings"), start=1):
        where = f"Rated action {n}"
        event_id = id_parse(item.get("event_id"))
        if event_id is None:
            fail("rating_no_event", f"{where} does not name a recorded action.")
            continue
        if event_id in rated:
            fail("rating_repeated", f"{where} rates the same action twice.")
            continue
        rated.add(event_id)
        rating = item.get("rating") or ""
        if not isinstance(rating, str) or (rating and rating not in RATING_VALUES):
            fail(
                "rating_unknown",
                f"{where}: the rating must be {_spoken(RATING_VALUES)}.",
            )
            rating = ""
        elif complete and not rating:
            fail("rating_missing", f"{where} is not rated: {_spoken(RATING_VALUES)}.")
        evidence = _event_ids(item.get("evidence"), where=where, fail=fail)
        cited["action_ratings"] += [event_id, *evidence]
        ratings.append({"event_id": event_id, "rating": rating, "evidence": evidence})
    body["action_ratings"] = ratings

    return LabelReading(
        status=status,
        payload={name: body[name] for name in PAYLOAD_FIELDS},
        problems=problems,
        cited=cited,
    )


__all__ = [
    "LABEL_SCHEMA",
    "MAX_EVIDENCE_PER_ITEM",
    "MAX_ITEMS_PER_LIST",
    "MAX_ITEM_CHARS",
    "PAYLOAD_FIELDS",
    "RATING_VALUES",
    "STATUS_KEYS",
    "STATUS_VALUES",
    "TEXT_LISTS",
    "LabelProblem",
    "LabelReading",
    "label_read",
]
