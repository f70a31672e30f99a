"""The interface every agent speaks (RealICU spec section 9), reference agents,
ICU-Evo and researchers' HTTP endpoints alike.

An agent is shown ONE window at a time, in time order within a stay, as a
``WindowContext`` the runner (agents.runner) builds: the stay's bedside events
strictly before the window's end (windows.selectors_context.bedside_filter: no
outcome-revealing events, no records coded after discharge), the stay's static
facts as a release holds them, and the earlier windows of the stay. It returns a
prediction in the release prediction schema (a prediction file's line without its
ids, exports.scoring: ``status``, one of evaluation.labelschema.STATUS_VALUES,
and ``acute_problems`` and ``recommended_actions``, ranked lists of short
strings; label-shaped lists of ``{"text": ...}`` items and ``added_actions`` are
read too, agents.prompts.prediction_normalise; the runner adds ``window_id``
and ``stay_id``) and its new per-stay
memory, a JSON-serialisable dict the runner stores after every window
(agents.models.AgentStayState) and hands back with the next window of the
stay, so a run resumes per stay and the memory can be looked at.

Agents that need a language model get a ``ChatClient`` (agents.llm) when they
are built: one chat completion per call, within the backbone's timeouts,
retries and rate limits, its tokens counted on the client (the runner reads the
counters around each ``predict``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class PastWindow:
    """An earlier window of the same stay: ``[start, end)``."""

    window_id: int
    index: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class WindowContext:
    """What an agent may see at one window: nothing at or after ``end``.

    ``events`` are event dicts in time order (then id), each with ``event_id``,
    ``time`` (ISO 8601), ``hours_since_admit``, ``kind``, ``domain``,
    ``category``, ``name``, ``concept`` (the vocabulary's label), ``value_num``,
    ``unit`` and ``value_text``; every one of them is strictly before ``end``.
    ``static`` holds the stay's facts known at ICU admission (age, sex, care
    unit, admission type, disease group). ``past_windows`` are the stay's
    earlier windows in time order; an agent reads one window's events with
    ``past_events``, which only ever returns events of ``events`` (so a past
    window's context is its own, and never reaches past this window's end).
    """

    stay_id: int
    window_id: int
    window_index: int
    start: datetime
    end: datetime
    hours_since_admission: float
    events: tuple[dict, ...]
    static: Mapping[str, Any]
    past_windows: tuple[PastWindow, ...] = ()
    # The events' times as datetimes, parallel to ``events`` (for bisection).
    event_times: tuple[datetime, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.event_times) != len(self.events):
            raise ValueError("event_times must run parallel to events.")
        if self.event_times and self.event_times[-1] >= self.end:
            raise ValueError("A window's context holds no event at or after its end.")
        # Spec section 1: the window's own recorded actions are the answer of the
        # Recommended Actions task, so they are never in its context.
        lo = bisect.bisect_left(self.event_times, self.start)
        if any(e.get("kind") == "action" for e in self.events[lo:]):
            raise ValueError(
                "A window's context holds none of the window's own recorded actions."
            )

    def _slice(self, start: datetime | None, end: datetime) -> list[dict]:
        lo = 0 if start is None else bisect.bisect_left(self.event_times, start)
        hi = bisect.bisect_left(self.event_times, min(end, self.end))
        return list(self.events[lo:hi])

    def window_events(self) -> list[dict]:
        """This window's own events, ``start <= time < end``."""
        return self._slice(self.start, self.end)

    def events_before(self, when: datetime) -> list[dict]:
        """Events before ``when`` (and, as always, before this window's end)."""
        return self._slice(None, when)

    def past_events(self, window_id: int, *, whole_context: bool = False) -> list[dict]:
        """The events of the earlier window ``window_id``: its own ``[start, end)``,
        or with ``whole_context`` everything before its end. KeyError when it is
        not an earlier window of this stay."""
        for past in self.past_windows:
            if past.window_id == window_id:
                return self._slice(None if whole_context else past.start, past.end)
        raise KeyError(f"Window {window_id} is not an earlier window of this stay.")

    def payload(self) -> dict:
        """The context as JSON (what an online endpoint receives)."""
        return {
            "stay_id": self.stay_id,
            "window_id": self.window_id,
            "window_index": self.window_index,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "hours_since_admission": self.hours_since_admission,
            "static": dict(self.static),
            "past_windows": [
                {
                    "window_id": p.window_id,
                    "index": p.index,
                    "start": p.start.isoformat(),
                    "end": p.end.isoformat(),
                }
                for p in self.past_windows
            ],
            "events": list(self.events),
        }


@dataclass
class ChatReply:
    """One chat completion: its text and the tokens the server counted (or
    estimated when it did not say)."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0


class ChatClient(Protocol):
    """A language model behind a configured backbone (agents.llm.ChatClient).

    ``chat`` sends ``messages`` (OpenAI chat messages) and returns the reply;
    with ``json_reply`` the backbone is asked for a JSON object where it can
    be. It raises ``AgentError`` when the request finally fails. ``purpose``
    names the step for the record (``"predict"``, ``"assessment"``, ...).
    ``tokens_in``/``tokens_out``/``requests`` are running totals over the
    client's life; ``prompt_budget`` is the prompt's budget in tokens (None
    when unknown) and ``estimate_tokens(text)`` the client's estimate.
    """

    model: str
    prompt_budget: int | None
    tokens_in: int
    tokens_out: int
    requests: int

    def chat(
        self, messages: list[dict], *, json_reply: bool = True, purpose: str = ""
    ) -> ChatReply: ...

    def estimate_tokens(self, text: str) -> int: ...


class AgentError(Exception):
    """A window the agent could not predict; the message is recorded as that
    window's error (the run goes on with the next window), ``detail`` beside
    it for admins only (what an online endpoint's connection met, which the
    researcher is not told)."""

    def __init__(self, message: str = "", *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class Agent:
    """Base class of agents. Subclasses set ``name`` (the registry's key),
    ``prompt_version`` and ``description``, and implement ``predict``.

    ``predict(ctx, memory)`` returns ``(prediction, new_memory)``: the
    prediction is a dict with ``status``, ``acute_problems`` and
    ``recommended_actions`` (see the module's docstring; the runner normalises
    and checks it, a missing list is empty), ``new_memory`` the stay's memory
    after this window
    (``memory`` is ``{}`` at a stay's first window). Raise ``AgentError`` for
    a window that cannot be predicted.
    """

    name: str = ""
    prompt_version: str = ""
    description: str = ""
    # Whether the agent calls a language model (needs a backbone).
    uses_llm: bool = True

    def __init__(self, llm: ChatClient | None = None, **options: Any) -> None:
        self.llm = llm
        self.options = options

    def predict(self, ctx: WindowContext, memory: dict) -> tuple[dict, dict]:
        raise NotImplementedError


__all__ = [
    "Agent",
    "AgentError",
    "ChatClient",
    "ChatReply",
    "PastWindow",
    "WindowContext",
]
