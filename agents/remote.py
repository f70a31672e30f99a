"""A researcher's agent behind an HTTP endpoint (online evaluation).

Per window the runner POSTs the window's context as JSON
(agents.base.WindowContext.payload: the bedside events strictly before the
window's end, the stay's static facts, the earlier windows' ids and times) and
reads the reply in the release prediction line's shape (``status``,
``acute_problems``, ``recommended_actions``). Nothing else is sent, whatever the
endpoint asks for: its reply is only read for those three fields, redirects
are not followed, and the payload is built from the context alone, so the
endpoint never receives an event at or after the window's end.

The URL is restricted by the address policy for endpoints
(oracle.backbones.endpoints: a public address, unless the operator allowed its
network), checked again on every connection, to the address actually
connected (oracle.backbones.http). A request and its reply must be done
within the endpoint's ``timeout_seconds`` in total, and a reply longer than
MAX_REPLY_BYTES is refused unread (the connection closed at the limit). 429,
5xx, timeouts and connection errors are retried up to ``max_retries`` times
with backoff; requests keep to ``requests_per_minute``.

Whatever went wrong before a reply with HTTP 200 and a JSON body was read
(refused, reset, timed out, an error status, too long, not JSON) is recorded
as one and the same sentence, UNREACHABLE: the researcher learns nothing that
would tell a closed port from a filtered one or from a server answering with an
error. What happened is kept for admins (AgentError.detail). A JSON reply that
is not a prediction is that window's error, with a message saying what is
wrong.
"""

from __future__ import annotations

import json
import random
import time

import httpx

from agents.base import Agent, AgentError, WindowContext
from agents.llm import RateLimiter
from agents.prompts import prediction_normalise
from oracle.backbones import http
from oracle.backbones.endpoints import EndpointRefused, Purpose, url_check
from oracle.backbones.openai_compat import response_described, retry_after_seconds

# Replies longer than this are refused unread.
MAX_REPLY_BYTES = 1_000_000
PROTOCOL_VERSION = "realicu-online-v1"
UNREACHABLE = (
    "The endpoint gave no usable reply: it could not be reached, or it did not "
    f"answer with HTTP 200 and a JSON body of at most {MAX_REPLY_BYTES:,} bytes "
    "within its timeout."
)


class RemoteAgent(Agent):
    name = "endpoint"
    prompt_version = PROTOCOL_VERSION
    description = "A researcher's agent behind an HTTP endpoint."
    uses_llm = False

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float = 30.0,
        max_retries: int = 3,
        requests_per_minute: int = 600,
        backoff_base: float = 0.5,
        **options,
    ) -> None:
        super().__init__(None, **options)
        self.url = url
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max(0, int(max_retries))
        self.limiter = RateLimiter(f"endpoint:{url}", requests_per_minute)
        self.backoff_base = backoff_base
        self.requests = 0
        self._client: httpx.Client | None = None

    def _open(self) -> httpx.Client:
        if self._client is None:
            try:
                url_check(self.url, purpose=Purpose.ENDPOINT)
            except EndpointRefused as error:
                raise AgentError(f"The endpoint's URL is refused: {error}") from None
            self._client = http.guarded_client(
                purpose=Purpose.ENDPOINT,
                timeout_seconds=self.timeout_seconds,
                headers={
                    "Content-Type": "application/json",
                    "X-RealICU-Protocol": PROTOCOL_VERSION,
                },
                connections=1,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def predict(self, ctx: WindowContext, memory: dict) -> tuple[dict, dict]:
        client = self._open()
        body = json.dumps(ctx.payload(), ensure_ascii=False).encode("utf-8")
        retry = 0
        while True:
            self.limiter.acquire()
            self.requests += 1
            retry_after = None
            try:
                reply = http.request(
                    client,
                    "POST",
                    self.url,
                    content=body,
                    deadline_seconds=self.timeout_seconds,
                    max_bytes=MAX_REPLY_BYTES,
                )
            except http.AddressRefused as error:
                raise AgentError(UNREACHABLE, detail=str(error)) from None
            except http.ReplyRefused as error:
                raise AgentError(UNREACHABLE, detail=f"HTTP reply: {error}") from None
            except httpx.TimeoutException:
                problem = (
                    f"no complete reply within {self.timeout_seconds:g} s "
                    "(connection, headers and body)"
                )
            except httpx.HTTPError as error:
                problem = f"connection error ({type(error).__name__})"
            else:
                retry_after = retry_after_seconds(reply.headers.get("retry-after"))
                problem = response_described(reply.status, reply.headers, "")
                if reply.status == 200:
                    try:
                        data = reply.json()
                    except ValueError:
                        raise AgentError(
                            UNREACHABLE, detail=f"{problem}: the body is not JSON"
                        ) from None
                    try:
                        return prediction_normalise(data), memory
                    except AgentError as error:
                        raise AgentError(
                            f"The endpoint's reply is not a prediction: {error}."
                        ) from None
                if not (reply.status == 429 or reply.status >= 500):
                    raise AgentError(UNREACHABLE, detail=problem)
            if retry >= self.max_retries:
                raise AgentError(
                    UNREACHABLE,
                    detail=f"gave up after {retry + 1} attempts: {problem}",
                )
            ceiling = min(30.0, self.backoff_base * (2**retry))
            delay = retry_after if retry_after is not None else ceiling
            time.sleep(min(delay, 60.0) * random.uniform(0.5, 1.0))
            retry += 1
