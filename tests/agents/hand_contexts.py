"""Window contexts built by hand for the agents' unit tests, with a chat
client that records prompts and a bag-of-words embedding whose similarities
are known by hand; and the event hours a prompt shows."""

import re
from datetime import UTC, datetime, timedelta

import numpy as np

from agents.base import ChatReply, PastWindow, WindowContext

_TAG = re.compile(r"^\[(-?[\d.]+)h\]", re.MULTILINE)


def event_hours(prompt: str) -> list[float]:
    return [float(h) for h in _TAG.findall(prompt)]


class StubLLM:
    """A ChatClient that records prompts and answers a fixed prediction."""

    model = "stub"

    def __init__(self, budget):
        self.prompt_budget = budget
        self.tokens_in = self.tokens_out = self.requests = 0
        self.sent = []

    def estimate_tokens(self, text):
        return len(text) // 3 + 1

    def chat(self, messages, *, json_reply=True, purpose=""):
        self.sent.append(messages)
        self.requests += 1
        return ChatReply('{"status": "stable"}', 10, 2)


T0 = datetime(2030, 1, 1, tzinfo=UTC)


def hand_context(n_before: int, n_in: int, *, concept=lambda i: "Heart rate"):
    """A window [10 h, 10.5 h) with ``n_before`` events before it (one every 3
    minutes from admission) and ``n_in`` in it; ten past windows of 30 min,
    one an hour from 0 h."""
    events, times = [], []
    for i in range(n_before + n_in):
        if i < n_before:
            when = T0 + timedelta(minutes=3 * i * (600 / max(1, 3 * n_before)))
        else:
            when = T0 + timedelta(hours=10, minutes=(i - n_before) * 30 / (n_in + 1))
        hours = (when - T0).total_seconds() / 3600
        events.append(
            {
                "event_id": i + 1,
                "time": when.isoformat(),
                "hours_since_admit": round(hours, 4),
                "kind": "observation",
                "domain": "vitals",
                "category": "heart_rate",
                "name": "Heart rate",
                "concept": concept(i),
                "value_num": 80.0 + i % 7,
                "unit": "bpm",
                "value_text": "",
            }
        )
        times.append(when)
    past = tuple(
        PastWindow(
            window_id=100 + k,
            index=k,
            start=T0 + timedelta(hours=k),
            end=T0 + timedelta(hours=k, minutes=30),
        )
        for k in range(10)
    )
    return WindowContext(
        stay_id=1,
        window_id=999,
        window_index=10,
        start=T0 + timedelta(hours=10),
        end=T0 + timedelta(hours=10, minutes=30),
        hours_since_admission=10.0,
        events=tuple(events),
        static={"age": 70, "sex": "F"},
        past_windows=past,
        event_times=tuple(times),
    )


def words_embed(texts):
    """Bag of words over a fixed vocabulary: similarity is known by hand."""
    vocabulary = ["norepinephrine", "lactate", "insulin", "glucose", "heart"]
    rows = []
    for text in texts:
        lower = text.lower()
        rows.append([lower.count(w) for w in vocabulary])
    return np.asarray(rows, dtype=np.float32)
