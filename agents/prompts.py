"""The predictor prompt every reference agent shares (RealICU spec section 9),
versioned: a change to its wording or its reply shape is a new
``PROMPT_VERSION``, and a run records the version it used, so baselines on a
leaderboard name the prompt they were made with.

The agents differ only in the context sections they put in the user message
(``predictor_messages(ctx, sections)``); the system message and the reply they
ask for are the same. The reply is the release prediction line without its
ids: ``status`` (one of evaluation.labelschema.STATUS_VALUES),
``acute_problems`` and ``recommended_actions``, each a ranked list of short
strings (exports.scoring reads these keys).
"""

from __future__ import annotations

import inspect
import json
import re

from agents.base import AgentError, WindowContext
from evaluation.labelschema import STATUS_VALUES

PROMPT_VERSION = "predictor-v2"

# At most this many items a list are kept from a reply (the leaderboard's k is
# at most exports.scoring.MAX_K).
MAX_ITEMS = 20
MAX_ITEM_CHARS = 300

# The reply's JSON Schema for constrained decoding: few and short enough
# items that the longest reply fits a reply budget of a few hundred tokens
# (2 x 5 items of 80 characters at about 2 characters a token), each item
# clinical text (oracle.schema.text_pattern).
SCHEMA_ITEMS = 5
SCHEMA_ITEM_CHARS = 80

# The prompt asks for what the schema allows (SCHEMA_ITEMS items a list, each
# a short phrase): a constrained decoder cuts a longer list, and an
# unconstrained reply is kept to MAX_ITEMS.
SYSTEM = (
    "You are an ICU co-pilot at the bedside. You see one 30-minute window of an "
    "ICU stay and what was charted before its end, never what follows. Judge the "
    "patient's state at the end of the window.\n"
    "Reply with one JSON object and nothing else:\n"
    '{"status": one of ' + ", ".join(f'"{s}"' for s in STATUS_VALUES) + ",\n"
    ' "acute_problems": ["the active acute problems, most important first"],\n'
    ' "recommended_actions": ["the actions you would take now, most important '
    'first"]}\n'
    f"Keep each item short (a few words), at most {SCHEMA_ITEMS} items a list."
)


# A clinical note's text (a radiology report: FINDINGS first, then IMPRESSION,
# windows.importers.mimic.notes) is cut at NOTE_CHARS characters on its line, at
# NOTE_AGGREGATE_CHARS in the full-context agent's aggregated earlier blocks, the
# cut marked; other text at 120. Discharge summaries never reach an agent
# (windows.selectors_context.bedside_filter).
NOTE_CHARS = 600
NOTE_AGGREGATE_CHARS = 240
TRUNCATION_MARK = "[…truncated]"


def note_text(event: dict, limit: int = NOTE_CHARS) -> str:
    """A note's text, whitespace collapsed, cut at ``limit`` characters with
    TRUNCATION_MARK (a report's findings come first, so the cut keeps them)."""
    text = " ".join((event.get("value_text") or "").split())
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATION_MARK) - 1].rstrip() + " " + TRUNCATION_MARK


def event_line(event: dict) -> str:
    """One event as a prompt line: hours since ICU admission, kind, concept,
    value and unit (or text)."""
    value = event.get("value_num")
    concept = event.get("concept") or event.get("name") or ""
    if value is not None:
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if event.get("unit"):
            shown = f"{shown} {event['unit']}"
    elif event.get("domain") == "notes":
        shown = note_text(event)
        if event.get("name") and event["name"] != concept:
            concept = f"{concept} ({event['name']})"
    else:
        shown = (event.get("value_text") or "").strip()[:120]
    hours = event.get("hours_since_admit")
    head = f"[{hours:.2f}h]" if isinstance(hours, int | float) else "[?]"
    return f"{head} {event.get('kind', '')} {concept}: {shown}".rstrip(": ")


def events_text(events: list[dict]) -> str:
    return "\n".join(event_line(e) for e in events) or "(no events)"


def static_text(ctx: WindowContext) -> str:
    parts = [f"{k}: {v}" for k, v in ctx.static.items() if v not in (None, "")]
    return "; ".join(parts) or "(not recorded)"


def header_text(ctx: WindowContext) -> str:
    length_h = (ctx.end - ctx.start).total_seconds() / 3600.0
    return (
        f"Patient: {static_text(ctx)}\n"
        f"Window {ctx.window_index}: hours {ctx.hours_since_admission:.2f} to "
        f"{ctx.hours_since_admission + length_h:.2f} since ICU admission."
    )


def predictor_messages(
    ctx: WindowContext, sections: list[tuple[str, str]]
) -> list[dict]:
    """The shared prompt with the agent's context ``sections`` (title, text)."""
    body = [header_text(ctx)]
    for title, text in sections:
        body.append(f"## {title}\n{text}")
    body.append("Reply with the JSON object.")
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "\n\n".join(body)},
    ]


def _items(value, name: str = "a list") -> list[str]:
    """A reply's list as strings: plain strings, or items with a ``text``.
    Each must be clinical text (oracle.schema.clinical_text_problem): an item
    of punctuation or noise fails the reply, with the reason, so that a model
    gets its repair turn and an endpoint's error says which item."""
    from oracle.schema import clinical_text_problem

    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentError(f"{name} in the reply is not a JSON array")
    out = []
    for n, item in enumerate(value, start=1):
        if isinstance(item, dict):
            item = item.get("text")
        if isinstance(item, str) and item.strip():
            problem = clinical_text_problem(item)
            if problem:
                raise AgentError(
                    f"item {n} of {name} ({item.strip()[:60]!r}) {problem}: each "
                    "item must be a short clinical phrase"
                )
            out.append(item.strip()[:MAX_ITEM_CHARS])
    return out[:MAX_ITEMS]


def prediction_normalise(data) -> dict:
    """A prediction dict in the release's line shape (``status``,
    ``acute_problems``, ``recommended_actions``) from an agent's or an
    endpoint's reply. Label-shaped replies are understood too (items with
    ``text``, ``added_actions`` for the recommended actions). Raises AgentError
    with a clear message when it is not one."""
    if not isinstance(data, dict):
        raise AgentError("the reply is not a JSON object")
    status = data.get("status")
    if status not in STATUS_VALUES:
        raise AgentError(
            f"the reply's status {str(status)[:40]!r} is not one of "
            + ", ".join(STATUS_VALUES)
        )
    actions = data.get("recommended_actions", data.get("added_actions"))
    return {
        "status": status,
        "acute_problems": _items(data.get("acute_problems"), "acute_problems"),
        "recommended_actions": _items(actions, "recommended_actions"),
    }


# Tokens held back from the budget when an agent compresses its prompt, for
# a repair turn's correction (the repair appends it to the prompt).
REPAIR_RESERVE = 96


def prediction_schema() -> dict:
    from oracle.schema import reply_object, text_string

    item = text_string(SCHEMA_ITEM_CHARS)
    items = {"type": "array", "items": item, "maxItems": SCHEMA_ITEMS}
    return reply_object(acute_problems=items, recommended_actions=items)


def predict_validated(llm, messages: list[dict], *, purpose: str = "predict"):
    """The prediction of ``llm``'s reply to ``messages``, as the Oracle gets
    its labels (oracle.backbones.openai_compat): the reply's schema in the
    server's dialect, and a reply that fails validation gets one repair turn
    quoting the error; a second failure is AgentError with the Oracle's
    wording. The repair turn carries the reply and the correction where the
    budget has room for them, else the correction alone (the prompt was
    compressed with REPAIR_RESERVE to spare for it)."""
    from agents.llm import prompt_fits

    schema = prediction_schema()

    takes_schema = "schema" in inspect.signature(llm.chat).parameters

    def ask(chat_messages):
        if takes_schema:
            return llm.chat(chat_messages, purpose=purpose, schema=schema).text
        return llm.chat(chat_messages, purpose=purpose).text

    text = ask(messages)
    try:
        return prediction_parse(text)
    except AgentError as error:
        first = str(error)
    correction = {
        "role": "user",
        "content": f"Your reply could not be used: {first}. Reply again with only "
        "the corrected JSON object.",
    }
    repair = [*messages, {"role": "assistant", "content": text}, correction]
    if not prompt_fits(llm, repair):
        last = dict(messages[-1])
        last["content"] = f"{last.get('content') or ''}\n\n{correction['content']}"
        repair = [*messages[:-1], last]
    text = ask(repair)
    try:
        return prediction_parse(text)
    except AgentError as error:
        raise AgentError(
            f"The reply failed validation twice (after one repair request): {error}"
        ) from None


_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def reply_json(text: str, error: type[Exception] = AgentError):
    """The JSON in a model's reply: the whole text, or the object inside a code
    fence or prose; ``error`` when it holds none or that one does not parse."""
    try:
        return json.loads(text)
    except ValueError:
        found = _OBJECT.search(text or "")
        if found is None:
            raise error("the reply holds no JSON object") from None
        try:
            return json.loads(found.group(0))
        except ValueError:
            raise error("the reply's JSON object does not parse") from None


def prediction_parse(text: str) -> dict:
    """The prediction in a model's reply text (a JSON object, possibly inside a
    code fence or prose)."""
    return prediction_normalise(reply_json(text))
