"""The one interface every Oracle backbone speaks: given the hindsight context
of a batch of windows, return one result per window (a validated label or the
reason it failed). Runs (oracle.services) only ever talk to this interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class WindowContext:
    """Everything a labeller may see for one window (spec 7: the whole stay,
    and where the window sits in it). Built by ``oracle.context``.

    ``events`` are the events the prompt shows in full (ids are what evidence
    may cite), ``recorded_actions`` the window's critical actions to rate,
    ``tracks`` the stay's concept tracks (a pandas DataFrame indexed by time),
    ``summary`` the compact per-6-h trajectory rows, ``static`` the stay's
    static facts (age, sex, admission diagnosis, disease group, ...).
    """

    window_id: int
    stay_id: int
    window_index: int
    start: object  # datetime
    end: object  # datetime
    hours_since_admit: float
    static: dict
    summary: list[dict]
    events: list[dict]
    recorded_actions: list[dict]
    tracks: object = None  # pandas.DataFrame | None
    allowed_event_ids: frozenset[int] = field(default_factory=frozenset)


@dataclass
class BackboneResult:
    """The outcome of labelling one window. ``ok`` results carry ``status`` and
    ``payload`` in the physicians' label shape (see oracle.models.OracleLabel);
    failed ones carry ``error`` and whatever raw text came back."""

    window_id: int
    ok: bool
    status: str = ""
    payload: dict = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    attempts: int = 1
    raw_response: str = ""
    error: str = ""
    # The first request's prompt: its characters, its tokens as the server
    # counted them (0 when unknown), the estimate its budget was kept with, and
    # the compressions applied; a context window the server's error reported.
    prompt_chars: int = 0
    prompt_tokens: int = 0
    prompt_estimate: int = 0
    compressions: list = field(default_factory=list)
    context_tokens_reported: int | None = None


class Backbone(Protocol):
    """``label_many`` labels a batch, keeping within the backbone's concurrency
    and rate limits, and calls ``on_result`` as each window finishes (so a run
    can save and report progress as it goes). ``should_stop`` is polled between
    requests; when it returns True no new request is started."""

    kind: str
    model: str
    parameters: dict

    def label_many(
        self,
        contexts: list[WindowContext],
        *,
        on_result: Callable[[BackboneResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[BackboneResult]: ...
