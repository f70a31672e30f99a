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

import functools
import json
import math
import threading
import time

import httpx

from agents.base import AgentError, ChatReply
from agents.retrying import RetryTexts, post_retrying
from oracle.backbones import http
from oracle.backbones.completion import (
    COUNT_FAILURES,
    COUNT_REPLY_BYTES,
    MAX_REPLY_BYTES,
)
from oracle.backbones.dialects import (
    CONTEXT_SIZE,
    OVERFLOW,
    ServerClient,
    first_int,
    reply_format_apply,
    response_described,
    token_count_read,
    token_count_request,
)
from oracle.backbones.endpoints import EndpointRefused, api_key_read, url_check
from oracle.prompts import TOKENS_PER_MESSAGE

CHARS_PER_TOKEN = 3.0
# The time a token count may take (a tokenizer answers in milliseconds; a
# one-slot server answers it between two completions).
COUNT_TIMEOUT_SECONDS = 30.0


class ContextLearned(AgentError):
    """The server refused a prompt as longer than its context window and
    said how long its window is, shorter than the one the budget assumed
    (llama-cpp-python's server does not report its ``n_ctx``): the client's
    budget is now the README's formula on the reported window, so the agent
    can compress the same window again to fit (agents.services retries it
    once)."""

    def __init__(self, message: str, *, context_tokens: int) -> None:
        super().__init__(message)
        self.context_tokens = context_tokens


def prompt_fits(llm, messages: list[dict], *, reserve: int = 0) -> bool:
    """Whether ``messages`` fit ``llm``'s prompt budget with ``reserve`` tokens
    to spare: by the server's tokenizer where the backbone has one, else by
    the calibrated estimate (ChatClient.fits); a client without ``fits``
    estimates. True when there is no budget."""
    budget = getattr(llm, "prompt_budget", None)
    if llm is None or not budget:
        return True
    fits = getattr(llm, "fits", None)
    if fits is not None:
        return fits(messages, reserve=reserve)
    text = "".join(m.get("content") or "" for m in messages)
    return llm.estimate_tokens(text) + 16 + reserve <= budget


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


class ChatClient(http.GuardedClientHolder, ServerClient):
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
        reply_format: str = "",
        tokenizer: str = "",
        budget_formula: str = "",
        limiter_key: str = "",
        window_tokens: int | None = None,
        reply_tokens: int = 0,
        margin_tokens: int = 0,
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
        # The Oracle's machinery (oracle.backbones.openai_compat): the reply's
        # schema in the server's dialect, prompts counted by its tokenizer,
        # the estimate following the server's own counts.
        self.reply_format = reply_format or ("json_object" if json_mode else "none")
        self.tokenizer = tokenizer or ""
        self.budget_formula = budget_formula or (
            str(prompt_budget) if prompt_budget else ""
        )
        # The figures the budget is made of, so that a window the server
        # reports gives the budget by the same formula (ContextLearned).
        self.window_tokens = window_tokens
        self.reply_tokens = int(reply_tokens or 0)
        self.margin_tokens = int(margin_tokens or 0)
        self.context_reported: int | None = None
        self.observed_ratios: list[float] = []
        self._counts: dict[int, int | None] = {}
        self.counts = 0
        # (purpose, prompt tokens as the server counted them, budget) of every
        # request answered, the last 500 (the benchmark's figures).
        self.prompt_log: list[tuple[str, int, int | None]] = []
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
            budget_text,
            calibrated_chars_per_token,
            completion_tokens,
            prompt_budget_parts,
        )

        parameters = dict(backbone.parameters or {})
        json_mode = bool(parameters.pop("json_mode", False))
        reply_format = backbone.reply_format or ""
        if json_mode and reply_format in ("", "none"):
            reply_format = "json_object"
        parts = prompt_budget_parts(backbone)
        return cls(
            base_url=backbone.base_url,
            model=backbone.model,
            api_key_env=backbone.api_key_env,
            parameters=parameters,
            timeout_seconds=backbone.timeout_seconds,
            max_retries=backbone.max_retries,
            requests_per_minute=backbone.requests_per_minute,
            max_completion_tokens=completion_tokens(backbone),
            prompt_budget=parts["budget"],
            budget_formula=budget_text(parts),
            chars_per_token=calibrated_chars_per_token(backbone.calibration),
            json_mode=(reply_format or "none") != "none",
            reply_format=reply_format or "none",
            tokenizer=backbone.tokenizer,
            limiter_key=f"backbone:{backbone.pk}",
            window_tokens=parts["window"],
            reply_tokens=parts["reply"],
            margin_tokens=parts["margin"],
        )

    def estimate_tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.ratio())

    def messages_estimate(self, messages: list[dict]) -> int:
        return sum(
            self.estimate_tokens(m.get("content") or "") + TOKENS_PER_MESSAGE
            for m in messages
        )

    def count_tokens(self, messages: list[dict]) -> int | None:
        """The prompt's tokens by the server's tokenizer (the backbone's
        ``tokenizer``), or None when it has none or the count failed; 4 tokens
        a message for the chat template's framing, as the Oracle counts."""
        if not self.tokenizer:
            return None
        key = hash(json.dumps(messages, sort_keys=True))
        if key in self._counts:
            return self._counts[key]
        asked = token_count_request(
            self.tokenizer, root=self.root_url, model=self.model, messages=messages
        )
        if asked is None:
            return None
        client = self._open()
        count = None
        try:
            reply = http.request(
                client,
                "POST",
                asked[0],
                json=asked[1],
                deadline_seconds=min(self.timeout_seconds, COUNT_TIMEOUT_SECONDS),
                max_bytes=COUNT_REPLY_BYTES,
            )
            self.counts += 1
            if reply.status == 200:
                count = token_count_read(self.tokenizer, reply.json(), messages)
        except COUNT_FAILURES:
            count = None
        self._counts[key] = count
        return count

    def prompt_tokens(self, messages: list[dict]) -> int:
        """The prompt's tokens: the server's count where it has a tokenizer,
        else the estimate."""
        counted = self.count_tokens(messages)
        return counted if counted is not None else self.messages_estimate(messages)

    def fits(self, messages: list[dict], *, reserve: int = 0) -> bool:
        """Whether the prompt fits the budget with ``reserve`` to spare. A
        prompt the estimate puts far from the budget is not counted."""
        if not self.prompt_budget:
            return True
        room = self.prompt_budget - reserve
        estimate = self.messages_estimate(messages)
        if self.tokenizer and estimate > 2 * room:
            return False
        return self.prompt_tokens(messages) <= room

    def over_budget_text(self, tokens: int, how: str) -> str:
        return (
            f"The prompt is {tokens} tokens by {how}; it does not fit its budget "
            f"of {self.budget_formula} tokens even compressed. Raise the backbone's "
            "context window or lower its reply tokens."
        )

    def _open(self) -> httpx.Client:
        if self._client is None:
            try:
                url_check(self.base_url)
            except EndpointRefused as error:
                raise AgentError(f"The backbone's URL is refused: {error}") from None
            try:
                key = api_key_read(self.api_key_env)
            except EndpointRefused as error:
                raise AgentError(str(error)) from None
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

    def _overflow(self, problem: str, reported: int | None) -> None:
        """A prompt the server refused as too long for its context window.
        When the server names a window shorter than the budget assumed, the
        budget becomes the formula on that window (ContextLearned: the
        window is compressed again and retried); otherwise the refusal is the
        window's failure, with the budget in its message."""
        assumed = self.window_tokens
        if reported and (assumed is None or reported < assumed):
            budget = max(1, reported - self.reply_tokens - self.margin_tokens)
            self.window_tokens = self.context_reported = int(reported)
            self.prompt_budget = budget
            self.budget_formula = (
                f"{budget} (context window {reported}, as the server's error "
                f"reported it, - reply {self.reply_tokens} - margin "
                f"{self.margin_tokens})"
            )
            self._counts.clear()
            raise ContextLearned(
                self._scrub(
                    f"The server's context window is {reported} tokens, not the "
                    f"{assumed or 'unknown'} the budget assumed ({problem}); the "
                    f"prompt budget is now {self.budget_formula}."
                ),
                context_tokens=int(reported),
            )
        raise AgentError(
            self._scrub(
                f"The backbone refused the prompt as longer than its context "
                f"window ({problem}); the budget was {self.budget_formula}."
            )
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "[api key]") if self._key else text

    def chat(
        self,
        messages: list[dict],
        *,
        json_reply: bool = True,
        purpose: str = "",
        schema: dict | None = None,
    ) -> ChatReply:
        """One completion. A prompt over the budget is never sent: AgentError
        with the budget's formula (the agents compress by their rule first).
        With ``json_reply`` the reply's ``schema`` goes in the server's
        dialect (a plain JSON object where it takes no schema)."""
        client = self._open()
        if self.prompt_budget:
            counted = self.count_tokens(messages)
            tokens = (
                counted if counted is not None else self.messages_estimate(messages)
            )
            if tokens > self.prompt_budget:
                how = "the server's count" if counted is not None else "the estimate"
                raise AgentError(self.over_budget_text(tokens, how))
        body = {"model": self.model, "messages": messages, **self.parameters}
        if self.max_completion_tokens:
            body["max_tokens"] = self.max_completion_tokens
        if json_reply and self.json_mode:
            reply_format_apply(body, self.reply_format, schema, name=purpose or "reply")
        payload = json.dumps(body)
        self.sent = [*self.sent[-49:], (purpose, messages)]
        return post_retrying(
            self,
            client,
            payload,
            max_bytes=MAX_REPLY_BYTES,
            texts=RetryTexts(
                fail=lambda text: AgentError(self._scrub(text)),
                cancelled="The run was cancelled.",
                address_refused=(
                    "The backbone's address was refused when connecting: {error}"
                ),
                reply_refused="The backbone's reply was refused: {error}.",
                gave_up="Gave up after {attempts} attempts: {problem}.",
            ),
            answer=functools.partial(self._answer, messages, purpose),
        )

    def _answer(
        self, messages: list[dict], purpose: str, reply, problem: str | None
    ) -> tuple[ChatReply | None, str | None]:
        """The chat reply of a 200 reply that is a chat completion (its tokens
        counted); else None and what went wrong, AgentError where a retry
        cannot help."""
        status, text, headers = 0, "", {}
        if reply is not None:
            status, text, headers = reply.status, reply.text, reply.headers
        if problem is None and status == 200:
            try:
                data = json.loads(text)
                content = data["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                problem = "the backbone's reply was not a chat completion"
            else:
                return self._counted(messages, purpose, data, content), None
        if problem is None:
            problem = response_described(status, headers, text)
            if status in (400, 413, 422) and OVERFLOW.search(text or ""):
                self._overflow(problem, first_int(CONTEXT_SIZE, text))
            if not (status == 429 or status >= 500):
                raise AgentError(
                    self._scrub(f"The backbone refused the request ({problem}).")
                )
        return None, problem

    def _counted(
        self, messages: list[dict], purpose: str, data: dict, content: str
    ) -> ChatReply:
        """The reply ``content``, its tokens (the server's usage, else
        estimated) added to the client's."""
        usage = data.get("usage") or {}
        tokens_in = usage.get("prompt_tokens")
        tokens_out = usage.get("completion_tokens")
        tokens_in = (
            int(tokens_in)
            if tokens_in is not None
            else sum(self.estimate_tokens(m.get("content") or "") for m in messages)
        )
        tokens_out = (
            int(tokens_out) if tokens_out is not None else self.estimate_tokens(content)
        )
        if usage.get("prompt_tokens"):
            chars = sum(len(m.get("content") or "") for m in messages)
            self.observed_ratios.append(chars / tokens_in)
            self.prompt_log = [
                *self.prompt_log[-499:],
                (purpose, tokens_in, self.prompt_budget),
            ]
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        return ChatReply(content, tokens_in, tokens_out)
