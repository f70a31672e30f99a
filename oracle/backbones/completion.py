"""One chat completion of the Oracle's backbone on the event loop
(oracle.backbones.openai_compat): the request within the backbone's
concurrency, rate and deadline, retried with backoff, its reply read and its
tokens counted; the exceptions and records the backbone's windows share.

A request abandoned (its deadline passed, or the run stopped while it was in
flight: its task is cancelled) has its connection closed by httpx, which is
how a server (llama.cpp, vLLM) learns to stop generating for it."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass

import httpx

from oracle.backbones import http
from oracle.backbones.dialects import (
    CONTEXT_SIZE,
    OVERFLOW,
    PROMPT_SIZE,
    first_int,
    reply_format_apply,
    response_described,
    retry_after_seconds,
)
from oracle.prompts import messages_tokens, tokens_estimate

# A reply longer than this is refused unread (a chat completion of a window's
# label is a few kilobytes; a token count less).
MAX_REPLY_BYTES = 4_000_000
COUNT_REPLY_BYTES = 1_000_000
# What a failed token count may raise: the estimate stands then.
COUNT_FAILURES = (
    httpx.HTTPError,
    http.AddressRefused,
    http.ReplyRefused,
    ValueError,
    KeyError,
    TypeError,
)


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


class CompletionRequests:
    """The requests of OpenAICompatBackbone: its body, deadline, backoff and
    ``_complete``, with the backbone's settings on ``self``."""

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
                if status in (400, 413, 422) and OVERFLOW.search(text or ""):
                    raise _Overflow(
                        f"The endpoint refused the prompt ({problem}).",
                        usage.attempts,
                        prompt_tokens=first_int(PROMPT_SIZE, text),
                        context_tokens=first_int(CONTEXT_SIZE, text),
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
