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
import queue
import threading
from collections.abc import Callable

from oracle.backbones import http
from oracle.backbones.base import BackboneResult, WindowContext
from oracle.backbones.completion import (
    COUNT_REPLY_BYTES,
    MAX_REPLY_BYTES,
    CompletionRequests,
    RateLimiter,
    RequestEvent,
    _Overflow,
    _RequestFailed,
    _Stopped,
    _Usage,
)
from oracle.backbones.dialects import (
    ServerClient,
    reply_format_apply,
    response_described,
    retry_after_seconds,
)
from oracle.backbones.endpoints import EndpointRefused, api_key_read, url_check
from oracle.backbones.fitting import PromptFitting
from oracle.prompts import (
    CHARS_PER_TOKEN,
    PromptBudgetError,
    messages_chars,
    messages_tokens,
    tokens_estimate,
)
from oracle.schema import ReplyError, reply_parse, reply_schema_for

# Keys of ``parameters`` that the backbone itself sets.
_RESERVED = {"model", "messages", "stream", "n"}
# How often the event loop looks whether the run asked to stop.
STOP_POLL_SECONDS = 0.1


async def _abandon_when_stopped(stop: threading.Event, tasks) -> None:
    """Once the run asks to stop, cancel its windows' tasks: a request in
    flight is abandoned and its connection closed (httpx closes a response
    not read to its end), so the server stops generating for it; a window
    cancelled gets no result and is labelled again when the run resumes."""
    while not stop.is_set():
        await asyncio.sleep(STOP_POLL_SECONDS)
    for task in tasks:
        task.cancel()


class BackboneConfigError(ValueError):
    """The backbone cannot send anything as configured (e.g. its key's
    environment variable is not set)."""


class OpenAICompatBackbone(PromptFitting, CompletionRequests, ServerClient):
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

    # --- the sync interface -----------------------------------------------------

    def _api_key(self) -> str:
        try:
            return api_key_read(self.api_key_env)
        except EndpointRefused as error:
            raise BackboneConfigError(str(error)) from None

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
        every half second; once it is True no new request starts, requests in
        flight are abandoned (their connections closed, so the server stops
        generating), and windows not finished get no result (a run picks them
        up again). Raises
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

            tasks = [asyncio.ensure_future(one(c)) for c in contexts]
            watcher = asyncio.ensure_future(_abandon_when_stopped(stop, tasks))
            try:
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            finally:
                watcher.cancel()
            for outcome in outcomes:
                if isinstance(outcome, BaseException) and not isinstance(
                    outcome, asyncio.CancelledError
                ):
                    raise outcome

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

        raws: list[str] = []

        def failed(reason: str) -> BackboneResult:
            # The replies so far go with the reason; neither shows the key.
            return result(
                ok=False,
                error=self._scrub(reason, key),
                raw_response=self._raw(raws, key),
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
                    return failed(
                        f"The prompt does not fit the model's context window even "
                        f"compressed further: {error}"
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
                return failed(str(error))
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
        return failed(
            f"The reply failed validation twice (after one repair request): "
            f"{last_error}"
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


# Names other modules import from here (the machinery's home before it was
# split into dialects, completion and fitting).
__all__ = [
    "COUNT_REPLY_BYTES",
    "MAX_REPLY_BYTES",
    "BackboneConfigError",
    "OpenAICompatBackbone",
    "RateLimiter",
    "RequestEvent",
    "reply_format_apply",
    "response_described",
    "retry_after_seconds",
]
