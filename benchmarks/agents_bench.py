"""Agents' throughput and prompt sizes (issue 15) on a demo Gold release.

The CLIF demo is imported with its windows; a Gold campaign of its first
``--windows`` Gold windows (default 48) is labelled by two physicians who agree
(drawn per window), and its Gold release built. Then each reference agent
(full-context, local-window, rag, icu-evo when agents.icu_evo is there) and one
online endpoint (a trivial agent on loopback) run over the release on two
Celery workers (two solo-pool processes, the filesystem broker) against the
fake OpenAI-compatible server (tests/oracle/fake_llm.py) answering after 300
ms; each run's predictions are scored as a baseline on the release's
leaderboard (scores from a fake LLM are plumbing only).

Printed per agent: windows, wall time from start to the last prediction,
throughput (windows/min), LLM requests per window, prompt tokens per window,
failed windows, and the baseline's status accuracy and problems Hit@k. Then
(issue 32) per agent the real prompt tokens of every request (p50, p95, max)
against the backbone's budget and how many were over it, counted as the
fake server counts them: it tokenizes at SERVER_CHARS_PER_TOKEN (2.4, within
the 2.06-2.54 SmolLM2 showed on these prompts) on llama-cpp-python's
/extras/tokenize/count, which the backbone names as its tokenizer, and
reports the same in ``usage``; the failures by reason; and the endpoint's
bytes per window against the window's index in its stay, streamed
(``endpoint``, agents.sessions) and whole every window (``endpoint-full``).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \\
        python benchmarks/agents_bench.py [--windows 48] [--agents a,b]

With ``--payload-bytes N`` it only imports the demo, builds the windows of its
N longest stays and prints, for both modes, an endpoint's payload bytes per
window against the window's index in its stay (every window of the stay, as
a Scale release has them) and the bytes of each stay: no release, no workers.

With ``--llm smollm2`` (issue 32's done-when) the models are real: no
workers, no endpoints; llama-cpp-python's server with SmolLM2-135M-Instruct
starts at its default settings (``--n-ctx`` 2048, tests/oracle/llm_server.py)
behind a loopback proxy (benchmarks._llm_bench.LLMProxy) that reads the
server's ``usage``; the backbone is made as an admin would (base URL and
model; the rest detected). Each of full-context, local-window, rag, icu-evo
and the Oracle runs inline over the release's windows, and prints windows
done and failed, the real prompt tokens (p50, p95, max) against the budget,
prompts over it, overflows, schema failures, seconds per window, wall and CPU
time (the server's included) with the load average, and the final state and
failure reasons as the run's page shows them. With ``--slow 10`` the proxy
makes the server ten times slower (one request at a time, each reply held
back nine times the server's own time); the backbone's timeout and
REALICU_LLM_TIMEOUT_MAX_SECONDS are ``--timeout-cap`` (30 s) and it retries
once, so every run ends in bounded time:

    DATABASE_URL=... python benchmarks/agents_bench.py --llm smollm2 \
        --windows 10 [--slow 10]

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there (``<name>_agents_bench``); the releases, the
broker's folder and the caches go to a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchmarks._database as pg  # noqa: E402
from benchmarks._label_texts import agreed_gold_campaign  # noqa: E402
from benchmarks._payloads import payload_bytes, print_by_index  # noqa: E402
from benchmarks._worker import worker_start, workers_stop  # noqa: E402
from loopback import LoopbackServer, QuietHandler  # noqa: E402

WORKERS = 2
LATENCY = 0.3
CHARS_PER_TOKEN = 3.0
SERVER_CHARS_PER_TOKEN = 2.4
CONTEXT_TOKENS, REPLY_TOKENS = 2048, 512
PROBLEMS = ["septic shock", "acute kidney injury", "hypoxemia", "delirium"]
ACTIONS = ["titrate norepinephrine", "give fluid bolus", "check lactate"]


def _setup(n_windows: int):
    """The demo, a Gold campaign of ``n_windows`` Gold windows with agreeing
    labels, and its built Gold release."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from exports.building import release_build
    from exports.services import release_create
    from windows.importers.clif import clif_import
    from windows.models import Stay, Window
    from windows.windowing import windows_build_many

    clif_import()
    windows_build_many(stays=Stay.objects.all(), seed=0)
    gold = list(
        Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")[
            :n_windows
        ]
    )
    admin, campaign = agreed_gold_campaign(
        gold,
        name="agents bench gold",
        physicians=2,
        problems=PROBLEMS,
        actions=ACTIONS,
    )
    release = release_build(
        release=release_create(user=admin, kind="gold", campaign=campaign)
    )
    return admin, release


class TrivialEndpoint(LoopbackServer):
    """A researcher's agent on loopback: "stable", and the commonest problem
    and action, whatever the context."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.by_index: dict[int, list[int]] = {}
        self.start()

    def handler(self):
        outer = self

        class Handler(QuietHandler):
            def do_POST(self):
                raw = self.request_body()
                outer.requests += 1
                outer.bytes += len(raw)
                try:
                    index = int(json.loads(raw).get("window_index"))
                except (ValueError, TypeError, AttributeError):
                    index = -1
                outer.by_index.setdefault(index, []).append(len(raw))
                self.send_json(
                    200,
                    {
                        "status": "stable",
                        "acute_problems": [PROBLEMS[0]],
                        "recommended_actions": [ACTIONS[0]],
                    },
                )

        return Handler

    @property
    def url(self) -> str:
        return f"{self.root}/predict"


def _workers(env: dict, log_dir: Path) -> list[subprocess.Popen]:
    return [
        worker_start(f"bench{n}", env, log_dir / f"worker{n}.log", loglevel="WARNING")
        for n in range(WORKERS)
    ]


def _quantile(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _measure(run, fake, first_request: int, endpoint=None) -> dict:
    from agents.models import AgentPrediction, AgentRun, RunState
    from exports.models import Submission, SubmissionState

    started = time.monotonic()
    finished = _wait(
        lambda: (
            AgentRun.objects.get(pk=run.pk).state
            not in (RunState.QUEUED, RunState.RUNNING)
        ),
        timeout=3600,
    )
    run.refresh_from_db()
    last = AgentPrediction.objects.filter(run=run).order_by("-created_at").first()
    wall = (last.created_at - run.started_at).total_seconds() if last else 0.0
    if run.submission_id:
        _wait(
            lambda: (
                Submission.objects.get(pk=run.submission_id).state
                in (SubmissionState.SCORED, SubmissionState.FAILED)
            ),
            timeout=600,
        )
    run.refresh_from_db()
    requests = fake.requests[first_request:]
    chars = sum(
        len(m.get("content") or "")
        for r in requests
        if isinstance(r.body, dict)
        for m in r.body.get("messages", [])
    )
    per_window = [
        sum(len(m.get("content") or "") for m in r.body.get("messages", []))
        / CHARS_PER_TOKEN
        for r in requests
        if isinstance(r.body, dict)
    ]
    overall = (run.submission.scores or {}).get("overall", {}) if run.submission else {}
    counted = sorted(
        int(
            len("\n".join(m.get("content") or "" for m in r.body["messages"]))
            / SERVER_CHARS_PER_TOKEN
        )
        + 4 * len(r.body["messages"])
        for r in requests
        if isinstance(r.body, dict) and r.body.get("messages")
    )
    reasons: dict[str, int] = {}
    for error in (
        AgentPrediction.objects.filter(run=run)
        .exclude(error="")
        .values_list("error", flat=True)
    ):
        reason = (error.splitlines() or [""])[0][:120]
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "server_tokens": counted,
        "reasons": reasons,
        "finished": finished,
        "state": run.state,
        "windows": run.windows_done,
        "failed": run.windows_failed,
        "wall": wall or (time.monotonic() - started),
        "requests": len(requests) if endpoint is None else endpoint.requests,
        "prompt_tokens": chars / CHARS_PER_TOKEN,
        "max_request_tokens": max(per_window) if per_window else 0,
        "status_accuracy": overall.get("status_accuracy"),
        "problems_hit_at_k": overall.get("problems_hit_at_k"),
        "payload_bytes": endpoint.bytes if endpoint is not None else None,
    }


def main() -> None:
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=48)
    parser.add_argument(
        "--agents",
        default="full-context,local-window,rag,icu-evo,endpoint,endpoint-full",
    )
    parser.add_argument(
        "--payload-bytes",
        type=int,
        default=0,
        metavar="N",
        help="only the payload bytes per window of the demo's N longest stays",
    )
    parser.add_argument(
        "--llm",
        choices=["smollm2"],
        default="",
        help="a real model: the reference agents and the Oracle on llama-cpp-"
        "python's server with SmolLM2-135M-Instruct (default settings), inline",
    )
    parser.add_argument("--n-ctx", type=int, default=2048, help="with --llm")
    parser.add_argument(
        "--slow",
        type=float,
        default=0,
        metavar="FACTOR",
        help="with --llm: the server made FACTOR times slower (a loopback proxy)",
    )
    parser.add_argument(
        "--timeout-cap",
        type=float,
        default=30.0,
        help="with --slow: the backbone's timeout and REALICU_LLM_TIMEOUT_MAX_SECONDS",
    )
    parser.add_argument("--db", default="")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    if args.slow and not args.llm:
        parser.error("--slow needs --llm")
    if args.slow and args.slow < 1:
        parser.error("--slow is a factor of at least 1")
    if args.llm and args.agents == parser.get_default("agents"):
        from benchmarks._agents_llm import REAL_AGENTS

        args.agents = REAL_AGENTS
    if args.llm:  # each run's lines as it ends, into a log file too
        sys.stdout.reconfigure(line_buffering=True)

    db = args.db or pg.database_name("agents_bench")
    tmp = Path(tempfile.mkdtemp(prefix="agents-bench-"))
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": pg.database_url(db),
            "REALICU_VAR_DIR": str(tmp / "var"),
            "REALICU_RELEASES_DIR": str(tmp / "releases"),
            "REALICU_SUBMISSIONS_DIR": str(tmp / "submissions"),
            "CACHE_URL": f"filecache://{tmp / 'cache'}",
            "CELERY_BROKER_URL": "filesystem://",
            "HF_HUB_OFFLINE": "1",
            "DJANGO_SETTINGS_MODULE": "realicu_web.settings",
            # The trivial endpoint listens on loopback, which an operator must
            # allow for endpoints (oracle.backbones.endpoints).
            "REALICU_ENDPOINT_ALLOWED_NETWORKS": "127.0.0.0/8",
        }
    )
    if args.slow:
        env["REALICU_LLM_TIMEOUT_MAX_SECONDS"] = str(args.timeout_cap)
    os.environ.update(env)
    pg.database_create(db)
    procs: list[subprocess.Popen] = []
    try:
        import django

        django.setup()
        from agents.reference import icu_evo_class
        from agents.services import (
            agent_run_start,
            endpoint_register,
            online_eval_start,
        )
        from tests.agents.helpers import fake_backbone_row
        from tests.oracle.fake_llm import FakeLLM

        if args.payload_bytes:
            payload_bytes(args.payload_bytes)
            return
        t0 = time.monotonic()
        admin, release = _setup(args.windows)
        print(
            f"demo Gold release {release.pk}: {release.window_records.count()} "
            f"windows, {release.window_records.values('stay_id').distinct().count()}"
            f" stays (set up in {time.monotonic() - t0:.0f} s)"
        )
        if args.llm:
            from benchmarks._agents_llm import real_model
            from benchmarks._llm_bench import cpu_seconds, load_text

            wall0, cpu0 = time.monotonic(), cpu_seconds()
            real_model(args, admin, release)
            print(
                f"all runs: wall {time.monotonic() - wall0:.0f} s, CPU "
                f"{cpu_seconds() - cpu0:.0f} s; {load_text()}"
            )
            return
        fake = FakeLLM(latency=LATENCY).start()
        fake.prompt_chars_per_token = SERVER_CHARS_PER_TOKEN
        backbone = fake_backbone_row(
            fake.base_url,
            "fake-300ms",
            requests_per_minute=60_000,
            context_tokens=CONTEXT_TOKENS,
            max_completion_tokens=REPLY_TOKENS,
            tokenizer="llamacpp_python",
            server_report={"detected_at": "set by the benchmark"},
        )
        from oracle.services.tokens import budget_text, prompt_budget_parts

        parts = prompt_budget_parts(backbone)
        budget = parts["budget"]
        print(f"prompt budget {budget_text(parts)}")
        procs = _workers(env, tmp)
        time.sleep(8)  # the workers start (and load their imports)
        rows = []
        by_index: dict[str, dict[int, list[int]]] = {}
        for name in args.agents.split(","):
            endpoint = None
            if name in ("endpoint", "endpoint-full"):
                endpoint = TrivialEndpoint()
                registered = endpoint_register(
                    user=admin,
                    release=release,
                    name=f"trivial {name}",
                    url=endpoint.url,
                    context_mode="full" if name == "endpoint-full" else "streamed",
                )
                first = len(fake.requests)
                run = online_eval_start(user=admin, endpoint=registered)
            else:
                if name == "icu-evo" and icu_evo_class() is None:
                    print("icu-evo: unavailable (agents.icu_evo missing), skipped")
                    continue
                first = len(fake.requests)
                run = agent_run_start(
                    user=admin, release=release, agent=name, backbone=backbone
                )
            figures = _measure(run, fake, first, endpoint)
            rows.append((name, figures))
            n = max(1, figures["windows"])
            print(
                f"{name:13s} {figures['windows']:4d} windows in "
                f"{figures['wall']:6.1f} s: "
                f"{60 * figures['windows'] / max(figures['wall'], 1e-9):6.1f} "
                f"windows/min · {figures['requests'] / n:.2f} requests/window · "
                + (
                    f"prompt tokens/window {figures['prompt_tokens'] / n:7.0f} "
                    f"(max request {figures['max_request_tokens']:.0f})"
                    if endpoint is None
                    else f"payload {figures['payload_bytes'] / n / 1024:.1f} KiB/window"
                )
                + f" · failed {figures['failed']} · state {figures['state']}"
                + f" · status acc {figures['status_accuracy']}"
                + f" · problems Hit@k {figures['problems_hit_at_k']}"
            )
            tokens = figures["server_tokens"]
            if endpoint is None and tokens:
                print(
                    f"  real prompt tokens: p50 {_quantile(tokens, 0.5)}, p95 "
                    f"{_quantile(tokens, 0.95)}, max {tokens[-1]} against a budget "
                    f"of {budget}; over it: {sum(t > budget for t in tokens)} of "
                    f"{len(tokens)} requests"
                )
            reasons = sorted(figures["reasons"].items(), key=lambda r: -r[1])
            for reason, count in reasons:
                print(f"  failed {count} × {reason}")
            if endpoint is not None:
                endpoint.stop()
                by_index[name] = endpoint.by_index
        if by_index:
            print("endpoint bytes per window by its index in the stay:")
            print_by_index(by_index)
        fake.stop()
        from exports.selectors import leaderboard

        board = leaderboard(user=admin, release=release)
        print(
            f"leaderboard of release {release.pk}: {len(board)} scored baselines ("
            + ", ".join(
                f"{(r['baseline'] or {}).get('agent')}"
                + (
                    " plumbing only"
                    if (r["baseline"] or {}).get("plumbing_only")
                    else ""
                )
                for r in board
            )
            + ")"
        )
        if rows:
            rates = [
                60 * f["windows"] / max(f["wall"], 1e-9)
                for _, f in rows
                if f["windows"]
            ]
            print(
                f"{WORKERS} workers, fake server {int(LATENCY * 1000)} ms: median "
                f"{statistics.median(rates):.1f} windows/min over {len(rows)} runs"
            )
    finally:
        workers_stop(procs, timeout=30)
        from django.db import connections

        connections.close_all()
        if not args.keep:
            pg.database_drop(db)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
