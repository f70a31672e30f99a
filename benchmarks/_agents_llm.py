"""agents_bench.py's real-model mode (``--llm smollm2``, issue 32's
done-when): each reference agent and the Oracle over a demo Gold release's
windows on llama-cpp-python's server with SmolLM2, behind the loopback proxy
of benchmarks/_llm_bench.py; printed per run as agents_bench.py's docstring
says."""

from __future__ import annotations

import time

REAL_AGENTS = "full-context,local-window,rag,icu-evo,oracle"


def real_model(args, admin, release) -> None:
    """Issue 32's done-when on a real model: each reference agent and the
    Oracle over the release's windows on llama-cpp-python's server with
    SmolLM2 (default settings), through a proxy that reads the server's
    usage and, with ``--slow``, makes it that many times slower."""
    from agents.models import AgentPrediction
    from agents.reference import icu_evo_class
    from agents.services import agent_run_inline, agent_run_start
    from benchmarks._llm_bench import (
        LLMProxy,
        cpu_seconds,
        failure_kind,
        load_text,
        oracle_report,
        quantile,
        run_page_lines,
    )
    from oracle import services as oracle_services
    from oracle.services.tokens import budget_text, prompt_budget_parts
    from tests.oracle.llm_server import MODEL_ALIAS, LlamaServer

    server = LlamaServer(n_ctx=args.n_ctx).start()
    # The backbone is detected at the server's own speed (detection's short
    # timeouts would leave a ten times slower one undetected); the slow-down
    # starts with the runs, so they differ from the default ones only in it.
    proxy = LLMProxy(server.root).start()
    try:
        fields = {}
        if args.slow:
            # What an admin sets for a slow server: a short timeout (the
            # Oracle's measured-speed timeout is capped by
            # REALICU_LLM_TIMEOUT_MAX_SECONDS, set to the same) and one retry.
            fields = {"timeout_seconds": args.timeout_cap, "max_retries": 1}
        backbone = oracle_services.backbone_create(
            admin=admin,
            name=f"smollm2 {time.time():.0f}",
            kind="openai",
            base_url=proxy.base_url,
            model=MODEL_ALIAS,
            detect=True,
            **fields,
        )
        proxy.factor = float(args.slow or 1)
        parts = prompt_budget_parts(backbone)
        budget = parts["budget"]
        print(
            f"SmolLM2 server n_ctx {args.n_ctx}"
            + (f", slowed {args.slow:g} times" if args.slow else "")
            + f"; detected: reply format {backbone.reply_format}, tokenizer "
            f"{backbone.tokenizer or 'estimate'}, context "
            f"{backbone.context_tokens or 'default'}; timeout "
            f"{backbone.timeout_seconds:g} s, {backbone.max_retries} retries; "
            f"agents' prompt budget {budget_text(parts)}"
        )
        names = [n for n in args.agents.split(",") if n]
        for name in names:
            first = len(proxy.records)
            cpu0, wall0 = cpu_seconds(), time.monotonic()
            if name == "oracle":
                run = oracle_services.oracle_run_create(
                    admin=admin,
                    name="agents bench oracle",
                    backbone=backbone,
                    campaign=release.campaign,
                    enqueue=False,
                )
                print(f"oracle (run {run.pk}):")
                oracle_services.oracle_run_execute_inline(run_id=run.pk)
                wall = time.monotonic() - wall0
                run.refresh_from_db()
                oracle_report(run=run, backbone=backbone, elapsed=wall)
                url_name = "oracle:run_detail"
            else:
                if name == "icu-evo" and icu_evo_class() is None:
                    print("icu-evo: unavailable (agents.icu_evo missing), skipped")
                    continue
                run = agent_run_start(
                    user=admin,
                    release=release,
                    agent=name,
                    backbone=backbone,
                    enqueue=False,
                )
                run = agent_run_inline(run=run)
                wall = time.monotonic() - wall0
                errors = list(
                    AgentPrediction.objects.filter(run=run)
                    .exclude(error="")
                    .values_list("error", flat=True)
                )
                kinds = [failure_kind(e) for e in errors]
                tokens = [
                    r["prompt_tokens"]
                    for r in proxy.records[first:]
                    if r["prompt_tokens"] is not None
                ]
                done = run.windows_done - run.windows_failed
                print(
                    f"{name} (run {run.pk}): {done} windows done, "
                    f"{run.windows_failed} failed of {run.windows_total}; "
                    f"{wall / max(1, run.windows_done):.1f} s per window"
                )
                if tokens:
                    over = sum(t > budget for t in tokens)
                    print(
                        f"  real prompt tokens (server's usage, {len(tokens)} "
                        f"requests): p50 {quantile(tokens, 0.5)}, p95 "
                        f"{quantile(tokens, 0.95)}, max {max(tokens)} against a "
                        f"budget of {budget}; over it: {over}"
                    )
                else:
                    print("  real prompt tokens: no request answered")
                print(
                    f"  prompts refused over budget: {kinds.count('over budget')}; "
                    f"overflows: {kinds.count('overflow')}; schema failures: "
                    f"{kinds.count('schema')}"
                )
                url_name = "agents:run_detail"
            records = proxy.records[first:]
            print(
                f"  wall {wall:.0f} s, CPU {cpu_seconds() - cpu0:.0f} s (this "
                f"process and its children, the server included); {load_text()}; "
                f"requests {len(records)}, abandoned "
                f"{sum(r['abandoned'] for r in records)}"
            )
            print("  its page says:")
            for line in run_page_lines(user=admin, url_name=url_name, run_id=run.pk):
                print(f"    {line}")
        print(
            "left out: the online endpoints (no model; their bytes per window are "
            "this script's default mode and --payload-bytes) and the scores "
            "(SmolLM2's are no figure of merit)"
        )
    finally:
        proxy.stop()
        server.stop()
