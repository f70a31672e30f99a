"""The OpenAI-compatible chat-completions backbone (vLLM, Ollama, llama.cpp
server, OpenAI and the gateways that speak its API): many requests in flight
under asyncio and httpx, within the backbone's concurrency and requests-per-
minute limits, with retries, one repair turn, and validated replies.

The HTTP work runs on an event loop in a helper thread; results, ``on_result``
and ``should_stop`` are handled in the calling thread, so both callbacks may use
the Django ORM (which refuses to run inside an event loop).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import queue
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from oracle.backbones import http
from oracle.backbones.base import BackboneResult, WindowContext
from oracle.backbones.endpoints import EndpointRefused, key_env_check, url_check
from oracle.prompts import (
    CHARS_PER_TOKEN,
    PromptBudgetError,
    messages_chars,
    messages_tokens,
    prompt_build,
    tokens_estimate,
)
from oracle.schema import ReplyError, reply_parse, reply_schema_for

# Keys of ``parameters`` that the backbone itself sets.
_RESERVED = {"model", "messages", "stream", "n"}
RAW_EXCERPT_CHARS = 2000
# A reply longer than this is refused unread (a chat completion of a window's
# label is a few kilobytes; a token count less).
MAX_REPLY_BYTES = 4_000_000
COUNT_REPLY_BYTES = 1_000_000


class BackboneConfigError(ValueError):
    """The backbone cannot send anything as configured (e.g. its key's
    environment variable is not set)."""


# How servers say a prompt did not fit (OpenAI, vLLM, llama-cpp-python, llama.cpp
# server, TGI), and the figures some of them give.
_OVERFLOW = re.compile(
    r"context[ _](length|window|size)|maximum context|too many (input )?tokens"
    r"|exceeds? the (available )?context|prompt is too long",
    re.IGNORECASE,
)
_CONTEXT_SIZE = re.compile(
    r"maximum context length is (\d+)|context window of (\d+)|\"n_ctx\"\s*:\s*(\d+)",
    re.IGNORECASE,
)
_PROMPT_SIZE = re.compile(
    r"\((\d+) in the messages|has (\d+) input tokens|requested tokens \((\d+)\)"
    r"|\"n_prompt_tokens\"\s*:\s*(\d+)",
    re.IGNORECASE,
)


def _first_int(pattern: re.Pattern, text: str) -> int | None:
    match = pattern.search(text or "")
    if not match:
        return None
    return next(int(g) for g in match.groups() if g)


def response_described(status: int, headers, text: str) -> str:
    """A response as the run page may show it: status and content type, and
    whether it said the prompt was too long (the platform's own words). Never
    anything of the body: a URL that is not an LLM server may return anything
    (issue 14)."""
    content_type = (headers.get("content-type") or "no content type").split(";")[0]
    described = f"HTTP {status} ({content_type.strip()})"
    if _OVERFLOW.search(text or ""):
        described += ", the prompt does not fit the model's context window"
    return described


class _Overflow(Exception):
    """The server refused the prompt as longer than its context window;
    ``prompt_tokens`` and ``context_tokens`` when the error said them."""

    def __init__(self, message, attempts, prompt_tokens=None, context_tokens=None):
        super().__init__(message)
        self.attempts = attempts
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class _Stopped(Exception):
    """The run asked to stop before this window's next request."""


class _RequestFailed(Exception):
    """A request failed for good (retries spent, or an error not worth retrying)."""

    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


class RateLimiter:
    """Requests-per-minute limit as a token bucket of capacity 1 refilled at
    rpm / 60 per second: request starts are at least 60 / rpm seconds apart, so
    no 60-second span ever holds more than ``rpm`` starts."""

    def __init__(self, requests_per_minute: int):
        self.interval = 60.0 / max(1, int(requests_per_minute))
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            now = time.monotonic()
            wait = self._next - now
            self._next = max(now, self._next) + self.interval
        if wait > 0:
            await asyncio.sleep(wait)


@dataclass
class RequestEvent:
    """What happened to one request, as it happens, for the run page:
    ``kind`` is "sent", "answered", "timed_out", "errored" or "retry";
    ``detail`` says why for the last three."""

    kind: str
    detail: str = ""


@dataclass
class _Reply:
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str


@dataclass
class _Usage:
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    # Time on the wire: from sending each request to its reply (or its error),
    # summed over retries and the repair turn. Waiting for a concurrency slot,
    # for the rate limiter and for a backoff is not in it.
    request_seconds: float = 0.0


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def reply_format_apply(
    body: dict, form: str, schema: dict | None, name: str = "window_label"
) -> dict:
    """``body`` with the reply's JSON Schema in the server's dialect
    (``form``, a backbone's reply format): OpenAI/vLLM/llama.cpp's
    json_schema, llama-cpp-python's schema beside json_object, Ollama's
    ``format``; a plain JSON object where no schema goes or none is given.
    The Oracle and the agents send theirs the same way."""
    if form == "json_schema" and schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": False},
        }
    elif form == "llamacpp_python" and schema is not None:
        body["response_format"] = {"type": "json_object", "schema": schema}
    elif form == "ollama" and schema is not None:
        body["format"] = schema
    elif form and form != "none":
        body["response_format"] = {"type": "json_object"}
    return body


class OpenAICompatBackbone:
    """``label_many`` over an OpenAI-compatible ``/chat/completions`` endpoint.

    Per window: the prompt (oracle.prompts) is built within ``prompt_budget``
    tokens, estimated at ``chars_per_token`` and counted with the server's
    tokenizer where ``tokenizer`` names one (compressed further while the
    count is over); it is sent with ``max_tokens`` and, per ``reply_format``,
    the label's JSON Schema for this prompt (oracle.schema.reply_schema_for)
    in the server's dialect. A prompt the server refuses as longer than its
    context window is compressed further and sent once more. 429, 5xx,
    connection errors, timeouts and unreadable bodies are retried up to
    ``max_retries`` times with exponential backoff and full jitter, or after
    the server's Retry-After (capped at ``retry_after_max``). A reply that
    fails oracle.schema validation gets one repair turn quoting the error; a
    second failure is a failed result with both raw replies. Tokens come from
    the reply's ``usage``, estimated when absent.

    The URL is checked (oracle.backbones.endpoints) and the API key read from
    the environment variable ``api_key_env`` (an allowed name) when
    ``label_many`` starts, and every connection is checked again, to the
    address connected (oracle.backbones.http). A request and its whole reply
    must be done within ``timeout_seconds``; a reply longer than
    MAX_REPLY_BYTES is refused unread. The key is sent as a Bearer token and
    scrubbed from every error and raw text kept. Error responses are
    described by status and content type, never by their body.
    """

    kind = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        template,
        api_key_env: str = "",
        parameters: dict | None = None,
        timeout_seconds: float = 120.0,
        max_retries: int = 5,
        concurrency: int = 16,
        requests_per_minute: int = 600,
        json_mode: bool = False,
        reply_format: str = "",
        max_completion_tokens: int | None = None,
        prompt_budget: int | None = None,
        chars_per_token: float = CHARS_PER_TOKEN,
        tokenizer: str = "",
        budget_formula: str = "",
        tokens_per_second: float | None = None,
        timeout_max_seconds: float | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 300.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.template = template
        self.api_key_env = api_key_env
        self.parameters = {
            k: v for k, v in dict(parameters or {}).items() if k not in _RESERVED
        }
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max(0, int(max_retries))
        self.concurrency = max(1, int(concurrency))
        self.requests_per_minute = max(1, int(requests_per_minute))
        # json_mode (the older parameter) is reply_format "json_object".
        self.reply_format = reply_format or ("json_object" if json_mode else "none")
        self.json_mode = self.reply_format != "none"
        self.max_completion_tokens = (
            int(max_completion_tokens) if max_completion_tokens else None
        )
        self.prompt_budget = int(prompt_budget) if prompt_budget else None
        # The budget as the README's formula, for the messages that cite it.
        self.budget_formula = budget_formula
        self.chars_per_token = float(chars_per_token or CHARS_PER_TOKEN)
        # Characters per token of this batch's prompts as the server counted
        # them: the estimate follows them from the next prompt on, instead of
        # waiting for the backbone's calibration at the end of the chunk.
        self.observed_ratios: list[float] = []
        self.tokenizer = tokenizer or ""
        # Reply tokens per second on the wire, as measured (the backbone's
        # calibration, then this batch's replies): the timeout adapts to it.
        self.tokens_per_second = float(tokens_per_second or 0) or None
        self.observed_speeds: list[float] = []
        self.timeout_max_seconds = max(
            self.timeout_seconds, float(timeout_max_seconds or 0)
        )
        self._report: Callable[[RequestEvent], None] = lambda event: None
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max

    @property
    def url(self) -> str:
        if self.base_url.endswith("/chat/completions"):
            return self.base_url
        return f"{self.base_url}/chat/completions"

    @property
    def root_url(self) -> str:
        """The server's root: the base URL without /chat/completions and /v1."""
        root = self.base_url
        for tail in ("/chat/completions", "/v1"):
            if root.endswith(tail):
                root = root[: -len(tail)]
        return root

    # --- the sync interface -----------------------------------------------------

    def _api_key(self) -> str:
        if not self.api_key_env:
            return ""
        try:
            key_env_check(self.api_key_env)
        except EndpointRefused as error:
            raise BackboneConfigError(str(error)) from None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise BackboneConfigError(
                f"The environment variable {self.api_key_env} that should hold the "
                "API key is not set in the worker's environment."
            )
        return key

    def label_many(
        self,
        contexts: list[WindowContext],
        *,
        on_result: Callable[[BackboneResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_request: Callable[[RequestEvent], None] | None = None,
    ) -> list[BackboneResult]:
        """Label ``contexts``; see base.Backbone. ``on_request`` hears of every
        request as it is sent, answered, timed out, failed or retried (in the
        calling thread, as ``on_result``). ``should_stop`` is polled in the
        calling thread before the first request, after each finished window and
        every half second; once it is True no new request starts, and windows
        not finished get no result (a run picks them up again). Raises
        BackboneConfigError before sending anything if the key is missing or
        not allowed, or the URL is refused."""
        try:
            url_check(self.base_url)
        except EndpointRefused as error:
            raise BackboneConfigError(
                f"The backbone's URL is refused: {error}"
            ) from None
        key = self._api_key()
        if should_stop is not None and should_stop():
            return []
        results: list[BackboneResult] = []
        if not contexts:
            return results
        out: queue.Queue = queue.Queue()
        stop = threading.Event()
        done = object()

        def run_loop() -> None:
            try:
                asyncio.run(self._label_all(contexts, key, out, stop))
            except BaseException as error:  # surfaced in the calling thread
                out.put(error)
            finally:
                out.put(done)

        thread = threading.Thread(target=run_loop, name="oracle-http", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    item = out.get(timeout=0.5)
                except queue.Empty:
                    if should_stop is not None and not stop.is_set() and should_stop():
                        stop.set()
                    continue
                if item is done:
                    break
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, RequestEvent):
                    if on_request is not None:
                        on_request(item)
                    continue
                results.append(item)
                if on_result is not None:
                    on_result(item)
                if should_stop is not None and not stop.is_set() and should_stop():
                    stop.set()
        finally:
            stop.set()
            thread.join()
        return results

    # --- the event loop ---------------------------------------------------------

    async def _label_all(self, contexts, key, out: queue.Queue, stop) -> None:
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        semaphore = asyncio.Semaphore(self.concurrency)
        limiter = RateLimiter(self.requests_per_minute)
        self._report = out.put
        async with http.guarded_async_client(
            purpose=http.Purpose.BACKBONE,
            timeout_seconds=self.timeout_seconds,
            headers=headers,
            connections=self.concurrency,
        ) as client:

            async def one(context):
                try:
                    result = await self._label_one(
                        client, context, key, semaphore, limiter, stop
                    )
                except _Stopped:
                    return
                out.put(result)

            await asyncio.gather(*(one(c) for c in contexts))

    def _scrub(self, text: str, key: str) -> str:
        if key and text:
            text = text.replace(key, "[api key]")
        return text

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        ceiling = min(self.backoff_max, self.backoff_base * (2**retry))
        return random.uniform(ceiling / 2, ceiling)

    def _body(self, messages, schema: dict | None) -> dict:
        """The request body, with the reply's schema in the server's dialect."""
        body = {"model": self.model, "messages": messages, **self.parameters}
        if self.max_completion_tokens:
            body["max_tokens"] = self.max_completion_tokens
        return reply_format_apply(body, self.reply_format, schema)

    def speed(self) -> float | None:
        """Reply tokens per second: the median of this batch's replies, else
        the backbone's measured figure."""
        if self.observed_speeds:
            speeds = sorted(self.observed_speeds)
            return speeds[len(speeds) // 2]
        return self.tokens_per_second

    def request_timeout(self, timeouts: int = 0) -> float:
        """The deadline of a request: the backbone's timeout, or twice the time
        a full reply (``max_tokens``) takes at the measured speed when that is
        longer, doubled for each time this request already timed out; never
        more than ``timeout_max_seconds``. A slow or busy server is waited for
        instead of being asked again behind its own abandoned requests."""
        timeout = self.timeout_seconds
        speed = self.speed()
        if speed:
            timeout = max(timeout, 2 * (self.max_completion_tokens or 768) / speed)
        timeout *= 2**timeouts
        return round(min(timeout, self.timeout_max_seconds), 1)

    async def _complete(
        self,
        client,
        messages,
        key,
        semaphore,
        limiter,
        stop,
        usage: _Usage,
        schema: dict | None = None,
    ) -> _Reply:
        """One chat completion, retrying transient failures. Raises _Overflow
        when the server says the prompt does not fit its context window."""
        payload = json.dumps(self._body(messages, schema))
        retry = 0
        timeouts = 0
        report = self._report
        while True:
            if stop.is_set():
                raise _Stopped()
            retry_after = None
            headers: dict = {}
            async with semaphore:
                if stop.is_set():
                    raise _Stopped()
                await limiter.acquire()
                usage.attempts += 1
                deadline = self.request_timeout(timeouts)
                report(RequestEvent("sent"))
                sent = time.monotonic()
                try:
                    # A timeout leaves the stream unread: httpx closes the
                    # connection, which is how a server learns the request
                    # was abandoned.
                    reply = await http.arequest(
                        client,
                        "POST",
                        self.url,
                        content=payload,
                        deadline_seconds=deadline,
                        max_bytes=MAX_REPLY_BYTES,
                        timeout=httpx.Timeout(deadline),
                    )
                    status, text, headers = reply.status, reply.text, reply.headers
                    retry_after = retry_after_seconds(headers.get("retry-after"))
                    problem = None
                except http.AddressRefused as error:
                    report(RequestEvent("errored", "the address was refused"))
                    raise _RequestFailed(
                        f"The backbone's address was refused when connecting: {error}",
                        usage.attempts,
                    ) from None
                except http.ReplyRefused as error:
                    report(RequestEvent("errored", f"reply refused: {error}"))
                    raise _RequestFailed(
                        f"The endpoint's reply was refused: {error}.", usage.attempts
                    ) from None
                except httpx.TimeoutException:
                    status, text = 0, ""
                    timeouts += 1
                    problem = (
                        f"the request timed out: no complete reply within "
                        f"{deadline:g} s"
                    )
                    report(RequestEvent("timed_out", problem))
                except httpx.HTTPError as error:
                    status, text = 0, ""
                    problem = f"connection error ({type(error).__name__})"
                    report(RequestEvent("errored", problem))
                finally:
                    usage.request_seconds += time.monotonic() - sent
            if problem is None:
                if status == 429 or status >= 500:
                    report(
                        RequestEvent(
                            "errored", response_described(status, headers, text)
                        )
                    )
                else:
                    report(RequestEvent("answered"))
            if problem is None and status == 200:
                try:
                    data = json.loads(text)
                    choice = data["choices"][0]
                    content = choice["message"]["content"] or ""
                except (ValueError, KeyError, IndexError, TypeError):
                    problem = (
                        "the endpoint's reply was not a chat completion ("
                        + response_described(status, headers, "")
                        + ")"
                    )
                else:
                    reported = data.get("usage") or {}
                    tokens_in = reported.get("prompt_tokens")
                    tokens_out = reported.get("completion_tokens")
                    tokens_in = int(tokens_in) if tokens_in is not None else None
                    tokens_out = int(tokens_out) if tokens_out is not None else None
                    usage.tokens_in += (
                        tokens_in
                        if tokens_in is not None
                        else messages_tokens(messages)
                    )
                    usage.tokens_out += (
                        tokens_out
                        if tokens_out is not None
                        else tokens_estimate(content)
                    )
                    took = time.monotonic() - sent
                    if tokens_out and took > 0:
                        self.observed_speeds.append(tokens_out / took)
                    return _Reply(
                        content,
                        tokens_in,
                        tokens_out,
                        str(choice.get("finish_reason") or ""),
                    )
            if problem is None:
                problem = response_described(status, headers, text)
                if status in (400, 413, 422) and _OVERFLOW.search(text or ""):
                    raise _Overflow(
                        f"The endpoint refused the prompt ({problem}).",
                        usage.attempts,
                        prompt_tokens=_first_int(_PROMPT_SIZE, text),
                        context_tokens=_first_int(_CONTEXT_SIZE, text),
                    )
                if not (status == 429 or status >= 500):
                    raise _RequestFailed(
                        f"The endpoint refused the request ({problem}).", usage.attempts
                    )
            if retry >= self.max_retries:
                raise _RequestFailed(
                    f"Gave up after {usage.attempts} attempts: {problem}.",
                    usage.attempts,
                )
            delay = self._backoff(retry, retry_after)
            retry += 1
            report(
                RequestEvent(
                    "retry",
                    f"retry {retry} of {self.max_retries} in {delay:.0f} s after "
                    f"{problem}",
                )
            )
            await asyncio.sleep(delay)

    async def _count(self, client, messages) -> int | None:
        """The prompt's tokens by the server's tokenizer (``tokenizer``), or None
        when it has none or the count failed (the estimate stands then). Raw
        tokenizers count the contents; the chat template's framing is what the
        budget's margin is for."""
        if not self.tokenizer:
            return None
        try:
            if self.tokenizer == "vllm":
                reply = await self._count_request(
                    client,
                    f"{self.root_url}/tokenize",
                    {"model": self.model, "messages": messages},
                )
                return int(reply.json()["count"]) if reply.status == 200 else None
            text = "\n".join(m.get("content") or "" for m in messages)
            framing = 4 * len(messages)
            if self.tokenizer == "llamacpp_python":
                reply = await self._count_request(
                    client,
                    f"{self.root_url}/extras/tokenize/count",
                    {"input": text, "model": self.model},
                )
                if reply.status == 200:
                    return int(reply.json()["count"]) + framing
            elif self.tokenizer == "llamacpp":
                reply = await self._count_request(
                    client, f"{self.root_url}/tokenize", {"content": text}
                )
                if reply.status == 200:
                    return len(reply.json()["tokens"]) + framing
        except (
            httpx.HTTPError,
            http.AddressRefused,
            http.ReplyRefused,
            ValueError,
            KeyError,
            TypeError,
        ):
            return None
        return None

    async def _count_request(self, client, url: str, body: dict) -> http.Reply:
        return await http.arequest(
            client,
            "POST",
            url,
            json=body,
            deadline_seconds=self.timeout_seconds,
            max_bytes=COUNT_REPLY_BYTES,
        )

    def _build(self, context, budget: int | None):
        return prompt_build(
            context=context,
            template=self.template,
            budget=budget,
            chars_per_token=self.ratio(),
        )

    def ratio(self) -> float:
        """The estimate's characters per token: the backbone's calibration, or
        less if a prompt of this batch showed fewer (with 3 % to spare)."""
        if not self.observed_ratios:
            return self.chars_per_token
        return min(self.chars_per_token, 0.97 * min(self.observed_ratios))

    def _over_budget(self, context, detail: str, reserve: int = 0) -> str:
        """A window whose prompt does not fit, in the README's figures: the
        budget as its formula (not an intermediate target of the compression)
        and what a repair turn held back."""
        budget = self.budget_formula or str(self.prompt_budget)
        held = (
            f", less {reserve} held back for the repair turn's reply and correction"
            if reserve
            else ""
        )
        return (
            f"The prompt of window {context.window_id} does not fit its budget of "
            f"{budget} tokens{held} even compressed: {detail} Raise the backbone's "
            "context window or lower its reply tokens."
        )

    async def _fitted(
        self, client, context, budget: int | None, semaphore, reserve: int = 0
    ):
        """The prompt within ``budget``, by the estimate and then, where the
        server counts tokens, by its count: rebuilt at a budget scaled by how
        far the count was over, at most three times. Returns the prompt and its
        count (None without a tokenizer). Building and counting take one of
        the requests in flight: the prompt is built when the request can go,
        with the ratios the batch has seen by then, and a server that serves
        one request at a time does not keep counts waiting behind completions
        until they time out."""

        async def built(target):
            async with semaphore:
                try:
                    prompt = self._build(
                        context, None if target is None else max(1, target)
                    )
                except PromptBudgetError as error:
                    estimated = getattr(error, "estimated", None)
                    raise PromptBudgetError(
                        self._over_budget(
                            context,
                            f"it needs about {estimated} tokens by the estimate."
                            if estimated
                            else str(error),
                            reserve,
                        )
                    ) from None
                return prompt, await self._count(client, prompt.messages)

        if budget is not None:
            budget = budget - reserve
        prompt, counted = await built(budget)
        target = budget
        for _ in range(3):
            if counted is None or budget is None or counted <= budget:
                break
            target = int(target * budget / counted * 0.97) - 8
            prompt, counted = await built(target)
        if counted is not None and budget is not None and counted > budget:
            raise PromptBudgetError(
                self._over_budget(
                    context, f"it is {counted} tokens by the server's count.", reserve
                )
            )
        return prompt, counted

    async def _label_one(self, client, context, key, semaphore, limiter, stop):
        usage = _Usage()
        first: dict = {}

        def result(**fields) -> BackboneResult:
            return BackboneResult(
                window_id=context.window_id,
                tokens_in=usage.tokens_in,
                tokens_out=usage.tokens_out,
                latency_ms=int(usage.request_seconds * 1000),
                attempts=max(1, usage.attempts),
                prompt_chars=first.get("chars", 0),
                prompt_tokens=first.get("tokens") or 0,
                prompt_estimate=first.get("estimate", 0),
                compressions=first.get("compressions", []),
                context_tokens_reported=first.get("context_tokens"),
                **fields,
            )

        budget = self.prompt_budget
        try:
            prompt, counted = await self._fitted(client, context, budget, semaphore)
        except PromptBudgetError as error:
            return result(ok=False, error=str(error))
        messages = list(prompt.messages)
        first.update(
            chars=messages_chars(messages),
            estimate=prompt.estimated_tokens,
            tokens=counted,
            compressions=list(prompt.compressions),
        )
        if self.tokenizer and counted is None:
            first["compressions"].append(
                "the server's token count failed: kept within the estimate only"
            )
        raws: list[str] = []
        last_error = ""
        overflowed = False
        repair: list[dict] = []
        turn = 0
        while turn < 2:
            schema = (
                reply_schema_for(
                    event_ids=prompt.event_ids,
                    recorded_ids=[e["id"] for e in context.recorded_actions],
                    max_tokens=self.max_completion_tokens,
                )
                if self.reply_format in ("json_schema", "llamacpp_python", "ollama")
                else None
            )
            try:
                reply = await self._complete(
                    client, messages, key, semaphore, limiter, stop, usage, schema
                )
            except _Overflow as error:
                if error.context_tokens:
                    first["context_tokens"] = error.context_tokens
                if turn == 0 and error.prompt_tokens:
                    first["tokens"] = error.prompt_tokens
                if overflowed:
                    return result(
                        ok=False,
                        error=self._scrub(
                            f"The prompt does not fit the model's context window even "
                            f"compressed further: {error}",
                            key,
                        ),
                        raw_response=self._raw(raws, key),
                    )
                overflowed = True
                # Compress further, by how far over the server said it was (or
                # by a quarter), and send once more (a repair turn keeps its
                # reply and correction, so the prompt gives up their room).
                tail = messages_tokens(repair, self.ratio()) if repair else 0
                size = max(
                    1, (error.prompt_tokens or prompt.estimated_tokens + tail) - tail
                )
                wanted = int(size * 0.75)
                if error.context_tokens:
                    wanted = min(
                        wanted,
                        error.context_tokens
                        - (self.max_completion_tokens or 0)
                        - 64
                        - tail,
                    )
                # In the estimate's units: the estimate scaled as the server's
                # count would have to shrink.
                target = max(
                    1, int(prompt.estimated_tokens * max(wanted, 1) / size * 0.95)
                )
                try:
                    prompt = self._build(context, target)
                except PromptBudgetError as budget_error:
                    estimated = getattr(budget_error, "estimated", None)
                    return result(
                        ok=False,
                        error=self._over_budget(
                            context,
                            f"the server refused it as too long, and compressed "
                            f"to about {estimated} tokens it would still not fit "
                            f"the {target} the server's error leaves."
                            if estimated
                            else str(budget_error),
                        ),
                    )
                messages = list(prompt.messages) + repair
                note = "compressed further after the server refused the prompt's length"
                if turn == 0:
                    first.update(
                        chars=messages_chars(messages),
                        estimate=prompt.estimated_tokens,
                        tokens=None,
                        compressions=list(prompt.compressions) + [note],
                    )
                else:
                    first["compressions"] = list(first.get("compressions", [])) + [note]
                continue
            except _RequestFailed as error:
                return result(
                    ok=False,
                    error=self._scrub(str(error), key),
                    raw_response=self._raw(raws, key),
                )
            if turn == 0 and reply.prompt_tokens:
                first["tokens"] = reply.prompt_tokens
                self.observed_ratios.append(first["chars"] / reply.prompt_tokens)
            content = reply.content
            raws.append(content)
            try:
                status, payload = reply_parse(
                    content, context=context, allowed_event_ids=prompt.event_ids
                )
            except ReplyError as error:
                last_error = str(error)
                if reply.finish_reason == "length":
                    last_error += (
                        " The reply was cut at the backbone's reply tokens "
                        f"({self.max_completion_tokens or 'server default'})."
                    )
                turn += 1
                if turn >= 2:
                    break
                # The repair turn carries the reply and the correction: the
                # prompt gives up their room so that the request still fits.
                extra = (reply.completion_tokens or tokens_estimate(content)) + 160
                if budget is not None:
                    try:
                        prompt, _ = await self._fitted(
                            client, context, budget, semaphore, reserve=extra
                        )
                    except PromptBudgetError:
                        pass
                repair = [
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": "Your reply could not be used: "
                        f"{last_error} Reply again with only the corrected JSON "
                        "object.",
                    },
                ]
                messages = list(prompt.messages) + repair
                continue
            return result(
                ok=True,
                status=status,
                payload=payload,
                raw_response=self._scrub(content, key),
            )
        return result(
            ok=False,
            error=self._scrub(
                f"The reply failed validation twice (after one repair request): "
                f"{last_error}",
                key,
            ),
            raw_response=self._raw(raws, key),
        )

    def _raw(self, raws: list[str], key: str) -> str:
        if not raws:
            return ""
        if len(raws) == 1:
            return self._scrub(raws[0], key)
        return "\n\n".join(
            f"--- reply {n} ---\n{self._scrub(raw, key)}"
            for n, raw in enumerate(raws, 1)
        )
