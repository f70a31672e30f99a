"""The reference agents of RealICU spec section 9, and the registry of agents
by name.

All three here share one prompt (agents.prompts, ``PROMPT_VERSION``) and differ
only in the context they give it:

``local-window``
    The window's own events, ``start <= time < end``; nothing earlier.

``full-context``
    Every bedside event of the stay up to the window's end, compressed to the
    backbone's prompt budget (agents.llm: the context window less the reply's
    tokens and a margin) by these rules, applied in order until it fits:

    1. everything raw, when it fits;
    2. events before the window's start aggregated by concept over blocks of
       ``AGGREGATE_HOURS`` hours (count, and for numbers min/max/last with the
       unit; for text the last value); the window's own events stay raw.
       The agent keeps a stay's aggregates from window to window and folds
       in only the earlier events that are new (``_BlockFold``: a session of
       the stay, begun again whenever a context does not continue it), so a
       stay's events are aggregated once, not once per window; and rule 1 is
       not tried when the earlier events alone surely take twice the budget;
    3. the oldest aggregated blocks dropped, a marker line saying how many
       blocks and hours were left out (the fewest that make it fit);
    4. the window's own earliest events dropped, with a marker, keeping its
       latest ones.

``rag``
    The window's own events plus the top ``RAG_K`` (5) earlier windows of the
    stay by cosine similarity of their event text's embedding to the current
    window's, with the project's embedding model (evaluation.matcher,
    ``REALICU_MATCHER_MODEL``). Each earlier window is embedded once per
    process (kept by window id); it is shown with its own events only. Over
    the budget, the least similar retrieved windows are dropped first, then
    the window's own earliest events (rule 4 below).

Every agent keeps its prompt within the backbone's budget, counted by the
server's tokenizer where it has one and else estimated at the backbone's
calibrated characters per token (agents.llm.prompt_fits), with
``REPAIR_RESERVE`` tokens to spare for a repair turn; what does not fit is
left out by the agent's rule, with a marker, so no prompt goes over (the
client refuses to send one that would). Replies are constrained by the
prediction's schema in the server's dialect and get one repair turn
(agents.prompts.predict_validated). ``local-window`` cuts its window's
earliest events (rule 4) when they alone do not fit.

``icu-evo`` lives in agents.icu_evo and is imported when asked for; when that
module is missing the agent is listed as unavailable.
"""

from __future__ import annotations

import bisect
import importlib
from collections import OrderedDict

import numpy as np

from agents.base import Agent, AgentError, WindowContext
from agents.llm import prompt_fits
from agents.prompts import (
    NOTE_AGGREGATE_CHARS,
    PROMPT_VERSION,
    REPAIR_RESERVE,
    event_line,
    events_text,
    note_text,
    predict_validated,
    predictor_messages,
)

AGGREGATE_HOURS = 6
RAG_K = 5


class PredictorAgent(Agent):
    """An agent that fills the shared predictor prompt with ``sections``."""

    prompt_version = PROMPT_VERSION

    def sections(self, ctx: WindowContext, memory: dict) -> list[tuple[str, str]]:
        raise NotImplementedError

    def messages(self, ctx: WindowContext, memory: dict) -> list[dict]:
        return predictor_messages(ctx, self.sections(ctx, memory))

    def predict(self, ctx: WindowContext, memory: dict) -> tuple[dict, dict]:
        if self.llm is None:
            raise AgentError(f"The {self.name} agent needs a backbone.")
        return predict_validated(self.llm, self.messages(ctx, memory)), memory

    def _fits(self, ctx, sections) -> bool:
        if self.llm is None:
            return True
        budget = self.options.get("prompt_budget")
        messages = predictor_messages(ctx, sections)
        if budget:
            text = "".join(m["content"] for m in messages)
            return self.llm.estimate_tokens(text) + 16 <= int(budget)
        return prompt_fits(self.llm, messages, reserve=REPAIR_RESERVE)

    def _window_cut(self, ctx, sections: list, window: list[dict]) -> list:
        """Rule 4: ``sections`` with the window's earliest events left out,
        a marker saying how many, until the prompt fits (the last section
        holds the window's events)."""
        lines = [event_line(e) for e in window]
        cut = 0
        while cut < len(lines):
            cut = max(cut + 1, cut * 2)
            shown = [f"[... {cut} earlier event(s) of this window left out]"]
            shown += lines[cut:]
            sections[-1] = ("Events of this window", "\n".join(shown))
            if self._fits(ctx, sections):
                return sections
        return sections


class LocalWindowAgent(PredictorAgent):
    name = "local-window"
    description = "The current window's events only."

    def sections(self, ctx, memory):
        window = ctx.window_events()
        sections = [("Events of this window", events_text(window))]
        if self._fits(ctx, sections):
            return sections
        return self._window_cut(ctx, sections, window)


class _BlockFold:
    """A stay's events aggregated by concept and block of AGGREGATE_HOURS
    hours since ICU admission, folded in as they come: the full-context
    agent's session of a stay. Each window adds only the earlier events it
    has that the previous one had not (a stay's bedside events in time order,
    so a later window's earlier events continue the previous ones), so a
    stay costs its events once, not once per window. Per block and concept:
    the count, and for numbers min/max/last with the unit; for text the last
    value. A block's lines are rendered once it is closed (an event of a
    later block came)."""

    def __init__(self, stay_id: int | None = None) -> None:
        self.stay_id = stay_id
        self.count = 0  # events folded: a prefix of the stay's events
        self.last_id = None  # the event_id of the last one folded
        self._blocks: dict[int, OrderedDict] = {}
        self._lines: dict[int, list[str]] = {}  # closed blocks, rendered

    def continues(self, ctx: WindowContext, upto: int) -> bool:
        """Whether ``ctx.events[:upto]`` continues what was folded."""
        if ctx.stay_id != self.stay_id or upto < self.count:
            return False
        return not self.count or ctx.events[self.count - 1]["event_id"] == self.last_id

    def add(self, events) -> None:
        for event in events:
            hours = event.get("hours_since_admit") or 0.0
            block = int(hours // AGGREGATE_HOURS) if hours >= 0 else -1
            concept = event.get("concept") or event.get("name") or "?"
            key = (event.get("kind", ""), concept)
            rows = self._blocks.setdefault(block, OrderedDict())
            row = rows.get(key)
            if row is None:
                row = rows[key] = {"n": 0, "num": None, "unit": "", "last": ""}
            row["n"] += 1
            num = event.get("value_num")
            if num is not None:
                if row["num"] is None:
                    row["num"] = [num, num, num]
                else:
                    low, high, _ = row["num"]
                    row["num"] = [min(low, num), max(high, num), num]
                row["unit"] = event.get("unit") or row["unit"]
            elif event.get("domain") == "notes":
                # A report's findings, cut with a marker (agents.prompts).
                row["last"] = note_text(event, NOTE_AGGREGATE_CHARS)
            elif event.get("value_text"):
                row["last"] = str(event["value_text"])[:60]
            self.count += 1
            self.last_id = event.get("event_id")

    def _render(self, block: int) -> list[str]:
        lo, hi = block * AGGREGATE_HOURS, (block + 1) * AGGREGATE_HOURS
        out = []
        for (kind, concept), row in self._blocks[block].items():
            if row["num"] is not None:
                low, high, last = row["num"]
                unit = f" {row['unit']}" if row["unit"] else ""
                detail = f"n={row['n']} min={low:g} max={high:g} last={last:g}{unit}"
            else:
                detail = f"n={row['n']}" + (
                    f" last={row['last']}" if row["last"] else ""
                )
            out.append(f"[{lo}-{hi}h] {kind} {concept}: {detail}")
        return out

    def lines(self) -> list[tuple[int, list[str]]]:
        """(block, its lines) in time order."""
        blocks = sorted(self._blocks)
        out = []
        for n, block in enumerate(blocks):
            if n < len(blocks) - 1:
                if block not in self._lines:
                    self._lines[block] = self._render(block)
                out.append((block, self._lines[block]))
            else:
                out.append((block, self._render(block)))
        return out


# An event's prompt line is at least this long ("[h] kind concept: value"):
# rule 1 is not tried when its earlier events alone are surely twice the
# budget, so a long stay's raw history is not written out at every window.
MIN_LINE_CHARS = 12


class FullContextAgent(PredictorAgent):
    name = "full-context"
    description = (
        "Every bedside event up to the window's end, older events aggregated and "
        "then truncated to the backbone's budget."
    )

    def __init__(self, llm=None, **options):
        super().__init__(llm, **options)
        # The stay's aggregated earlier events so far (one stay at a time, as
        # the runner gives them); a new one when a context does not continue
        # it (another stay, a resume in a new worker).
        self._fold = _BlockFold()

    def _surely_over(self, n_events: int) -> bool:
        budget = self.options.get("prompt_budget") or getattr(
            self.llm, "prompt_budget", None
        )
        if not budget:
            return False
        line = self.llm.estimate_tokens(" " * MIN_LINE_CHARS)
        return line * n_events > 2 * int(budget)

    def earlier_blocks(self, ctx) -> list[tuple[int, list[str]]]:
        """The aggregated lines of the events before the window's start, by
        block, from the stay's fold with only the new events added."""
        upto = bisect.bisect_left(ctx.event_times, ctx.start)
        if not self._fold.continues(ctx, upto):
            self._fold = _BlockFold(ctx.stay_id)
        self._fold.add(ctx.events[self._fold.count : upto])
        return self._fold.lines()

    @staticmethod
    def compressed(blocks, dropped: int, window_text: str) -> list:
        """Rules 2 and 3: the aggregated ``blocks`` but the ``dropped``
        oldest, with a marker, then the window's own events raw."""
        lines = [line for _, shown in blocks[dropped:] for line in shown]
        if dropped:
            lines.insert(
                0,
                f"[... {dropped} earlier block(s) of {AGGREGATE_HOURS} h left "
                "out to fit the budget]",
            )
        return [
            (
                f"Events before this window, by concept per {AGGREGATE_HOURS} h",
                "\n".join(lines) or "(left out)",
            ),
            ("Events of this window", window_text),
        ]

    def sections(self, ctx, memory):
        upto = bisect.bisect_left(ctx.event_times, ctx.start)
        window = ctx.window_events()
        window_text = events_text(window)
        # 1. Everything raw.
        if self.llm is None or not self._surely_over(upto):
            earlier = ctx.events_before(ctx.start)
            raw = [
                ("Events before this window", events_text(earlier)),
                ("Events of this window", window_text),
            ]
            if not earlier:
                raw = raw[1:]
            if self.llm is None or self._fits(ctx, raw):
                return raw
        # 2. Earlier events aggregated by concept and block.
        blocks = self.earlier_blocks(ctx)

        def build(dropped: int) -> list:
            return self.compressed(blocks, dropped, window_text)

        # 3. The oldest blocks dropped: the fewest that fit (a prompt only
        # shrinks as more go), found by halving.
        sections = build(len(blocks))
        if not self._fits(ctx, sections):
            # 4. The window's earliest events dropped.
            return self._window_cut(ctx, sections, window)
        low, high = 0, len(blocks)
        while low < high:
            middle = (low + high) // 2
            if self._fits(ctx, build(middle)):
                high = middle
            else:
                low = middle + 1
        return build(low)


def _cosine_top(query: np.ndarray, rows: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` rows most similar to ``query`` by cosine, best
    first (ties: earlier row first)."""
    if len(rows) == 0:
        return []
    q = query / (np.linalg.norm(query) or 1.0)
    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    sims = (rows / norms[:, None]) @ q
    order = sorted(range(len(rows)), key=lambda i: (-float(sims[i]), i))
    return order[:k]


class RagAgent(PredictorAgent):
    name = "rag"
    description = (
        f"The current window plus the top-{RAG_K} earlier windows of the stay by "
        "embedding similarity."
    )

    def __init__(self, llm=None, **options):
        super().__init__(llm, **options)
        self._vectors: dict[int, np.ndarray] = {}
        # The embedding function: texts -> rows (tests may give one).
        self._embed = options.get("embed")

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._embed is None:
            from evaluation.matcher import (
                MatcherUnavailable,
                configured_model_name,
                load_model,
            )

            try:
                model = load_model(configured_model_name())
            except MatcherUnavailable as error:
                raise AgentError(
                    f"The embedding model is unavailable: {error}"
                ) from None

            def encode(batch):
                return np.asarray(model.encode(list(batch)), dtype=np.float32)

            self._embed = encode
        return np.asarray(self._embed(texts), dtype=np.float32)

    def retrieve(self, ctx: WindowContext) -> list[tuple[int, float]]:
        """(window_id, cosine) of the top RAG_K earlier windows, best first."""
        past = [p for p in ctx.past_windows]
        if not past:
            return []
        missing = [p for p in past if p.window_id not in self._vectors]
        if missing:
            texts = [events_text(ctx.past_events(p.window_id)) for p in missing]
            for p, row in zip(missing, self.embed(texts)):
                self._vectors[p.window_id] = row
        query = self.embed([events_text(ctx.window_events())])[0]
        rows = np.stack([self._vectors[p.window_id] for p in past])
        top = _cosine_top(query, rows, RAG_K)
        qn = np.linalg.norm(query) or 1.0
        out = []
        for i in top:
            rn = np.linalg.norm(rows[i]) or 1.0
            out.append((past[i].window_id, float(rows[i] @ query / (qn * rn))))
        return out

    def sections(self, ctx, memory):
        by_id = {p.window_id: p for p in ctx.past_windows}
        window = ctx.window_events()

        def build(shown):
            sections = []
            # Shown in time order, each with its similarity.
            for window_id, sim in sorted(shown, key=lambda r: by_id[r[0]].index):
                past = by_id[window_id]
                sections.append(
                    (
                        f"Similar earlier window {past.index} (similarity {sim:.2f})",
                        events_text(ctx.past_events(window_id)),
                    )
                )
            sections.append(("Events of this window", events_text(window)))
            return sections

        shown = self.retrieve(ctx)  # best first
        sections = build(shown)
        # Over the budget: the least similar windows go first, then rule 4.
        while shown and not self._fits(ctx, sections):
            shown = shown[:-1]
            sections = build(shown)
        if self._fits(ctx, sections):
            return sections
        return self._window_cut(ctx, sections, window)


REFERENCE_AGENTS: dict[str, type[Agent]] = {
    cls.name: cls for cls in (FullContextAgent, LocalWindowAgent, RagAgent)
}
AGENT_NAMES = ("full-context", "local-window", "rag", "icu-evo")


def icu_evo_class() -> type[Agent] | None:
    """agents.icu_evo.IcuEvoAgent, or None when that module is missing."""
    try:
        module = importlib.import_module("agents.icu_evo")
    except ImportError:
        return None
    return getattr(module, "IcuEvoAgent", None)


def agent_class(name: str) -> type[Agent]:
    """The agent class registered as ``name``; ValueError naming the choices or
    saying the agent is unavailable."""
    if name == "icu-evo":
        cls = icu_evo_class()
        if cls is None:
            raise ValueError("The icu-evo agent is unavailable (agents.icu_evo).")
        return cls
    try:
        return REFERENCE_AGENTS[name]
    except KeyError:
        raise ValueError(
            f"Unknown agent {name!r}; choose one of {', '.join(AGENT_NAMES)}."
        ) from None


def agents_available() -> list[dict]:
    """The reference agents for a page: name, description, prompt version and
    whether it can be run."""
    out = []
    for name in AGENT_NAMES:
        try:
            cls = agent_class(name)
        except ValueError as error:
            out.append(
                {
                    "name": name,
                    "available": False,
                    "description": str(error),
                    "prompt_version": "",
                }
            )
            continue
        out.append(
            {
                "name": name,
                "available": True,
                "description": cls.description,
                "prompt_version": cls.prompt_version,
            }
        )
    return out
