"""ICU-Evo, the structured-memory reference agent (RealICU spec section 9; the
paper's section 4).

At every window of a stay, in time order, the agent updates its memory of the
stay and then predicts with the shared predictor prompt (agents.prompts) over
that memory instead of raw events. The memory is the JSON dict ``predict``
returns: the runner stores it per stay after each window and hands it back
with the next, and the run page shows it (templates/agents/_icu_evo_memory.html).

Memory components (the paper's five; agents.icu_evo.memory for the rules):

``working``
    Working memory: the latest 30 raw events of the last 4 hours before the
    window's end.
``trends``
    Trend memory: PAA of the vitals, GCS, FiO2 and key labs of
    ``memory.TREND_SERIES`` over the last 24 hours, 8 segments of 3 hours.
``critical_log``
    Critical-event memory, append-only: rule-based entries (thresholds cited
    from CLINICAL_CONCEPTS.md) for every event since the previous window the
    agent saw, so windows of a sparse release miss nothing in between; and the
    events the assessment step names. No entry is ever changed or removed.
``summaries``
    Trajectory memory: the assessment step's summaries, newest last.
``hypotheses``
    Insight memory: patient-specific hypotheses with supporting and
    counter-evidence, each accepted (support outnumbers counter-evidence) or
    rejected, from the latest valid insight reply.

Cadence: the assessment and insight steps (LLM calls with their own versioned
prompts, agents.icu_evo.prompts) run every ``UPDATE_WINDOWS`` (12) windows,
6 hours of the stay: at the first window the agent sees in each new block of
12 windows of the stay's 30-minute grid (``window_index // 12``), from the
second block on, so at windows 12, 24, 36, ... when every window is predicted,
and at the first window past each 6-hour mark in a sparse (Gold) release. A
reply that does not parse, has the wrong shape or cites an event the agent was
not given leaves the previous summary or hypotheses in place and is recorded
in ``errors``; so is a step whose request fails. The predictor's own failure
raises AgentError (the runner records the window and keeps the previous
memory, so the update is tried again at the next window).

Leak-proof: the agent reads nothing but the WindowContext (its events are all
before the window's end) and the memory it returned for earlier windows of the
same stay; no database query.

Bounds (the stored JSON stays small whatever the stay's length): working 30
events, trends 18 series x 8 numbers, critical log 200 entries (then only
counted in ``critical_not_logged``), 8 summaries of at most 1,200 characters,
5 hypotheses of at most 5 evidence items each, the last 10 errors and the
last 20 updates. The predictor prompt shows the latest summary, the
hypotheses, the last 30 critical entries, the trends and the working memory;
over the backbone's prompt budget, the working memory and then the critical
entries shown are halved until it fits; the assessment and insight prompts'
raw lines (events, critical entries) likewise.
"""

from __future__ import annotations

import bisect
import copy
from datetime import datetime

from agents.base import Agent, AgentError, WindowContext
from agents.icu_evo import memory as mem
from agents.icu_evo.prompts import (
    ASSESSMENT_SYSTEM,
    ASSESSMENT_VERSION,
    INSIGHT_SYSTEM,
    INSIGHT_VERSION,
    ReplyInvalid,
    assessment_parse,
    insight_parse,
)
from agents.llm import prompt_fits
from agents.prompts import (
    PROMPT_VERSION,
    REPAIR_RESERVE,
    header_text,
    predict_validated,
    predictor_messages,
)

UPDATE_WINDOWS = 12
MEMORY_VERSION = 1
SUMMARIES_KEPT = 8
ERRORS_KEPT = 10
UPDATES_KEPT = 20
CRITICAL_SHOWN = 30
# Raw events since the previous update shown to the assessment step (latest).
ASSESSMENT_EVENTS = 60


def _fresh() -> dict:
    return {
        "version": MEMORY_VERSION,
        "window_index": None,
        "scanned_until": None,
        "actions_held_from": None,
        "working": [],
        "trends": {},
        "critical_log": [],
        "critical_not_logged": 0,
        "summaries": [],
        "hypotheses": [],
        "hypotheses_window_index": None,
        "last_update_block": 0,
        "assessed_until": None,
        "assessed_until_h": None,
        "updates": [],
        "errors": [],
    }


# --- memory as prompt text ---------------------------------------------------------


def _hours(value) -> str:
    return f"{value:.1f}h" if isinstance(value, int | float) else "?h"


def working_text(entries: list[dict]) -> str:
    return "\n".join(f"#{e['id']} {e['line']}" for e in entries) or "(no events)"


def critical_text(log: list[dict], last: int = CRITICAL_SHOWN) -> str:
    shown = log[-last:] if last else []
    lines = []
    if len(log) > len(shown):
        lines.append(f"[{len(log) - len(shown)} earlier entries not shown]")
    for entry in shown:
        why = entry.get("label") or entry.get("note") or ""
        lines.append(f"#{entry['event_id']} ({why}) {entry.get('line', '')}".rstrip())
    return "\n".join(lines) or "(none)"


def trends_text(trends: dict) -> str:
    series = trends.get("series") or {}
    if not series:
        return "(no vitals or labs in the last 24 h)"
    head = (
        f"Means per {trends['segment_hours']:g} h from {_hours(trends['from_h'])} to "
        f"{_hours(trends['to_h'])}, oldest first ('-' none measured):"
    )
    lines = [head]
    for row in series.values():
        numbers = " ".join("-" if v is None else f"{v:g}" for v in row["segments"])
        unit = f" {row['unit']}" if row.get("unit") else ""
        lines.append(
            f"{row['label']}{unit}: {numbers} (last {row['last']:g} at "
            f"{_hours(row.get('last_h'))})"
        )
    return "\n".join(lines)


def summary_text(memory: dict) -> str:
    summaries = memory.get("summaries") or []
    if not summaries:
        return "(no summary yet)"
    latest = summaries[-1]
    return f"(written at {_hours(latest.get('h'))}) {latest['text']}"


def hypotheses_text(memory: dict) -> str:
    hypotheses = memory.get("hypotheses") or []
    if not hypotheses:
        return "(none yet)"
    lines = []
    for n, h in enumerate(hypotheses, start=1):
        lines.append(f"{n}. [{h['status']}] {h['statement']}")
        for label, key in (("for", "supporting"), ("against", "counter")):
            for item in h.get(key) or []:
                cited = f" (#{item['event_id']})" if item.get("event_id") else ""
                lines.append(f"   {label}: {item['text']}{cited}")
    return "\n".join(lines)


class IcuEvoAgent(Agent):
    name = "icu-evo"
    prompt_version = f"{PROMPT_VERSION}+{ASSESSMENT_VERSION}+{INSIGHT_VERSION}"
    description = (
        "Structured memory: recent raw events, PAA trends, an append-only "
        "critical-event log, a trajectory summary and patient hypotheses revised "
        "every 12 windows (6 h)."
    )

    # --- the steps -----------------------------------------------------------------

    def _ask(self, system: str, user: str, purpose: str) -> str:
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        return self.llm.chat(messages, purpose=purpose).text

    def _record(self, memory: dict, ctx: WindowContext, step: str, error) -> None:
        ok = error is None
        memory["updates"] = [
            *memory["updates"],
            {
                "window_index": ctx.window_index,
                "h": round(ctx.hours_since_admission, 2),
                "step": step,
                "ok": ok,
            },
        ][-UPDATES_KEPT:]
        if not ok:
            memory["errors"] = [
                *memory["errors"],
                {
                    "window_index": ctx.window_index,
                    "step": step,
                    "message": str(error)[:300],
                },
            ][-ERRORS_KEPT:]

    def _fit(self, system: str, build, n: int) -> str:
        """``build(n)``, ``n`` (the raw lines shown) halved until the prompt
        fits the backbone's budget (agents.llm.prompt_fits: the server's count
        where it has a tokenizer), or 0."""
        budget = getattr(self.llm, "prompt_budget", None)
        while True:
            user = build(n)
            if not budget or n == 0:
                return user
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ]
            if prompt_fits(self.llm, messages):
                return user
            n //= 2

    def _assessment(self, ctx: WindowContext, memory: dict, since, known) -> None:
        times = list(ctx.event_times)
        lo = bisect.bisect_left(times, since) if since else 0
        recent = [mem.compact(e) for e in ctx.events[lo:]][-ASSESSMENT_EVENTS:]
        since_h = memory.get("assessed_until_h")
        new_critical = [
            e
            for e in memory["critical_log"]
            if since_h is None or (e.get("h") or 0) >= since_h
        ]

        def build(n: int) -> str:
            return "\n\n".join(
                [
                    header_text(ctx),
                    f"## Previous trajectory summary\n{summary_text(memory)}",
                    f"## Events since the previous assessment (latest {n} at most)\n"
                    + working_text(recent[-n:] if n else []),
                    f"## Trends (PAA)\n{trends_text(memory['trends'])}",
                    "## Critical events since then\n"
                    + critical_text(new_critical, min(n, CRITICAL_SHOWN)),
                    "Reply with the JSON object.",
                ]
            )

        user = self._fit(ASSESSMENT_SYSTEM, build, ASSESSMENT_EVENTS)
        try:
            text = self._ask(ASSESSMENT_SYSTEM, user, "assessment")
            summary, critical = assessment_parse(text, known_ids=set(known))
        except (ReplyInvalid, AgentError) as error:
            self._record(memory, ctx, "assessment", error)
            return
        memory["summaries"] = [
            *memory["summaries"],
            {
                "window_index": ctx.window_index,
                "h": round(ctx.hours_since_admission, 2),
                "text": summary,
            },
        ][-SUMMARIES_KEPT:]
        logged = {e.get("event_id") for e in memory["critical_log"]}
        log = list(memory["critical_log"])
        for item in critical:
            if item["event_id"] in logged:
                continue
            if len(log) >= mem.CRITICAL_LOG_CAP:
                memory["critical_not_logged"] += 1
                continue
            event = known[item["event_id"]]
            log.append(
                {
                    "event_id": item["event_id"],
                    "h": event.get("hours_since_admit"),
                    "rule": "assessment",
                    "label": "",
                    "note": item["note"],
                    "line": mem.event_line(event),
                    "window_index": ctx.window_index,
                    "source": "assessment",
                }
            )
            logged.add(item["event_id"])
        memory["critical_log"] = log
        self._record(memory, ctx, "assessment", None)

    def _insight(self, ctx: WindowContext, memory: dict, known) -> None:
        previous = memory["hypotheses"]

        def build(n: int) -> str:
            return "\n\n".join(
                [
                    header_text(ctx),
                    f"## Trajectory summary\n{summary_text(memory)}",
                    "## Current hypotheses\n"
                    + (hypotheses_text(memory) if previous else "(none yet)"),
                    "## Critical events\n"
                    + critical_text(memory["critical_log"], min(n, CRITICAL_SHOWN)),
                    f"## Trends (PAA)\n{trends_text(memory['trends'])}",
                    "## Recent events\n"
                    + working_text(memory["working"][-n:] if n else []),
                    "Reply with the JSON object.",
                ]
            )

        user = self._fit(INSIGHT_SYSTEM, build, CRITICAL_SHOWN)
        try:
            text = self._ask(INSIGHT_SYSTEM, user, "insight")
            hypotheses = insight_parse(text, known_ids=set(known))
        except (ReplyInvalid, AgentError) as error:
            self._record(memory, ctx, "insight", error)
            return
        memory["hypotheses"] = hypotheses
        memory["hypotheses_window_index"] = ctx.window_index
        self._record(memory, ctx, "insight", None)

    # --- the prediction ---------------------------------------------------------------

    def sections(self, memory: dict, *, working: int, critical: int) -> list:
        return [
            ("Trajectory summary", summary_text(memory)),
            ("Patient-specific hypotheses", hypotheses_text(memory)),
            (
                "Critical events (append-only log)",
                critical_text(memory["critical_log"], critical),
            ),
            ("Trends (PAA, vitals and labs)", trends_text(memory["trends"])),
            (
                "Working memory (recent events)",
                working_text(memory["working"][-working:] if working else []),
            ),
        ]

    def messages(self, ctx: WindowContext, memory: dict) -> list[dict]:
        working, critical = len(memory["working"]), CRITICAL_SHOWN
        budget = getattr(self.llm, "prompt_budget", None)
        while True:
            messages = predictor_messages(
                ctx, self.sections(memory, working=working, critical=critical)
            )
            if not budget or (working == 0 and critical == 0):
                return messages
            if prompt_fits(self.llm, messages, reserve=REPAIR_RESERVE):
                return messages
            if working:
                working //= 2
            else:
                critical //= 2

    def update(self, ctx: WindowContext, memory: dict) -> dict:
        """The stay's memory after window ``ctx`` (the steps included)."""
        memory = copy.deepcopy(memory) if memory else _fresh()
        for key, value in _fresh().items():
            memory.setdefault(key, value)
        events, times = list(ctx.events), list(ctx.event_times)
        since = memory["scanned_until"]
        since = datetime.fromisoformat(since) if since else None
        lo = bisect.bisect_left(times, since) if since else 0
        new_events = events[lo:]
        # The previous window's own recorded actions were not in its context (the
        # answer of Recommended Actions, spec section 1): they are new now.
        held = memory["actions_held_from"]
        if held:
            held_lo = bisect.bisect_left(times, datetime.fromisoformat(held))
            new_events = [
                e for e in events[held_lo:lo] if e.get("kind") == "action"
            ] + new_events
        memory["critical_log"], memory["critical_not_logged"] = mem.critical_append(
            memory["critical_log"],
            new_events,
            window_index=ctx.window_index,
            not_logged=memory["critical_not_logged"],
        )
        memory["working"] = mem.working_memory(events, times, ctx.end)
        length_h = (ctx.end - ctx.start).total_seconds() / 3600.0
        memory["trends"] = mem.trend_memory(
            events, times, ctx.end, ctx.hours_since_admission + length_h
        )
        block = ctx.window_index // UPDATE_WINDOWS
        if block >= 1 and block > memory["last_update_block"]:
            known = {e["event_id"]: e for e in events if e.get("event_id") is not None}
            assessed = memory.get("assessed_until")
            self._assessment(
                ctx,
                memory,
                datetime.fromisoformat(assessed) if assessed else None,
                known,
            )
            self._insight(ctx, memory, known)
            memory["last_update_block"] = block
            memory["assessed_until"] = ctx.end.isoformat()
            memory["assessed_until_h"] = round(ctx.hours_since_admission + length_h, 4)
        memory["window_index"] = ctx.window_index
        memory["scanned_until"] = ctx.end.isoformat()
        memory["actions_held_from"] = ctx.start.isoformat()
        return memory

    def predict(self, ctx: WindowContext, memory: dict) -> tuple[dict, dict]:
        if self.llm is None:
            raise AgentError("The icu-evo agent needs a backbone.")
        memory = self.update(ctx, memory)
        return predict_validated(self.llm, self.messages(ctx, memory)), memory


__all__ = ["IcuEvoAgent", "UPDATE_WINDOWS"]
