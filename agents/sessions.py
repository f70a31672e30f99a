"""The online-evaluation protocol's stay sessions (realicu-online-v2): what an
endpoint is sent at each window of a stay.

A session is one stay's run of payloads to one endpoint, named by
``session_id`` and counted by ``sequence`` from 0. Its first payload holds
the stay's whole bedside history up to that window (the window's context,
agents.context: the one bedside cut, windows.selectors_context); each later
one, in streamed mode (the default), only the events and earlier windows not
sent before in the session, so that a stay's bytes grow with its windows,
not with their square. The window's context is then the union of the
session's events so far, ordered by ``(time, event_id)``; ``events_total``
and ``past_windows_total`` give its size, so the endpoint can check it. In
full mode every payload holds the window's whole context, as protocol v1 did.

The runner opens a new session (sequence 0, the whole history again)
whenever it cannot be sure the endpoint holds what was sent: after a window
whose request got no usable reply, when a stay starts or resumes in a worker,
when a window's context no longer holds an event sent before (windows that
overlap and end earlier), and when the endpoint answers HTTP 409 (see
``GAP_STATUS``). A retry of a request repeats its payload, same sequence and
all: events are keyed by ``event_id``, and adding one already held changes
nothing.
"""

from __future__ import annotations

import uuid

from agents.base import WindowContext
from agents.models import ContextMode

PROTOCOL_VERSION = "realicu-online-v2"
# An endpoint that cannot follow a session (an unknown session id with a
# sequence above 0, a skipped sequence number, a union whose size is not
# ``events_total``: it restarted and lost its state) answers this status; the
# runner then sends the window again in a new session with the whole history,
# once per window.
GAP_STATUS = 409


class StaySession:
    """One stay's session with an endpoint: what was sent in it so far."""

    def __init__(self, *, stay_id: int, mode: str = ContextMode.STREAMED) -> None:
        if mode not in ContextMode.values:
            raise ValueError(f"Unknown context mode {mode!r}.")
        self.id = uuid.uuid4().hex
        self.stay_id = stay_id
        self.mode = mode
        self.sequence = -1
        self._events: set[int] = set()
        self._windows: set[int] = set()

    def payload(self, ctx: WindowContext) -> dict | None:
        """The session's next payload, at ``ctx``; None when ``ctx`` is not of
        the session's stay or does not hold every event and earlier window
        sent before (the session cannot go on: open a new one)."""
        if ctx.stay_id != self.stay_id:
            return None
        body = ctx.payload()
        if self.mode == ContextMode.STREAMED:
            events = _unsent(body["events"], "event_id", self._events)
            windows = _unsent(body["past_windows"], "window_id", self._windows)
            if events is None or windows is None:
                return None
            self._events.update(e["event_id"] for e in events)
            self._windows.update(w["window_id"] for w in windows)
            body["events"], body["past_windows"] = events, windows
        self.sequence += 1
        return {
            "protocol": PROTOCOL_VERSION,
            "session_id": self.id,
            "sequence": self.sequence,
            "context_mode": self.mode,
            **body,
            "events_total": len(ctx.events),
            "past_windows_total": len(ctx.past_windows),
        }


def _unsent(rows: list[dict], key: str, sent: set[int]) -> list[dict] | None:
    """The rows whose ``key`` is not in ``sent``, in their order; None when a
    sent one is missing from ``rows``."""
    fresh, held = [], 0
    for row in rows:
        if row[key] in sent:
            held += 1
        else:
            fresh.append(row)
    return fresh if held == len(sent) else None


__all__ = ["GAP_STATUS", "PROTOCOL_VERSION", "ContextMode", "StaySession"]
