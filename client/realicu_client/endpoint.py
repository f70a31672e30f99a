"""The endpoint's side of online evaluation (protocol realicu-online-v2): a
researcher's server keeps each stay's session and gets every window's whole
context back from streamed payloads.

    from realicu_client import SessionGap, Sessions

    sessions = Sessions()

    def handle(payload: dict) -> tuple[int, dict]:
        try:
            context = sessions.receive(payload)
        except SessionGap:
            # The platform sends this window again in a new session, whole.
            return 409, {"error": "session gap"}
        return 200, my_agent(context)  # {"status", "acute_problems", ...}

A session's first payload (``sequence`` 0) holds the stay's bedside history
up to its window; each later one only what is new since the previous window
of the session. ``receive`` returns the payload with ``events`` and
``past_windows`` made whole again: the session's union, events ordered by
``(time, event_id)`` and earlier windows by their start, which is the
window's context exactly (``events_total`` and ``past_windows_total`` are
checked). A repeated sequence number is a retry of the same payload and adds
nothing twice. An unknown session past its first payload, a skipped sequence
number or a union of the wrong size raises ``SessionGap``: answer HTTP 409.
Full-mode payloads (``context_mode`` "full") are whole already."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

GAP_STATUS = 409


class SessionGap(Exception):
    """The payload cannot follow what this server holds of its session:
    answer HTTP 409 and the window comes again, whole, in a new session."""


class _Session:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.sequence = -1
        # (sort key, row) pairs, in order; the keys are computed once a row.
        self.events: list[tuple] = []
        self.event_ids: set = set()
        self.windows: list[tuple] = []
        self.window_ids: set = set()

    def add(self, payload: dict) -> None:
        _merge(self.events, self.event_ids, payload["events"], "event_id", "time")
        _merge(
            self.windows, self.window_ids, payload["past_windows"], "window_id", "start"
        )


def _merge(held: list, ids: set, rows: list, key: str, when: str) -> None:
    """``rows`` not held yet added to ``held`` in ``(when, key)`` order."""
    fresh = [((_time(r[when]), r[key]), r) for r in rows if r[key] not in ids]
    if not fresh:
        return
    ids.update(r[key] for _, r in fresh)
    in_order = not held or fresh[0][0] >= held[-1][0]
    held.extend(fresh)
    if not in_order or any(a[0] > b[0] for a, b in zip(fresh, fresh[1:])):
        held.sort(key=lambda pair: pair[0])


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Sessions:
    """The open session of each stay, at most ``max_stays`` of them (the
    least recently used is forgotten: its next payload is a gap)."""

    def __init__(self, max_stays: int = 1024) -> None:
        self.max_stays = max_stays
        self._stays: OrderedDict = OrderedDict()

    def receive(self, payload: dict) -> dict:
        """The window's whole context from ``payload``; SessionGap when the
        session cannot be followed (its state for the stay is dropped)."""
        if payload.get("context_mode") == "full":
            return dict(payload)
        stay_id, sequence = payload["stay_id"], int(payload["sequence"])
        session = self._stays.get(stay_id)
        if sequence == 0 and (session is None or session.id != payload["session_id"]):
            session = self._stays[stay_id] = _Session(payload["session_id"])
        elif session is None or session.id != payload["session_id"]:
            raise SessionGap(f"session {payload['session_id']} is not known here")
        elif sequence not in (session.sequence, session.sequence + 1):
            self._stays.pop(stay_id, None)
            raise SessionGap(
                f"sequence {sequence} after {session.sequence}: payloads were missed"
            )
        self._stays.move_to_end(stay_id)
        while len(self._stays) > self.max_stays:
            self._stays.popitem(last=False)
        session.add(payload)
        session.sequence = sequence
        if len(session.events) != payload["events_total"] or len(
            session.windows
        ) != payload.get("past_windows_total", len(session.windows)):
            self._stays.pop(stay_id, None)
            raise SessionGap(
                f"{len(session.events)} events held, the window's context has "
                f"{payload['events_total']}"
            )
        return {
            **payload,
            "events": [row for _, row in session.events],
            "past_windows": [row for _, row in session.windows],
        }


__all__ = ["GAP_STATUS", "SessionGap", "Sessions"]
