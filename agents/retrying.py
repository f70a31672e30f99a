"""The retry loop of an agent's POST to its server (a chat backbone, a
researcher's endpoint): rate-limited, refused addresses and replies never
retried, 429 and 5xx replies retried with jittered exponential backoff or the
server's Retry-After. Each caller says what a reply means and, in its own
words, why it stopped."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oracle.backbones import http
from oracle.backbones.dialects import retry_after_seconds


@dataclass(frozen=True)
class RetryTexts:
    """Why a retrying POST stopped, as ``fail(text)`` errors: ``cancelled``;
    ``address_refused`` and ``reply_refused`` with ``{error}``; ``gave_up``
    with ``{attempts}`` and ``{problem}``."""

    fail: Callable[[str], Exception]
    cancelled: str
    address_refused: str
    reply_refused: str
    gave_up: str


def post_retrying(
    agent,
    client,
    content,
    *,
    max_bytes: int,
    texts: RetryTexts,
    answer: Callable[[Any, str | None], tuple[Any, str | None]],
) -> Any:
    """POST ``content`` to ``agent.url`` until ``answer(reply, problem)`` (the
    reply, None where none came, and what went wrong) returns ``(result,
    None)``: the result. ``answer`` raises for a reply not worth retrying and
    returns ``(None, problem)`` for one that is. ``agent`` holds ``limiter``,
    ``aborted``, ``requests``, ``url``, ``timeout_seconds``, ``max_retries``,
    ``backoff_base`` and ``backoff_max``."""
    retry = 0
    while True:
        agent.limiter.acquire()
        if agent.aborted:
            raise texts.fail(texts.cancelled)
        agent.requests += 1
        try:
            reply, problem = http.post_or_problem(
                client,
                agent.url,
                content=content,
                deadline_seconds=agent.timeout_seconds,
                max_bytes=max_bytes,
            )
        except http.AddressRefused as error:
            raise texts.fail(texts.address_refused.format(error=error)) from None
        except http.ReplyRefused as error:
            raise texts.fail(texts.reply_refused.format(error=error)) from None
        retry_after = None
        if reply is not None:
            retry_after = retry_after_seconds(reply.headers.get("retry-after"))
        result, problem = answer(reply, problem)
        if problem is None:
            return result
        if agent.aborted:
            raise texts.fail(texts.cancelled)
        if retry >= agent.max_retries:
            raise texts.fail(texts.gave_up.format(attempts=retry + 1, problem=problem))
        ceiling = min(agent.backoff_max, agent.backoff_base * (2**retry))
        delay = retry_after if retry_after is not None else ceiling
        time.sleep(min(delay, 60.0) * random.uniform(0.5, 1.0))
        retry += 1
