"""The hindsight prompt of one window (spec section 7; issue 6 part 2): static
context (with the records coded after discharge, marked and apart from the
events, and the discharge summary, marked as written at discharge; issue 21),
a compact per-6-h trajectory, the events around the window in full (radiology
reports among them, their text cut at NOTE_CHARS), the recorded actions to
rate, and the label instructions, kept within the template's token budget by
dropping whole records by rule.

Token estimate: ceil(characters / ratio) per message plus 4 tokens of chat
framing per message, with 4 characters per token by default. That is about
right for English prose on large BPE vocabularies but 1.5-2x short on clinical
text with numbers for small ones (SmolLM2: about 2.5), so a backbone passes
its calibrated ratio (oracle.services.tokens), and the request is counted with
the server's tokenizer where it has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from oracle.context import SUMMARY_COLUMNS, summary_coarsen
from oracle.models import PromptTemplate

# v2: the example reply's item is a phrase, not "..." (small models copied it,
# and "..." is no clinical text: oracle.schema.clinical_text_problem).
DEFAULT_VERSION = "hindsight-v2"
DEFAULT_TOKEN_BUDGET = 12000
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4

DEFAULT_SYSTEM = (
    "You are a senior intensive care physician labelling one 30-minute window of "
    "an ICU stay in hindsight: you see the whole stay, including what happened "
    "after the window and how it ended, and you judge the window as an expert "
    "reviewer would. You reply with one JSON object and nothing else."
)

DEFAULT_INSTRUCTIONS = """Label the window with the four tasks below. Every item cites evidence: the ids in square brackets of the events shown above (only those ids).

1. status: the patient's status during the window relative to the preceding hours: "improving", "stable" or "deteriorating"; status_evidence lists the events that show it.
2. acute_problems: the acute problems or emerging risks that need active management during the window, each {"text", "evidence"}.
3. action_ratings: rate each recorded action listed under "Recorded actions to rate" exactly once, {"event_id", "rating", "evidence"}, rating "best_practice", "acceptable" or "potentially_harmful". Rate no other event.
   added_actions: actions that should have been taken in the window with expected benefit within 1 hour, each {"text", "evidence"}.
4. red_flags: high-risk actions to avoid now, judged on their own (not derived from your ratings), each {"text", "evidence"}.

Each text is one short clinical phrase of at most 300 characters. Lists may be empty. Reply with JSON only, of this shape:
{"status": "stable", "status_evidence": [1], "acute_problems": [{"text": "the problem in a few words", "evidence": [1]}], "action_ratings": [{"event_id": 2, "rating": "acceptable", "evidence": [1]}], "added_actions": [], "red_flags": []}"""


def prompt_default_get_or_create() -> PromptTemplate:
    """The default versioned hindsight prompt, DEFAULT_VERSION (created once; an
    existing row of that version is returned unchanged, as a used version is
    frozen)."""
    template, _ = PromptTemplate.objects.get_or_create(
        version=DEFAULT_VERSION,
        defaults={
            "system": DEFAULT_SYSTEM,
            "instructions": DEFAULT_INSTRUCTIONS,
            "token_budget": DEFAULT_TOKEN_BUDGET,
        },
    )
    return template


class PromptBudgetError(ValueError):
    """Even fully compressed, the window's prompt does not fit the budget."""


@dataclass
class Prompt:
    """One request's chat messages, the event ids it showed (the only ids
    evidence may cite), its estimated prompt tokens, and the compressions
    applied to fit the budget."""

    messages: list[dict]
    event_ids: frozenset[int]
    estimated_tokens: int
    compressions: list[str] = field(default_factory=list)


def tokens_estimate(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """ceil(len(text) / chars_per_token): see the module docstring."""
    return math.ceil(len(text) / chars_per_token)


def messages_tokens(
    messages: list[dict], chars_per_token: float = CHARS_PER_TOKEN
) -> int:
    return sum(
        tokens_estimate(m.get("content") or "", chars_per_token) + TOKENS_PER_MESSAGE
        for m in messages
    )


def messages_chars(messages: list[dict]) -> int:
    return sum(len(m.get("content") or "") for m in messages)


# --- rendering ------------------------------------------------------------------

_SUMMARY_LABELS = {
    "map": "MAP",
    "map_min": "MAPmin",
    "hr": "HR",
    "spo2": "SpO2",
    "temp": "Tmax",
    "gcs": "GCS",
    "ventilation": "vent",
    "fio2": "FiO2",
    "pf_ratio": "P/F",
    "ned": "NEeq",
    "lactate": "lact",
    "ph": "pH",
    "creatinine": "creat",
    "platelets": "plt",
    "bilirubin": "bili",
    "inr": "INR",
    "urine_ml": "UO_mL",
    "aki_stage": "KDIGO",
    "crrt_active": "CRRT",
    "sofa": "SOFA",
    "antibiotic": "abx",
}


def _fmt(value) -> str:
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _hours(h: float) -> str:
    return f"{h:+.2f}h"


# Clinical notes in a prompt (issue 21). A radiology report's line holds its
# text (FINDINGS, then IMPRESSION) up to NOTE_CHARS characters; a discharge
# summary, written at discharge and shown to the hindsight Oracle only, up to
# DISCHARGE_CHARS, cut to DISCHARGE_MIN_CHARS when the budget needs it
# (prompt_build's step 2). A cut text ends with TRUNCATION_MARK.
NOTES_DOMAIN = "notes"
NOTE_CHARS = 1200
DISCHARGE_CHARS = 4000
DISCHARGE_MIN_CHARS = 600
TRUNCATION_MARK = "[…truncated]"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return (
        text[: max(0, limit - len(TRUNCATION_MARK) - 1)].rstrip()
        + " "
        + TRUNCATION_MARK
    )


def discharge_block(summaries: list[dict], limit: int = DISCHARGE_CHARS) -> str:
    """The admission's discharge summaries, apart from the events and marked as
    written at discharge, each cut at ``limit`` characters; "" without any."""
    if not summaries:
        return ""
    lines = [
        "## Discharge summary (written at discharge: hindsight, tells how the stay "
        "ended; not an event of the timeline, no id, not citable as evidence)"
    ]
    for note in summaries:
        text = " ".join(str(note.get("text") or "").split())
        lines.append(f"Written {note['written']}: {_cut(text, limit)}")
    return "\n".join(lines)


def event_line(event: dict) -> str:
    """One event as one line: ``[id] +h.hh domain category name = value unit text``."""
    parts = [f"[{event['id']}]", _hours(event["hours"]), event["kind"], event["domain"]]
    if event.get("concept"):
        # The concept's name (windows.vocabulary), never a source label that
        # contradicts the value's unit; the source label where it adds to it.
        label = event["concept"]
        if event.get("detail"):
            label = f"{label} ({event['detail']})"
    else:
        label = event["category"] or event["name"]
        if event["name"] and event["name"].lower() != (event["category"] or "").lower():
            label = f"{label} ({event['name']})" if event["category"] else event["name"]
    parts.append(label)
    if event["value"] is not None:
        parts.append(
            f"= {_fmt(event['value'])}{(' ' + event['unit']) if event['unit'] else ''}"
        )
    if event["text"]:
        text = " ".join(str(event["text"]).split())
        if event.get("domain") == NOTES_DOMAIN:
            # A report's findings come first in its text (windows.importers.
            # mimic.notes): the cut keeps them.
            parts.append(f'"{_cut(text, NOTE_CHARS)}"')
        else:
            parts.append(f'"{text[:160]}"')
    if event.get("end_hours") is not None:
        parts.append(f"until {_hours(event['end_hours'])}")
    if event.get("latest_before"):
        parts.append("(latest result before the detailed span)")
    return " ".join(parts)


def summary_line(row: dict) -> str:
    values = row["values"]
    cells = [
        f"{_SUMMARY_LABELS[name]} {_fmt(values[name])}"
        for name in SUMMARY_COLUMNS
        if name in values
    ]
    return f"h{row['from_h']}-{row['to_h']}: " + (
        ", ".join(cells) if cells else "no data"
    )


def _static_block(context) -> str:
    s = context.static
    lines = ["## Patient and stay (hindsight: outcome known)"]
    who = ", ".join(
        str(x)
        for x in (
            f"age {s.get('age')}" if s.get("age") is not None else None,
            s.get("sex") or None,
            f"weight {_fmt(s['weight_kg'])} kg" if s.get("weight_kg") else None,
        )
        if x
    )
    lines.append(f"Patient: {who or 'unknown'}.")
    diagnosis = s.get("admission_diagnosis") or s.get("diagnosis_code") or "unknown"
    lines.append(
        f"Admission diagnosis (coded after discharge): {diagnosis}; disease group: "
        f"{s.get('disease_group')}; admission type: {s.get('admission_type') or 'unknown'}; "
        f"unit: {s.get('care_unit') or 'unknown'}."
    )
    outcome = f"ICU stay {s.get('stay_hours')} h; hospital outcome: {s.get('hospital_outcome')}"
    if s.get("discharge_disposition"):
        outcome += f" ({s['discharge_disposition']})"
    if s.get("sepsis3_onset_h") is not None:
        outcome += f"; Sepsis-3 onset at {s['sepsis3_onset_h']:+} h"
    lines.append(outcome + ".")
    coded = s.get("coded_after_discharge") or []
    if coded:
        lines.append("")
        lines.append(coded_block(coded))
    return "\n".join(lines)


# Coded records listed in one prompt at most; the rest are counted.
MAX_CODED_RECORDS = 40


def coded_block(records: list[dict]) -> str:
    """The admission's records coded after discharge, apart from the events:
    their date is a billing date, not when anything happened, and they have no
    id (evidence cites charted events only)."""
    lines = [
        "## Coded after discharge (billing codes with a date only; not events of "
        "the timeline, not actions of the window; no id, not citable as evidence)"
    ]
    for record in records[:MAX_CODED_RECORDS]:
        title = f" {record['title']}" if record.get("title") else ""
        lines.append(
            f"- billed {record['date']}: {record['system']} {record['code']}{title}"
        )
    if len(records) > MAX_CODED_RECORDS:
        lines.append(
            f"({len(records) - MAX_CODED_RECORDS} more coded records left out)"
        )
    return "\n".join(lines)


def _window_block(context) -> str:
    start = context.hours_since_admit
    end = start + (context.end - context.start).total_seconds() / 3600.0
    return (
        "## The window to label\n"
        f"Window {context.window_index}: {_hours(start)} to {_hours(end)} after ICU "
        f"admission ({context.start:%Y-%m-%d %H:%M} to {context.end:%H:%M} UTC). "
        "Times below are hours since ICU admission."
    )


def _summary_block(rows: list[dict], hours: int, dropped: int) -> str:
    head = (
        f"## Trajectory summary ({hours} h rows; means, worst or total values of the "
        "hourly concept tracks)"
    )
    lines = [head]
    if dropped:
        lines.append(f"({dropped} rows far from the window left out for length)")
    lines += [summary_line(r) for r in rows] or ["no concept tracks"]
    return "\n".join(lines)


def _events_block(lines: list[str], dropped: int, context) -> str:
    head = "## Events around the window (id, time, kind, domain, item, value)"
    out = [head]
    if dropped:
        out.append(f"({dropped} events far from the window left out for length)")
    out += lines or ["no events"]
    return "\n".join(out)


def _actions_block(context) -> str:
    ids = [e["id"] for e in context.recorded_actions]
    lines = ["## Recorded actions to rate (critical interventions in the window)"]
    lines += [event_line(e) for e in context.recorded_actions] or ["none"]
    lines.append(f"Event ids to rate: {', '.join(map(str, ids)) if ids else 'none'}")
    return "\n".join(lines)


def prompt_build(
    *,
    context,
    template: PromptTemplate,
    budget: int | None = None,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> Prompt:
    """The chat messages of one window within ``budget`` estimated tokens
    (``template.token_budget`` when not given; a backbone gives the room its
    context window leaves), estimating at ``chars_per_token``.

    Compression, by rule, until the estimate fits: (1) events outside the
    window, farthest from it first; (2) the discharge summary (when there is
    one) cut from DISCHARGE_CHARS to DISCHARGE_MIN_CHARS characters; (3) the
    trajectory summary coarsened from 6 h to 12, 24, then 48 h rows; (4) summary
    rows farthest from the window; (5) observations inside the window, latest
    first. A radiology report is one event line, its text cut at NOTE_CHARS. Recorded actions to rate,
    static context and instructions are never dropped, and a record is either
    shown whole or not at all. Raises PromptBudgetError when nothing is left to
    drop and the prompt still does not fit.
    """
    budget = template.token_budget if budget is None else int(budget)
    cpt = max(0.5, float(chars_per_token or CHARS_PER_TOKEN))

    def tokens_estimate(text: str) -> int:  # noqa: F811 - this prompt's ratio
        return math.ceil(len(text) / cpt)

    def messages_tokens(messages: list[dict]) -> int:  # noqa: F811
        return sum(
            tokens_estimate(m.get("content") or "") + TOKENS_PER_MESSAGE
            for m in messages
        )

    w_start = context.hours_since_admit
    w_end = w_start + (context.end - context.start).total_seconds() / 3600.0
    recorded_ids = {e["id"] for e in context.recorded_actions}

    events = [e for e in context.events if e["id"] not in recorded_ids]
    lines = {e["id"]: event_line(e) for e in events}
    cost = {pk: tokens_estimate(line) + 1 for pk, line in lines.items()}

    def distance(e) -> float:
        h = e["hours"]
        return 0.0 if w_start <= h < w_end else min(abs(h - w_start), abs(h - w_end))

    fixed = [
        _static_block(context),
        _window_block(context),
        _actions_block(context),
    ]
    system = template.system
    instructions = template.instructions
    # Notes about dropped records are at most this long; reserve them up front.
    note_allowance = 40
    base = (
        messages_tokens([{"content": system}, {"content": instructions}])
        + sum(tokens_estimate(block) + 1 for block in fixed)
        + note_allowance
    )

    discharge = context.static.get("discharge_summaries") or []
    discharge_text = discharge_block(discharge)

    def discharge_cost() -> int:
        return tokens_estimate(discharge_text) + 1 if discharge_text else 0

    summary_hours = 6
    summary = list(context.summary)
    summary_dropped = 0

    def summary_cost(rows) -> int:
        return sum(tokens_estimate(summary_line(r)) + 1 for r in rows) + 30

    shown = list(events)
    events_cost = sum(cost[e["id"]] for e in shown) + 20
    compressions: list[str] = []

    def total() -> int:
        return base + summary_cost(summary) + events_cost + discharge_cost()

    if total() > budget:
        far = sorted(
            (e for e in shown if distance(e) > 0), key=lambda e: (-distance(e), e["id"])
        )
        keep = {e["id"] for e in shown}
        dropped = 0
        over = total() - budget
        for e in far:
            if over <= 0:
                break
            keep.discard(e["id"])
            over -= cost[e["id"]]
            events_cost -= cost[e["id"]]
            dropped += 1
        shown = [e for e in shown if e["id"] in keep]
        if dropped:
            compressions.append(f"dropped {dropped} events outside the window")
    if total() > budget and discharge_text:
        discharge_text = discharge_block(discharge, DISCHARGE_MIN_CHARS)
        compressions.append(
            f"discharge summary cut to {DISCHARGE_MIN_CHARS} characters"
        )
    while total() > budget and summary_hours < 48 and len(summary) > 1:
        summary = summary_coarsen(summary, factor=2)
        summary_hours *= 2
        compressions.append(f"summary coarsened to {summary_hours} h rows")
    if total() > budget and summary:
        centre = (w_start + w_end) / 2
        order = sorted(
            range(len(summary)),
            key=lambda i: (
                -abs((summary[i]["from_h"] + summary[i]["to_h"]) / 2 - centre)
            ),
        )
        drop: set[int] = set()
        current = summary_cost(summary)
        for i in order:
            if base + current + events_cost + discharge_cost() <= budget:
                break
            drop.add(i)
            current -= tokens_estimate(summary_line(summary[i])) + 1
        summary = [r for i, r in enumerate(summary) if i not in drop]
        summary_dropped = len(drop)
        compressions.append(f"dropped {len(drop)} summary rows far from the window")
    if total() > budget:
        inside = sorted(
            (e for e in shown if distance(e) == 0 and e["kind"] != "action"),
            key=lambda e: (-e["hours"], -e["id"]),
        )
        keep = {e["id"] for e in shown}
        dropped = 0
        for e in inside:
            if total() <= budget:
                break
            keep.discard(e["id"])
            events_cost -= cost[e["id"]]
            dropped += 1
        shown = [e for e in shown if e["id"] in keep]
        if dropped:
            compressions.append(f"dropped {dropped} observations inside the window")

    events_dropped = len(events) - len(shown)
    user = "\n\n".join(
        [
            fixed[0],
            *([discharge_text] if discharge_text else []),
            _summary_block(summary, summary_hours, summary_dropped),
            fixed[1],
            _events_block([lines[e["id"]] for e in shown], events_dropped, context),
            fixed[2],
            "## Instructions\n" + instructions,
        ]
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    estimated = messages_tokens(messages)
    if estimated > budget:
        error = PromptBudgetError(
            f"The prompt of window {context.window_id} needs about {estimated} tokens "
            f"even compressed; the budget is {budget}. Raise the template's budget "
            "or the backbone's context window, or lower its reply tokens."
        )
        error.estimated = estimated
        raise error
    return Prompt(
        messages=messages,
        event_ids=frozenset({e["id"] for e in shown} | recorded_ids),
        estimated_tokens=estimated,
        compressions=compressions,
    )


__all__ = [
    "DEFAULT_VERSION",
    "Prompt",
    "PromptBudgetError",
    "discharge_block",
    "event_line",
    "messages_chars",
    "messages_tokens",
    "prompt_build",
    "prompt_default_get_or_create",
    "tokens_estimate",
]
