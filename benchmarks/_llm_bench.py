"""Shared parts of the real-model benchmarks (issue 32): agents_bench.py
``--llm smollm2`` and oracle_smollm2_bench.py.

``LLMProxy`` stands on loopback in front of an OpenAI-compatible server and
records every chat completion's prompt tokens as the server counted them
(its ``usage``); with ``factor`` 10 it also makes the server ten times
slower: one request at a time (a one-slot server), each reply held back for
``factor - 1`` times the upstream's own time (a streamed reply, each chunk
for ``factor - 1`` times its gap), and a request whose client hangs up while
held back is dropped at once, as llama.cpp's server drops an abandoned one.

``run_page_lines`` reads a run's page (agents' or the Oracle's) as an admin
sees it: its state, its error and its failure lines, as the page shows them.
``oracle_report`` prints the Oracle's figures on a finished run;
``cpu_seconds`` is the CPU time of this process and of its children,
a server included, and ``load_text`` the load average beside it.
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import statistics
import threading
import time
from collections.abc import Callable
from html.parser import HTMLParser

import httpx

from loopback import LoopbackServer, QuietHandler, client_hung_up

CHAT_PATH = "/chat/completions"
# How a window's error begins when its reply failed the schema after the
# repair turn (agents.prompts.predict_validated, the Oracle's backbone), and
# when the agent's client refused a prompt over its budget (agents.llm); a
# server's context-window refusal is told by the Oracle's own pattern
# (oracle.backbones.dialects.OVERFLOW).
SCHEMA_FAILURE = "failed validation twice"
OVER_BUDGET = "does not fit its budget"


def failure_kind(error: str) -> str | None:
    """ "schema", "over budget", "overflow" or None for a window's error."""
    from oracle.backbones.dialects import OVERFLOW

    if SCHEMA_FAILURE in error:
        return "schema"
    if OVER_BUDGET in error:
        return "over budget"
    if OVERFLOW.search(error):
        return "overflow"
    return None


def quantile(values, q: float):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def cpu_seconds() -> float:
    """User and system CPU seconds of this process, of its live children
    (psutil, a server and workers included) and of the ones it has reaped."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    try:
        import psutil
    except ImportError:  # reaped children only
        return total
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def _usage_tokens(body: bytes) -> int | None:
    """The prompt tokens of a reply's ``usage``: a JSON body, or the last SSE
    ``data:`` line that has one."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:") and '"usage"' in line:
                try:
                    data = json.loads(line[5:])
                except ValueError:
                    continue
    if not isinstance(data, dict):
        return None
    tokens = (data.get("usage") or {}).get("prompt_tokens")
    return int(tokens) if tokens is not None else None


class LLMProxy(LoopbackServer):
    """A loopback proxy in front of ``upstream`` (the server's root URL).
    ``records`` holds one dict per chat completion: ``prompt_tokens`` (from
    the reply's usage, None when it had none), ``status``, ``upstream``
    (seconds the server took), ``held`` (seconds added) and ``abandoned``
    (the client hung up before the reply was sent)."""

    def __init__(
        self,
        upstream: str,
        *,
        factor: float = 1.0,
        hold: Callable[[float, socket.socket], bool] | None = None,
    ) -> None:
        if factor < 1:
            raise ValueError("The slow-down factor is at least 1.")
        self.upstream = upstream.rstrip("/")
        self.factor = float(factor)
        self.records: list[dict] = []
        self._hold = hold or self._hold_unless_gone
        self._lock = threading.Lock()
        # One request at a time when slowed: a one-slot server ten times slower.
        self._slot = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @staticmethod
    def _hold_unless_gone(seconds: float, conn: socket.socket) -> bool:
        """Wait ``seconds``; False as soon as the client has hung up."""
        return not client_hung_up(conn, seconds)

    def _record(self, **row) -> None:
        with self._lock:
            self.records.append(row)

    def handler(self):
        proxy = self

        class Handler(QuietHandler):
            def _forward(self, method: str) -> None:
                body = self.request_body()
                slowed = proxy.factor > 1 and method == "POST"
                if slowed:
                    proxy._slot.acquire()
                try:
                    self._relay(method, body, slowed)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                except httpx.HTTPError as error:
                    # The server hung up or is gone: the client gets a 502,
                    # as from any gateway, and the request is recorded.
                    if self.path.endswith(CHAT_PATH):
                        proxy._record(
                            prompt_tokens=None,
                            status=0,
                            upstream=0.0,
                            held=0.0,
                            abandoned=False,
                            error=type(error).__name__,
                        )
                    try:
                        self.send_error(502, f"upstream: {type(error).__name__}")
                    except OSError:
                        pass
                finally:
                    if slowed:
                        proxy._slot.release()

            def _relay(self, method: str, body: bytes, slowed: bool) -> None:
                try:
                    streamed = bool(json.loads(body).get("stream")) if body else False
                except (ValueError, AttributeError):
                    streamed = False
                chat = self.path.endswith(CHAT_PATH)
                extra = proxy.factor - 1 if slowed else 0.0
                held, kept = 0.0, True
                sent = time.monotonic()
                with httpx.Client(timeout=None) as client:
                    with client.stream(
                        method,
                        proxy.upstream + self.path,
                        content=body or None,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        if not streamed:
                            content = response.read()
                            upstream = time.monotonic() - sent
                            held = extra * upstream
                            kept = proxy._hold(held, self.connection) if held else True
                            if kept:
                                kind = response.headers.get(
                                    "content-type", "application/json"
                                )
                                self.send_body(
                                    response.status_code,
                                    content,
                                    {"Content-Type": kind},
                                )
                        else:
                            content = b""
                            self.send_response(response.status_code)
                            self.send_header(
                                "Content-Type",
                                response.headers.get(
                                    "content-type", "text/event-stream"
                                ),
                            )
                            self.end_headers()
                            # The upstream's time: its gaps before each chunk,
                            # not the holds nor the writes to the client.
                            upstream, last = 0.0, sent
                            for chunk in response.iter_raw():
                                gap = time.monotonic() - last
                                upstream += gap
                                if extra:
                                    held += extra * gap
                                    kept = proxy._hold(extra * gap, self.connection)
                                    if not kept:
                                        break
                                content += chunk
                                self.wfile.write(chunk)
                                self.wfile.flush()
                                last = time.monotonic()
                if chat:
                    proxy._record(
                        prompt_tokens=_usage_tokens(content) if kept else None,
                        status=response.status_code,
                        upstream=upstream,
                        held=held,
                        abandoned=not kept,
                    )

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        return Handler


class _PageLines(HTMLParser):
    """The state badge (``data-run-state``), the alerts (``role="alert"``),
    the failure reasons (``ul.failure-reasons`` items) and the reason cells
    of the failures table (``table.failures``) of a run's page."""

    def __init__(self) -> None:
        super().__init__()
        self.state = ""
        self.alerts: list[str] = []
        self.reasons: list[str] = []
        self.window_reasons: list[str] = []
        self._stack: list[tuple[str, str | None]] = []
        self._in_reasons = self._in_failures = 0
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        kind = None
        if "data-run-state" in attrs:
            kind = "state"
        elif attrs.get("role") == "alert":
            kind = "alert"
        elif tag == "ul" and "failure-reasons" in classes:
            self._in_reasons += 1
        elif tag == "table" and "failures" in classes:
            self._in_failures += 1
        elif tag == "li" and self._in_reasons:
            kind = "reason"
        elif tag == "pre" and self._in_failures and "error-text" in classes:
            kind = "window"
        if tag in ("br", "input", "img", "meta", "link"):
            return
        self._stack.append((tag, kind))
        if kind:
            self._text = []

    def handle_endtag(self, tag):
        while self._stack:
            open_tag, kind = self._stack.pop()
            if kind and self._text is not None:
                text = " ".join("".join(self._text).split())
                {
                    "state": lambda t: setattr(self, "state", t),
                    "alert": self.alerts.append,
                    "reason": self.reasons.append,
                    "window": self.window_reasons.append,
                }[kind](text)
                self._text = None
            if open_tag == tag:
                break
        if tag == "ul" and self._in_reasons:
            self._in_reasons -= 1
        if tag == "table" and self._in_failures:
            self._in_failures -= 1

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def page_lines(html: str) -> list[str]:
    """What a run's page says of how it ended: ``state: ...``, its alerts,
    its reasons (``N × reason``: the page's list of reasons as it is (the
    Oracle's), else its failed windows' reasons counted by text, in their
    order (the agents'))."""
    parser = _PageLines()
    parser.feed(html)
    parser.close()
    lines = [f"state: {parser.state or '(none shown)'}"]
    lines += [f"error: {text}" for text in parser.alerts]
    lines += [f"reason: {text}" for text in parser.reasons]
    if not parser.reasons:
        counted: dict[str, int] = {}
        for text in parser.window_reasons:
            counted[text] = counted.get(text, 0) + 1
        lines += [f"reason: {n} × {text}" for text, n in counted.items()]
    return lines


def run_page_lines(*, user, url_name: str, run_id: int) -> list[str]:
    """``page_lines`` of the page ``url_name`` of run ``run_id``, fetched
    with Django's test client signed in as ``user`` (an admin)."""
    from django.test import Client
    from django.urls import reverse

    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    response = client.get(reverse(url_name, args=[run_id]))
    if response.status_code != 200:
        return [f"state: the page answered HTTP {response.status_code}"]
    return page_lines(response.content.decode("utf-8"))


def oracle_report(*, run, backbone, elapsed: float) -> dict:
    """Print the Oracle's figures of a finished run (issue 19's and 32's):
    windows, failures, overflows, schema failures, real prompt tokens against
    the budget, the estimate's error and seconds per window. Returns them."""
    from oracle.models import Backbone, OracleLabel
    from oracle.prompts import TOKENS_PER_MESSAGE
    from oracle.services.tokens import calibrated_chars_per_token, prompt_budget

    labels = list(OracleLabel.objects.filter(run=run).order_by("pk"))
    backbone = Backbone.objects.get(pk=backbone.pk)
    overflows = sum(
        1
        for label in labels
        if any("refused" in c for c in label.prompt_compressions)
        or "context window" in label.error
    )
    failed = [label for label in labels if label.state != "ok"]
    schema = [label for label in failed if SCHEMA_FAILURE in label.error]
    repaired = [label for label in labels if label.state == "ok" and label.attempts > 1]
    reals = [label.prompt_tokens for label in labels if label.prompt_tokens]
    chars = [label.prompt_chars for label in labels if label.prompt_tokens]
    budget = prompt_budget(backbone, template=run.prompt)
    print(
        f"windows {len(labels)}; labelled {len(labels) - len(failed)}; "
        f"failed {len(failed)}; repaired {len(repaired)}"
    )
    for label in failed:
        print(f"  failed window {label.window_id}: {label.error[:200]}")
    print(f"context overflows: {overflows}")
    print(f"schema failures: {len(schema)} (replies repaired: {len(repaired)})")
    if reals:
        print(
            f"prompt tokens (server's usage): p50 {quantile(reals, 0.5)}, "
            f"p95 {quantile(reals, 0.95)}, max {max(reals)} against a budget of "
            f"{budget}; over it: {sum(r > budget for r in reals)}; context "
            f"{backbone.context_tokens or 'default'}; reply budget "
            f"{run.backbone_snapshot.get('max_completion_tokens') or 'default'}"
        )
        framing = 2 * TOKENS_PER_MESSAGE
        ratio = calibrated_chars_per_token(backbone.calibration)
        print(
            "characters per token: median "
            f"{statistics.median(c / r for c, r in zip(chars, reals)):.2f}; "
            f"calibrated (10th percentile) {ratio:.2f}"
        )
        before = [math.ceil(c / 4) + framing for c in chars]
        after = [math.ceil(c / ratio) + framing for c in chars]
        print(f"estimate error, chars/4 (before calibration): {_error(before, reals)}")
        print(f"estimate error, calibrated: {_error(after, reals)}")
    else:
        print("prompt tokens (server's usage): no window answered")
    for label in labels:
        print(
            f"  window {label.window_id}: estimate {label.prompt_estimate}, "
            f"real {label.prompt_tokens}, budget {budget}"
        )
    latencies = [label.latency_ms / 1000 for label in labels]
    if labels:
        print(
            f"seconds per window: median {statistics.median(latencies):.1f} on the "
            f"wire, {elapsed / len(labels):.1f} wall clock (run {elapsed:.0f} s)"
        )
    return {
        "windows": len(labels),
        "failed": len(failed),
        "overflows": overflows,
        "schema": len(schema),
        "over_budget": sum(r > budget for r in reals),
        "tokens": reals,
        "budget": budget,
    }


def _error(estimates, reals) -> str:
    errors = [(e - r) / r for e, r in zip(estimates, reals)]
    return (
        f"median {100 * statistics.median(errors):+.1f} %, "
        f"most under {100 * min(errors):+.1f} %, most over {100 * max(errors):+.1f} %"
    )
