"""Helpers of the ICU-Evo tests: hand-built events and the window contexts
the runner would build from them (agents.context's rule: each window's events
strictly before its end), and the fake OpenAI-compatible server
(tests/oracle/fake_llm.py) answering ICU-Evo's assessment and insight prompts
as well as the predictor's."""

from __future__ import annotations

import bisect
import io
import itertools
import json
import re
from datetime import UTC, datetime, timedelta

from agents.base import PastWindow, WindowContext
from agents.icu_evo.prompts import ASSESSMENT_SYSTEM, INSIGHT_SYSTEM
from tests.oracle.fake_llm import FakeLLM, Scripted

ADMIT = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
_CITED = re.compile(r"#(\d+)")


def ev(
    event_id: int,
    hours: float,
    category: str,
    value: float | None = None,
    *,
    domain: str = "vitals",
    kind: str = "observation",
    text: str | None = None,
    unit: str = "",
) -> dict:
    """An event dict as agents.context builds them, ``hours`` after admission."""
    return {
        "event_id": event_id,
        "time": (ADMIT + timedelta(hours=hours)).isoformat(),
        "hours_since_admit": hours,
        "kind": kind,
        "domain": domain,
        "category": category,
        "name": category,
        "concept": category,
        "value_num": value,
        "unit": unit,
        "value_text": text,
    }


def contexts(events: list[dict], indices, static: dict | None = None):
    """The WindowContexts of windows ``indices`` (30-minute grid from
    admission), each with the events before its end."""
    events = sorted(events, key=lambda e: (e["time"], e["event_id"]))
    times = [datetime.fromisoformat(e["time"]) for e in events]
    static = static or {"age": 64, "sex": "F", "care_unit": "MICU"}
    for index in indices:
        start = ADMIT + index * WINDOW
        end = start + WINDOW
        hi = bisect.bisect_left(times, end)
        yield WindowContext(
            stay_id=1,
            window_id=1000 + index,
            window_index=index,
            start=start,
            end=end,
            hours_since_admission=index * 0.5,
            events=tuple(events[:hi]),
            static=static,
            past_windows=tuple(
                PastWindow(1000 + i, i, ADMIT + i * WINDOW, ADMIT + (i + 1) * WINDOW)
                for i in range(index)
            ),
            event_times=tuple(times[:hi]),
        )


def step_of(body) -> str:
    """Which ICU-Evo step a recorded request body is: assessment, insight or
    predict."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    if system == ASSESSMENT_SYSTEM:
        return "assessment"
    if system == INSIGHT_SYSTEM:
        return "insight"
    return "predict"


def prompt_of(body) -> str:
    return "\n".join(m.get("content") or "" for m in body.get("messages", []))


class EvoFakeLLM(FakeLLM):
    """FakeLLM whose default mode also answers the assessment and insight
    prompts: ``assessment(prompt, n)`` and ``insight(prompt, n)`` give the reply
    text of the n-th such request (defaults: a numbered summary; one
    hypothesis citing the last event id of the prompt). Scripted replies
    (``push``) still come first."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._count = {"assessment": itertools.count(1), "insight": itertools.count(1)}
        self.assessment = lambda prompt, n: json.dumps(
            {"summary": f"Summary {n}: course so far.", "critical_events": []}
        )
        self.insight = self._default_insight

    @staticmethod
    def _default_insight(prompt: str, n: int) -> str:
        cited = _CITED.findall(prompt)
        return json.dumps(
            {
                "hypotheses": [
                    {
                        "statement": f"Hypothesis {n}: vasoplegic shock.",
                        "supporting": [{"text": "low MAP", "event_id": int(cited[-1])}]
                        if cited
                        else [{"text": "no events yet"}],
                        "counter": [],
                    }
                ]
            }
        )

    def _handle(self, handler) -> None:
        raw = handler.request_body()
        # FakeLLM reads the body again: from a copy for this request only (the
        # connection's own stream is put back, for its next request).
        stream, handler.rfile = handler.rfile, io.BytesIO(raw)
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        step = step_of(body)
        if step != "predict" and handler.path.rstrip("/").endswith("/chat/completions"):
            with self._lock:
                if not self._script:
                    n = next(self._count[step])
                    reply = getattr(self, step)(prompt_of(body), n)
                    self._script.append(Scripted(content=reply))
        try:
            super()._handle(handler)
        finally:
            handler.rfile = stream
