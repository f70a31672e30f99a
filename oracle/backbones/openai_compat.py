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
import threading
import time
from dataclasses import dataclass
from typing import Callable

import httpx

from oracle.backbones.base import BackboneResult, WindowContext
from oracle.prompts import PromptBudgetError, messages_tokens, prompt_build, tokens_estimate
from oracle.schema import ReplyError, reply_parse

# Keys of ``parameters`` that the backbone itself sets.
_RESERVED = {"model", "messages", "stream", "n"}
RAW_EXCERPT_CHARS = 2000


class BackboneConfigError(ValueError):
    """The backbone cannot send anything as configured (e.g. its key's
    environment variable is not set)."""


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


class OpenAICompatBackbone:
    """``label_many`` over an OpenAI-compatible ``/chat/completions`` endpoint.

    Per window: the prompt (oracle.prompts) is sent; 429, 5xx, connection
    errors, timeouts and unreadable bodies are retried up to ``max_retries``
    times with exponential backoff and full jitter, or after the server's
    Retry-After when it gives one (capped at ``retry_after_max``). A reply that
    fails oracle.schema validation gets one repair turn quoting the error; a
    second failure is a failed result with both raw replies. Tokens come from
    the reply's ``usage``, estimated (oracle.prompts rule) when absent.

    The API key is read from the environment variable ``api_key_env`` when
    ``label_many`` starts, sent as a Bearer token, and scrubbed from every error
    and raw text kept.
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
        self.json_mode = json_mode
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max

    @property
    def url(self) -> str:
        if self.base_url.endswith("/chat/completions"):
            return self.base_url
        return f"{self.base_url}/chat/completions"

    # --- the sync interface -----------------------------------------------------

    def _api_key(self) -> str:
        if not self.api_key_env:
            return ""
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
    ) -> list[BackboneResult]:
        """Label ``contexts``; see base.Backbone. ``should_stop`` is polled in the
        calling thread before the first request, after each finished window and
        every half second; once it is True no new request starts, and windows
        not finished get no result (a run picks them up again). Raises
        BackboneConfigError before sending anything if the key is missing."""
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
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        semaphore = asyncio.Semaphore(self.concurrency)
        limiter = RateLimiter(self.requests_per_minute)
        async with httpx.AsyncClient(
            headers=headers, limits=limits, timeout=httpx.Timeout(self.timeout_seconds)
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

    async def _complete(
        self, client, messages, key, semaphore, limiter, stop, usage: _Usage
    ) -> str:
        """The content of one chat completion, retrying transient failures."""
        body = {"model": self.model, "messages": messages, **self.parameters}
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        payload = json.dumps(body)
        retry = 0
        while True:
            if stop.is_set():
                raise _Stopped()
            retry_after = None
            async with semaphore:
                if stop.is_set():
                    raise _Stopped()
                await limiter.acquire()
                usage.attempts += 1
                sent = time.monotonic()
                try:
                    response = await client.post(self.url, content=payload)
                    status, text = response.status_code, response.text
                    retry_after = retry_after_seconds(response.headers.get("retry-after"))
                    problem = None
                except httpx.TimeoutException:
                    status, text = 0, ""
                    problem = f"the request timed out after {self.timeout_seconds:g} s"
                except httpx.HTTPError as error:
                    status, text = 0, ""
                    problem = f"connection error ({type(error).__name__})"
                finally:
                    usage.request_seconds += time.monotonic() - sent
            if problem is None and status == 200:
                try:
                    data = json.loads(text)
                    content = data["choices"][0]["message"]["content"] or ""
                except (ValueError, KeyError, IndexError, TypeError):
                    problem = "the endpoint's reply was not a chat completion"
                else:
                    reported = data.get("usage") or {}
                    tokens_in = reported.get("prompt_tokens")
                    tokens_out = reported.get("completion_tokens")
                    usage.tokens_in += (
                        int(tokens_in) if tokens_in is not None else messages_tokens(messages)
                    )
                    usage.tokens_out += (
                        int(tokens_out) if tokens_out is not None else tokens_estimate(content)
                    )
                    return content
            if problem is None:
                excerpt = " ".join(self._scrub(text, key).split())[:300]
                problem = f"HTTP {status}" + (f": {excerpt}" if excerpt else "")
                if not (status == 429 or status >= 500):
                    raise _RequestFailed(
                        f"The endpoint refused the request ({problem}).", usage.attempts
                    )
            if retry >= self.max_retries:
                raise _RequestFailed(
                    f"Gave up after {usage.attempts} attempts: {problem}.", usage.attempts
                )
            delay = self._backoff(retry, retry_after)
            retry += 1
            await asyncio.sleep(delay)

    async def _label_one(self, client, context, key, semaphore, limiter, stop):
        usage = _Usage()

        def result(**fields) -> BackboneResult:
            return BackboneResult(
                window_id=context.window_id,
                tokens_in=usage.tokens_in,
                tokens_out=usage.tokens_out,
                latency_ms=int(usage.request_seconds * 1000),
                attempts=max(1, usage.attempts),
                **fields,
            )

        try:
            prompt = prompt_build(context=context, template=self.template)
        except PromptBudgetError as error:
            return result(ok=False, error=str(error))
        messages = list(prompt.messages)
        raws: list[str] = []
        last_error = ""
        for turn in range(2):
            try:
                content = await self._complete(
                    client, messages, key, semaphore, limiter, stop, usage
                )
            except _RequestFailed as error:
                return result(
                    ok=False,
                    error=self._scrub(str(error), key),
                    raw_response=self._raw(raws, key),
                )
            raws.append(content)
            try:
                status, payload = reply_parse(
                    content, context=context, allowed_event_ids=prompt.event_ids
                )
            except ReplyError as error:
                last_error = str(error)
                messages = messages + [
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": "Your reply could not be used: "
                        f"{last_error} Reply again with only the corrected JSON object.",
                    },
                ]
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
            f"--- reply {n} ---\n{self._scrub(raw, key)}" for n, raw in enumerate(raws, 1)
        )
