"""Oracle context and prompt build time per window over the imported stays (the
CLIF demo after `manage.py import_clif` and `build_windows --all`), in batches
of 20 windows of one stay, as an Oracle run's worker builds them; and the rules
backbone's labelling time on the same contexts.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> \
        python benchmarks/oracle_context_bench.py

Tracks are built once before timing (a run's first pass over a stay pays that
once per stay; `manage.py build_concepts` does it ahead). Target: well under
100 ms per window (1,000 windows/min from 2 workers leaves 120 ms per window
per worker for everything).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

import django  # noqa: E402

django.setup()

from oracle.backbones.rules import RulesBackbone  # noqa: E402
from oracle.context import window_contexts_build  # noqa: E402
from oracle.models import PromptTemplate  # noqa: E402
from oracle.prompts import DEFAULT_INSTRUCTIONS, DEFAULT_SYSTEM, prompt_build  # noqa: E402
from windows.models import Stay, Window  # noqa: E402
from windows.tracks import tracks_build_all  # noqa: E402

BATCH = 20


def main() -> None:
    stays = list(Stay.objects.order_by("pk"))
    windows = list(Window.objects.order_by("stay_id", "index"))
    if not windows:
        sys.exit(
            "No windows: run manage.py import_clif and manage.py build_windows --all."
        )
    tracks_build_all(stays=stays)
    template = PromptTemplate(
        version="bench",
        system=DEFAULT_SYSTEM,
        instructions=DEFAULT_INSTRUCTIONS,
        token_budget=12000,
    )
    batches, current = [], []
    for w in windows:
        if current and (len(current) == BATCH or current[-1].stay_id != w.stay_id):
            batches.append(current)
            current = []
        current.append(w)
    batches.append(current)

    context_s = prompt_s = rules_s = 0.0
    per_window, tokens = [], []
    compressed = 0
    for batch in batches:
        t0 = time.perf_counter()
        contexts = window_contexts_build(windows=batch)
        t1 = time.perf_counter()
        prompts = [prompt_build(context=c, template=template) for c in contexts]
        t2 = time.perf_counter()
        results = RulesBackbone().label_many(contexts)
        t3 = time.perf_counter()
        assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
        context_s += t1 - t0
        prompt_s += t2 - t1
        rules_s += t3 - t2
        per_window.append((t2 - t0) / len(batch) * 1000)
        tokens += [p.estimated_tokens for p in prompts]
        compressed += sum(bool(p.compressions) for p in prompts)
    n = len(windows)
    print(
        f"windows                        {n:>8}  ({len(stays)} stays, {len(batches)} "
        "batches "
        f"of <= {BATCH})"
    )
    print(f"context build, ms/window       {context_s / n * 1000:>8.2f}")
    print(f"prompt build, ms/window        {prompt_s / n * 1000:>8.2f}")
    print(
        f"context+prompt, ms/window      {(context_s + prompt_s) / n * 1000:>8.2f}  "
        f"(batch p95 {statistics.quantiles(per_window, n=20)[-1]:.2f})"
    )
    print(f"rules labels, ms/window        {rules_s / n * 1000:>8.2f}")
    print(
        f"prompt tokens (est.) mean/max  {statistics.mean(tokens):>8.0f} / "
        f"{max(tokens)}  "
        f"({compressed} prompts compressed to the 12,000 budget)"
    )


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    main()
