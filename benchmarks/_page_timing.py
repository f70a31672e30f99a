"""A page timed as the page benchmarks time it: Django's test Client answering
(middleware, view, queries, template; no network, no browser rendering), after
3 warm-up requests, with its query count, its size, and each request's wall and
CPU milliseconds (this process's: the database server's CPU is not in it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class PageTimes:
    walls: list[float]  # milliseconds a request
    cpus: list[float]  # milliseconds of this process's CPU a request
    queries: int
    size: int  # bytes of the answer, as the view wrote it


def page_timed(
    client,
    url: str,
    requests: int,
    *,
    before: Callable[[], None] | None = None,
    ok: tuple[int, ...] = (200,),
    **headers,
) -> PageTimes:
    """``requests`` timed requests of ``url`` by ``client`` (with ``headers``,
    as ``Client.get`` takes them), after 3 warm-up ones and one whose queries
    and bytes are counted; ``before`` runs before each (a page's first view
    empties a cache). Every counted or timed answer's status is in ``ok``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def ready() -> None:
        if before:
            before()

    for _ in range(3):
        ready()
        client.get(url, **headers)
    ready()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **headers)
    # Counted now: the next request's request_started signal empties the log.
    queries = len(ctx.captured_queries)
    assert response.status_code in ok, (url, response.status_code)
    size = len(response.content)
    walls, cpus = [], []
    for _ in range(requests):
        ready()
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.get(url, **headers)
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        assert response.status_code in ok, (url, response.status_code)
    return PageTimes(walls, cpus, queries, size)
