"""The rules backbone ("rules", model "rules-v1"): the offline default Oracle.
It labels a window deterministically from the stay's hourly concept tracks
(windows.concepts, definitions in /work/shared/CLINICAL_CONCEPTS.md, columns in
windows.concepts.columns) and the events of its context, with no LLM and no
database access. Each rule cites the definition it applies. Modules:
``thresholds`` (cut-offs and drug groups), ``window`` (what a window's tracks and
events say), ``status``, ``problems`` (findings and acute problems), ``actions``
(recommended actions, red flags, ratings of recorded actions).

What it reads, per window (hours since ICU admission; track row H holds the
hour (H - 1, H]):

- "now": the rows of the window and the two hours before it, (start - 2, ceil(end)];
- "before": the six hours before that, (start - 8, start - 2], the recent
  context the status is judged against (spec section 3);
- for problems that last longer than a few hours (AKI), the rows of the
  preceding ``AKI_RECOVERY_HOURS``;
- the stay's static facts: the Oracle is a hindsight labeller (spec section 7)
  and its context carries the hospital outcome and the stay's length.

Evidence is the ids of the context's events that drive each finding, those
nearest the window first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np

from oracle.backbones.base import BackboneResult, WindowContext
from oracle.backbones.rules.actions import _actions_and_flags, _ratings
from oracle.backbones.rules.problems import _findings, _problems
from oracle.backbones.rules.status import _status
from oracle.backbones.rules.thresholds import SHOCK_NED_MIN
from oracle.backbones.rules.window import _Window
from oracle.schema import payload_validate

MODEL = "rules-v1"


def rules_label(context: WindowContext) -> tuple[str, dict]:
    """The status and label payload (oracle.models.OracleLabel shape) of one
    window, validated by the same reply-level rules as an LLM reply."""
    f = _Window(context)
    x = _findings(f)
    status, status_ids = _status(f)
    actions, flags = _actions_and_flags(f, x)
    payload = {
        "status_evidence": status_ids,
        "acute_problems": _problems(f, x),
        "action_ratings": _ratings(f, x),
        "added_actions": actions,
        "red_flags": flags,
    }
    return payload_validate(
        status,
        payload,
        allowed_event_ids=context.allowed_event_ids,
        recorded_action_ids=[e["id"] for e in context.recorded_actions],
    )


class RulesBackbone:
    """The offline default backbone: rules_label over each window, in order."""

    kind = "rules"
    model = MODEL

    def __init__(self):
        self.parameters: dict = {}

    def label_many(
        self,
        contexts: list[WindowContext],
        *,
        on_result: Callable[[BackboneResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[BackboneResult]:
        results = []
        for context in contexts:
            if should_stop is not None and should_stop():
                break
            started = time.monotonic()
            try:
                status, payload = rules_label(context)
            except Exception as error:  # a rule bug must not sink the whole run
                result = BackboneResult(
                    window_id=context.window_id,
                    ok=False,
                    error=f"The rules backbone could not label this window: {error}",
                    latency_ms=int((time.monotonic() - started) * 1000),
                )
            else:
                result = BackboneResult(
                    window_id=context.window_id,
                    ok=True,
                    status=status,
                    payload=payload,
                    latency_ms=int((time.monotonic() - started) * 1000),
                    raw_response=_json({"status": status, **payload}),
                )
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


def _json(data) -> str:
    return json.dumps(
        data, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)
    )


__all__ = ["MODEL", "SHOCK_NED_MIN", "RulesBackbone", "_Window", "rules_label"]
