"""ICU-Evo's own prompts (the paper's Assessment and Insight agents), each
versioned apart from the shared predictor prompt (agents.prompts), and the
checks of their JSON replies.

A change to a prompt's wording or reply shape is a new version; the agent's
``prompt_version`` names all three (predictor, assessment, insight).
"""

from __future__ import annotations

from agents.prompts import reply_json

ASSESSMENT_VERSION = "assessment-v1"
INSIGHT_VERSION = "insight-v1"

# Caps on what a reply may put into memory.
SUMMARY_CHARS = 1200
NOTE_CHARS = 200
MAX_ASSESSED_CRITICAL = 5
MAX_HYPOTHESES = 5
MAX_EVIDENCE = 5
STATEMENT_CHARS = 300

ASSESSMENT_SYSTEM = (
    "You are the assessment step of ICU-Evo, an ICU co-pilot's memory. Every "
    "6 hours you read what was charted since the last assessment (recent "
    "events, trends, critical events) and the previous trajectory summary, and "
    "write the stay's trajectory summary as it stands now: the course so far, "
    "what changed in the last 6 hours, and the current state. Use only the "
    "information given. Event ids are shown as #id.\n"
    "Reply with one JSON object and nothing else:\n"
    '{"summary": "at most 8 sentences",\n'
    ' "critical_events": [{"event_id": id of a shown event that changes the '
    'patient\'s story, "note": "why, a few words"}]}\n'
    "critical_events may be empty; at most 5."
)

INSIGHT_SYSTEM = (
    "You are the insight step of ICU-Evo, an ICU co-pilot's memory. Every 6 "
    "hours you revise the patient-specific hypotheses: what drives this "
    "patient's course, where it departs from what is expected of similar "
    "patients (unusual drug responses, persistent abnormalities). For each "
    "hypothesis gather supporting evidence and counter-evidence from the "
    "memory given, citing event ids (#id) where an event is the evidence. "
    "Drop hypotheses the evidence no longer supports; add new ones.\n"
    "Reply with one JSON object and nothing else:\n"
    '{"hypotheses": [{"statement": "the hypothesis",\n'
    '  "supporting": [{"text": "evidence", "event_id": id or null}],\n'
    '  "counter": [{"text": "counter-evidence", "event_id": id or null}]}]}\n'
    "At most 5 hypotheses, at most 5 items of evidence each."
)


class ReplyInvalid(ValueError):
    """A step's reply that cannot go into memory; the message says why."""


def reply_object(text: str) -> dict:
    """The JSON object in a reply (bare, or inside a code fence or prose)."""
    data = reply_json(text, ReplyInvalid)
    if not isinstance(data, dict):
        raise ReplyInvalid("the reply is not a JSON object")
    return data


def _event_id(value, known: set[int], where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("#").isdigit():
        value = int(value.lstrip("#"))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReplyInvalid(f"{where}: event_id {str(value)[:20]!r} is not a number")
    if value not in known:
        raise ReplyInvalid(f"{where}: event #{value} is not one the agent was shown")
    return value


def _text(value, limit: int, missing: str) -> str:
    """A reply's text, stripped and cut to ``limit``; ReplyInvalid(``missing``)
    when it is not text or is blank."""
    if not isinstance(value, str) or not value.strip():
        raise ReplyInvalid(missing)
    return value.strip()[:limit]


def _objects(items: list, limit: int, noun: str):
    """(n, item) for the first ``limit`` items of a reply's list, numbered from
    1; ReplyInvalid for one that is not an object."""
    for n, item in enumerate(items[:limit], start=1):
        if not isinstance(item, dict):
            raise ReplyInvalid(f"{noun} {n} is not an object")
        yield n, item


def assessment_parse(text: str, *, known_ids: set[int]) -> tuple[str, list[dict]]:
    """(summary, critical events) of an assessment reply; ReplyInvalid when the
    reply is not the asked shape or cites an event it was not shown."""
    data = reply_object(text)
    summary = _text(data.get("summary"), SUMMARY_CHARS, "the reply has no summary text")
    items = data.get("critical_events") or []
    if not isinstance(items, list):
        raise ReplyInvalid("critical_events is not a list")
    critical = []
    for n, item in _objects(items, MAX_ASSESSED_CRITICAL, "critical event"):
        event_id = _event_id(item.get("event_id"), known_ids, f"critical event {n}")
        if event_id is None:
            raise ReplyInvalid(f"critical event {n} has no event_id")
        note = item.get("note") or ""
        if not isinstance(note, str):
            raise ReplyInvalid(f"critical event {n}: note is not text")
        critical.append({"event_id": event_id, "note": note.strip()[:NOTE_CHARS]})
    return summary, critical


def _evidence(items, known: set[int], where: str) -> list[dict]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ReplyInvalid(f"{where} is not a list")
    # A bare string is an item of evidence with no event.
    items = [{"text": i} if isinstance(i, str) else i for i in items[:MAX_EVIDENCE]]
    out = []
    for n, item in _objects(items, MAX_EVIDENCE, f"{where} item"):
        text = _text(item.get("text"), NOTE_CHARS, f"{where} item {n} has no text")
        out.append(
            {
                "text": text,
                "event_id": _event_id(item.get("event_id"), known, f"{where} {n}"),
            }
        )
    return out


def insight_parse(text: str, *, known_ids: set[int]) -> list[dict]:
    """The hypotheses of an insight reply, each with ``statement``,
    ``supporting``, ``counter`` and ``status``: "accepted" when its supporting
    evidence outnumbers its counter-evidence, else "rejected" (kept, marked,
    so the predictor sees what was ruled out). ReplyInvalid when the reply is
    not the asked shape or cites an event it was not shown."""
    data = reply_object(text)
    items = data.get("hypotheses")
    if not isinstance(items, list):
        raise ReplyInvalid("the reply has no hypotheses list")
    out = []
    for n, item in _objects(items, MAX_HYPOTHESES, "hypothesis"):
        statement = _text(
            item.get("statement"), STATEMENT_CHARS, f"hypothesis {n} has no statement"
        )
        supporting = _evidence(
            item.get("supporting"), known_ids, f"hypothesis {n} supporting"
        )
        counter = _evidence(item.get("counter"), known_ids, f"hypothesis {n} counter")
        out.append(
            {
                "statement": statement,
                "supporting": supporting,
                "counter": counter,
                "status": "accepted" if len(supporting) > len(counter) else "rejected",
            }
        )
    return out
