"""A researcher's agent behind an HTTP endpoint (online evaluation).

Per window the runner POSTs the window's context as JSON in a session of the
stay (agents.sessions, protocol realicu-online-v2: the first payload of a
session holds the stay's bedside history up to its window, each later one
in streamed mode only what is new since the previous window; in full mode
every payload is the window's whole context: agents.base.WindowContext.payload,
the bedside events strictly before the window's end, the stay's static facts,
the earlier windows' ids and times) and reads the reply in the release
prediction line's shape (``status``, ``acute_problems``,
``recommended_actions``). Nothing else is sent, whatever the endpoint asks for:
its reply is only read for those three fields, redirects are not followed, and
the payload is built from the context alone, so the endpoint never receives
an event at or after the window's end.

The URL is restricted by the address policy for endpoints
(oracle.backbones.endpoints: a public address, unless the operator allowed its
network), checked again on every connection, to the address actually
connected (oracle.backbones.http). A request and its reply must be done
within the endpoint's ``timeout_seconds`` in total, and a reply longer than
MAX_REPLY_BYTES is refused unread (the connection closed at the limit). 429,
5xx, timeouts and connection errors are retried up to ``max_retries`` times
with backoff; requests keep to ``requests_per_minute``. A request abandoned
(timed out, or its run cancelled: ``abort``) has its connection closed, which
is how a server learns to stop working on it.

Whatever went wrong before a reply with HTTP 200 and a JSON body was read
(refused, reset, timed out, an error status, too long, not JSON) is recorded
as one and the same sentence, UNREACHABLE: the researcher learns nothing that
would tell a closed port from a filtered one or from a server answering with an
error. What happened is kept for admins (AgentError.detail). A JSON reply that
is not a prediction is that window's error, with a message saying what is
wrong. HTTP 409 is the endpoint's word for a session it cannot follow
(agents.sessions.GAP_STATUS): the window is sent again in a new session.
"""

from __future__ import annotations

import json

import httpx

from agents.base import Agent, AgentError, WindowContext
from agents.llm import RateLimiter
from agents.models import ContextMode
from agents.prompts import prediction_normalise
from agents.retrying import RetryTexts, post_retrying
from agents.sessions import GAP_STATUS, PROTOCOL_VERSION, StaySession
from oracle.backbones import http
from oracle.backbones.dialects import response_described
from oracle.backbones.endpoints import EndpointRefused, Purpose, url_check

# Replies longer than this are refused unread.
MAX_REPLY_BYTES = 1_000_000
UNREACHABLE = (
    "The endpoint gave no usable reply: it could not be reached, or it did not "
    f"answer with HTTP 200 and a JSON body of at most {MAX_REPLY_BYTES:,} bytes "
    "within its timeout."
)


class _Gap(Exception):
    """The endpoint answered GAP_STATUS: it cannot follow the session."""


class RemoteAgent(http.GuardedClientHolder, Agent):
    name = "endpoint"
    prompt_version = PROTOCOL_VERSION
    description = "A researcher's agent behind an HTTP endpoint."
    uses_llm = False
    backoff_max = 30.0  # the longest wait between attempts, Retry-After aside

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float = 30.0,
        max_retries: int = 3,
        requests_per_minute: int = 600,
        backoff_base: float = 0.5,
        context_mode: str = ContextMode.STREAMED,
        **options,
    ) -> None:
        super().__init__(None, **options)
        if context_mode not in ContextMode.values:
            raise ValueError(f"Unknown context mode {context_mode!r}.")
        self.context_mode = context_mode
        # The open session of each stay (agents.sessions); a new agent (a
        # stay started or resumed by a worker) opens new ones.
        self.sessions: dict[int, StaySession] = {}
        self.url = url
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max(0, int(max_retries))
        self.limiter = RateLimiter(f"endpoint:{url}", requests_per_minute)
        self.backoff_base = backoff_base
        self.requests = 0
        self.aborted = False
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

    def _session(self, ctx: WindowContext, *, new: bool = False) -> dict:
        """The window's payload in the stay's open session, or in a new one
        when there is none, ``new`` is asked, or the open one cannot go on."""
        session = None if new else self.sessions.get(ctx.stay_id)
        payload = session.payload(ctx) if session is not None else None
        if payload is None:
            session = StaySession(stay_id=ctx.stay_id, mode=self.context_mode)
            self.sessions[ctx.stay_id] = session
            payload = session.payload(ctx)
        return payload

    def _post_in_session(self, client: httpx.Client, ctx: WindowContext):
        """The reply to the window's payload in its stay's session. A session
        the endpoint lost is opened again, once; AgentError (UNREACHABLE) when
        even a session's first payload is refused."""
        payload = self._session(ctx)
        try:
            try:
                return self._post(client, payload)
            except _Gap:
                if payload["sequence"] == 0:
                    raise
                # The endpoint lost the session: the window again, in a new
                # one with the whole history.
                return self._post(client, self._session(ctx, new=True))
        except _Gap:
            raise AgentError(
                UNREACHABLE,
                detail=f"HTTP {GAP_STATUS} to the first payload of a session",
            ) from None

    def predict(self, ctx: WindowContext, memory: dict) -> tuple[dict, dict]:
        client = self._open()
        try:
            data = self._post_in_session(client, ctx)
        except AgentError:
            # Whether the endpoint holds this window's events is not known:
            # the stay's next window opens a new session with its history.
            self.sessions.pop(ctx.stay_id, None)
            raise
        try:
            return prediction_normalise(data), memory
        except AgentError as error:
            raise AgentError(
                f"The endpoint's reply is not a prediction: {error}."
            ) from None

    def _post(self, client: httpx.Client, payload: dict):
        """The payload POSTed, with retries; the reply's JSON. AgentError
        (UNREACHABLE) when no usable reply came, _Gap on GAP_STATUS."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return post_retrying(
            self,
            client,
            body,
            max_bytes=MAX_REPLY_BYTES,
            texts=RetryTexts(
                fail=lambda text: AgentError(UNREACHABLE, detail=text),
                cancelled="the run was cancelled",
                address_refused="{error}",
                reply_refused="HTTP reply: {error}",
                gave_up="gave up after {attempts} attempts: {problem}",
            ),
            answer=_answer,
        )


def _answer(reply, problem: str | None) -> tuple[object, str | None]:
    """A 200 reply's JSON; else None and what went wrong to retry (429, 5xx,
    no reply), AgentError (UNREACHABLE) or _Gap where a retry cannot help."""
    if reply is None:
        return None, problem
    problem = response_described(reply.status, reply.headers, "")
    if reply.status == 200:
        try:
            return reply.json(), None
        except ValueError:
            raise AgentError(
                UNREACHABLE, detail=f"{problem}: the body is not JSON"
            ) from None
    if reply.status == GAP_STATUS:
        raise _Gap()
    if not (reply.status == 429 or reply.status >= 500):
        raise AgentError(UNREACHABLE, detail=problem)
    return None, problem
