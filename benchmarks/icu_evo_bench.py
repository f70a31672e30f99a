"""ICU-Evo's prompt sizes, memory size and own time per window over a
hand-generated 72-hour stay (deterministic: vitals every 15 min, GCS every
2 h, 12 labs every 6 h, a norepinephrine infusion charted hourly from 20 h,
ventilation from 30 h), every window predicted in time order against the fake
OpenAI-compatible server (tests/oracle/fake_llm.py) with no latency, as
agents.services' runner would.

    python benchmarks/icu_evo_bench.py [--hours 72]

Prints, per step (predict, assessment, insight): requests, and the prompt's
estimated tokens (agents.llm's 3 characters a token) median and max per
request; prompt tokens per window (all steps); the stored memory's JSON size
(median, max); and the agent's own time per window (memory update and prompt
building; the requests' round trips excluded), median and p95.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

import django  # noqa: E402

django.setup()

from agents.icu_evo import IcuEvoAgent  # noqa: E402
from agents.llm import ChatClient  # noqa: E402
from tests.agents.icu_evo_helpers import EvoFakeLLM, contexts, ev, step_of  # noqa: E402

LABS = (
    ("lactate", 2.5, 0.8),
    ("creatinine", 1.8, 0.4),
    ("ph_arterial", 7.31, 0.04),
    ("platelet_count", 140, 30),
    ("bilirubin_total", 1.4, 0.3),
    ("inr", 1.4, 0.2),
    ("wbc", 14, 3),
    ("hemoglobin", 9.5, 0.8),
    ("potassium", 4.1, 0.4),
    ("sodium", 139, 3),
    ("bicarbonate", 20, 2),
    ("bun", 30, 5),
)


def stay(hours: int) -> list[dict]:
    events, n = [], 0

    def add(h, category, value, **kw):
        nonlocal n
        n += 1
        events.append(ev(n, round(h, 4), category, value, **kw))

    for q in range(hours * 4):
        h = q / 4
        wave = math.sin(q / 9)
        add(h, "heart_rate", round(105 + 12 * wave), unit="bpm")
        add(h + 0.01, "map", round(68 + 6 * wave), unit="mmHg")
        add(h + 0.02, "sbp", round(105 + 10 * wave), unit="mmHg")
        add(h + 0.03, "respiratory_rate", round(22 + 4 * wave), unit="/min")
        add(h + 0.04, "spo2", round(94 + 2 * wave), unit="%")
        if q % 4 == 0:
            add(h + 0.05, "temp_c", round(38.1 + 0.4 * wave, 1), unit="°C")
            if h >= 20:
                add(
                    h + 0.06,
                    "norepinephrine",
                    0.1,
                    domain="medication_admin_continuous",
                    kind="action",
                    unit="mcg/kg/min",
                )
            if h >= 30:
                add(h + 0.07, "IMV", None, domain="respiratory_support", kind="action")
        if q % 8 == 0:
            add(
                h + 0.08, "gcs_total", 13 if h < 30 else 8, domain="patient_assessments"
            )
        if q % 24 == 0:
            for k, (category, mean, spread) in enumerate(LABS):
                value = round(mean + spread * math.sin(q / 17 + k), 2)
                add(h + 0.1 + k / 1000, category, value, domain="labs")
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=72)
    args = parser.parse_args()
    events = stay(args.hours)
    fake = EvoFakeLLM(latency=0.0).start()
    client = ChatClient(
        base_url=fake.base_url, model="fake", max_retries=0, requests_per_minute=10**6
    )
    agent = IcuEvoAgent(client)
    in_chat = [0.0]
    chat = client.chat

    def timed_chat(*a, **kw):
        t0 = time.perf_counter()
        try:
            return chat(*a, **kw)
        finally:
            in_chat[0] += time.perf_counter() - t0

    client.chat = timed_chat
    windows = range(args.hours * 2)
    memory: dict = {}
    own, sizes, per_window = [], [], []
    by_step: dict[str, list[int]] = {"predict": [], "assessment": [], "insight": []}
    try:
        for ctx in contexts(events, windows):
            before = len(fake.requests)
            in_chat[0] = 0.0
            t0 = time.perf_counter()
            _, memory = agent.predict(ctx, memory)
            own.append(time.perf_counter() - t0 - in_chat[0])
            sizes.append(len(json.dumps(memory)))
            tokens = 0
            for request in fake.requests[before:]:
                text = "".join(m.get("content") or "" for m in request.body["messages"])
                estimate = client.estimate_tokens(text)
                by_step[step_of(request.body)].append(estimate)
                tokens += estimate
            per_window.append(tokens)
    finally:
        client.close()
        fake.stop()
    print(
        f"ICU-Evo over a {args.hours} h stay: {len(events)} events, "
        f"{len(per_window)} windows"
    )
    for step, values in by_step.items():
        if values:
            print(
                f"  {step:<10} {len(values):>4} requests, prompt tokens median "
                f"{statistics.median(values):.0f}, max {max(values)}"
            )
    print(
        f"  prompt tokens per window (all steps): mean "
        f"{statistics.mean(per_window):.0f}, max {max(per_window)}"
    )
    print(
        f"  memory JSON: median {statistics.median(sizes) / 1024:.1f} KiB, "
        f"max {max(sizes) / 1024:.1f} KiB"
    )
    own.sort()
    print(
        f"  agent's own time per window: median {statistics.median(own) * 1000:.1f} "
        f"ms, p95 {own[int(0.95 * (len(own) - 1))] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
