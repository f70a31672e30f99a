"""The agents' language model: one chat completion at a time over a configured
OpenAI-compatible backbone (oracle.models.Backbone), synchronous, as a stay's
windows are predicted one after the other.

Limits are the backbone's: its URL is checked as the Oracle's is
(oracle.backbones.endpoints.url_check, and on every connection:
oracle.backbones.http), each reply must arrive whole within the backbone's
timeout and MAX_REPLY_BYTES, its key read from the environment
variable it names, every request waits for the backbone's
``requests_per_minute`` (shared through the cache by every worker), 429, 5xx,
timeouts and connection errors are retried up to ``max_retries`` times with exponential
backoff (or the server's Retry-After), and ``max_tokens`` and the prompt's
budget come from oracle.services.tokens.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time

import httpx

from agents.base import AgentError, ChatReply
from oracle.backbones import http
from oracle.backbones.endpoints import EndpointRefused, key_env_check, url_check
from oracle.backbones.openai_compat import (
    MAX_REPLY_BYTES,
    response_described,
    retry_after_seconds,
)

CHARS_PER_TOKEN = 3.0


class RateLimiter:
    """At most ``per_minute`` requests a minute for one key (a backbone, an
    endpoint), across every worker process that shares the cache: time is cut
    into slots of ``60 / per_minute`` seconds and each request takes a free
    slot with an atomic ``cache.add``, waiting for it when it is ahead. Without
    a usable cache, requests are spaced within this process only."""

    SCAN = 64  # slots looked at per round

    _locks: dict[str, threading.Lock] = {}
    _next: dict[str, float] = {}
    _guard = threading.Lock()

    def __init__(self, key: str, per_minute: int) -> None:
        self.key = key
        self.interval = 60.0 / max(1, int(per_minute))
        with self._guard:
            self._locks.setdefault(key, threading.Lock())

    def _local(self) -> float:
        with self._locks[self.key]:
            now = time.monotonic()
            start = max(now, self._next.get(self.key, 0.0))
            self._next[self.key] = start + self.interval
        if start > now:
            time.sleep(start - now)
        return start

    def acquire(self) -> float:
        """Wait for this request's turn; returns the start of its slot."""
        try:
            from django.core.cache import cache

            timeout = int(self.interval * self.SCAN) + 60
            while True:
                now = time.time()
                first = int(now / self.interval)
                for slot in range(first, first + self.SCAN):
                    if cache.add(f"agents-rate:{self.key}:{slot}", 1, timeout):
                        wait = slot * self.interval - now
                        if wait > 0:
                            time.sleep(wait)
                        return slot * self.interval
                time.sleep(self.interval * self.SCAN / 2)
        except Exception:  # no cache configured or reachable
            return self._local()


class ChatClient:
    """agents.base.ChatClient over ``/chat/completions``."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str = "",
        parameters: dict | None = None,
        timeout_seconds: float = 120.0,
        max_retries: int = 5,
        requests_per_minute: int = 600,
        max_completion_tokens: int | None = None,
        prompt_budget: int | None = None,
        chars_per_token: float = CHARS_PER_TOKEN,
        json_mode: bool = True,
        limiter_key: str = "",
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.parameters = {
            k: v
            for k, v in dict(parameters or {}).items()
            if k not in ("model", "messages", "stream", "json_mode")
        }
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max(0, int(max_retries))
        self.max_completion_tokens = max_completion_tokens
        self.prompt_budget = prompt_budget
        self.chars_per_token = float(chars_per_token or CHARS_PER_TOKEN)
        self.json_mode = json_mode
        self.limiter = RateLimiter(limiter_key or self.base_url, requests_per_minute)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.tokens_in = 0
        self.tokens_out = 0
        self.requests = 0
        # Every prompt sent, by purpose: (purpose, messages) (kept for tests and
        # the benchmark's prompt-token figures; the last 50 only).
        self.sent: list[tuple[str, list[dict]]] = []
        self._client: httpx.Client | None = None
        self._key: str | None = None

    @classmethod
    def for_backbone(cls, backbone) -> ChatClient:
        from oracle.services.tokens import (
            calibrated_chars_per_token,
            completion_tokens,
            prompt_budget,
        )

        parameters = dict(backbone.parameters or {})
        return cls(
            base_url=backbone.base_url,
            model=backbone.model,
            api_key_env=backbone.api_key_env,
            parameters=parameters,
            timeout_seconds=backbone.timeout_seconds,
            max_retries=backbone.max_retries,
            requests_per_minute=backbone.requests_per_minute,
            max_completion_tokens=completion_tokens(backbone),
            prompt_budget=prompt_budget(backbone),
            chars_per_token=calibrated_chars_per_token(backbone.calibration),
            json_mode=(backbone.reply_format or "none") != "none",
            limiter_key=f"backbone:{backbone.pk}",
        )

    @property
    def url(self) -> str:
        if self.base_url.endswith("/chat/completions"):
            return self.base_url
        return f"{self.base_url}/chat/completions"

    def estimate_tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def _open(self) -> httpx.Client:
        if self._client is None:
            try:
                url_check(self.base_url)
            except EndpointRefused as error:
                raise AgentError(f"The backbone's URL is refused: {error}") from None
            key = ""
            if self.api_key_env:
                try:
                    key_env_check(self.api_key_env)
                except EndpointRefused as error:
                    raise AgentError(str(error)) from None
                key = os.environ.get(self.api_key_env, "")
                if not key:
                    raise AgentError(
                        f"The environment variable {self.api_key_env} that should "
                        "hold the API key is not set in the worker's environment."
                    )
            headers = {"Content-Type": "application/json"}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._key = key
            self._client = http.guarded_client(
                purpose=http.Purpose.BACKBONE,
                timeout_seconds=self.timeout_seconds,
                headers=headers,
                connections=1,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "[api key]") if self._key else text

    def chat(
        self, messages: list[dict], *, json_reply: bool = True, purpose: str = ""
    ) -> ChatReply:
        client = self._open()
        body = {"model": self.model, "messages": messages, **self.parameters}
        if self.max_completion_tokens:
            body["max_tokens"] = self.max_completion_tokens
        if json_reply and self.json_mode:
            body["response_format"] = {"type": "json_object"}
        payload = json.dumps(body)
        self.sent = [*self.sent[-49:], (purpose, messages)]
        retry = 0
        while True:
            self.limiter.acquire()
            self.requests += 1
            retry_after = None
            status, text, headers = 0, "", {}
            try:
                reply = http.request(
                    client,
                    "POST",
                    self.url,
                    content=payload,
                    deadline_seconds=self.timeout_seconds,
                    max_bytes=MAX_REPLY_BYTES,
                )
                status, text, headers = reply.status, reply.text, reply.headers
                retry_after = retry_after_seconds(headers.get("retry-after"))
                problem = None
            except http.AddressRefused as error:
                raise AgentError(
                    f"The backbone's address was refused when connecting: {error}"
                ) from None
            except http.ReplyRefused as error:
                raise AgentError(
                    f"The backbone's reply was refused: {error}."
                ) from None
            except httpx.TimeoutException:
                problem = (
                    f"no complete reply within {self.timeout_seconds:g} s "
                    "(connection, headers and body)"
                )
            except httpx.HTTPError as error:
                problem = f"connection error ({type(error).__name__})"
            if problem is None and status == 200:
                try:
                    data = json.loads(text)
                    content = data["choices"][0]["message"]["content"] or ""
                except (ValueError, KeyError, IndexError, TypeError):
                    problem = "the backbone's reply was not a chat completion"
                else:
                    usage = data.get("usage") or {}
                    tokens_in = usage.get("prompt_tokens")
                    tokens_out = usage.get("completion_tokens")
                    tokens_in = (
                        int(tokens_in)
                        if tokens_in is not None
                        else sum(
                            self.estimate_tokens(m.get("content") or "")
                            for m in messages
                        )
                    )
                    tokens_out = (
                        int(tokens_out)
                        if tokens_out is not None
                        else self.estimate_tokens(content)
                    )
                    self.tokens_in += tokens_in
                    self.tokens_out += tokens_out
                    return ChatReply(content, tokens_in, tokens_out)
            if problem is None:
                problem = response_described(status, headers, text)
                if not (status == 429 or status >= 500):
                    raise AgentError(
                        self._scrub(f"The backbone refused the request ({problem}).")
                    )
            if retry >= self.max_retries:
                raise AgentError(
                    self._scrub(f"Gave up after {retry + 1} attempts: {problem}.")
                )
            ceiling = min(self.backoff_max, self.backoff_base * (2**retry))
            delay = retry_after if retry_after is not None else ceiling
            time.sleep(min(delay, 60.0) * random.uniform(0.5, 1.0))
            retry += 1
