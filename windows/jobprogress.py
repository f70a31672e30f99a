"""Live progress of long jobs (imports, and later Oracle runs and release builds).

A job writes its rows inside its own transaction, which a page cannot see until
it commits; the progress therefore goes through the cache (Redis in production,
files under var/ in the embedded mode), shared by the web and worker processes.
"""
from __future__ import annotations

from django.core.cache import cache

TTL_SECONDS = 24 * 3600


def _key(kind: str, pk: int) -> str:
    return f"progress:{kind}:{pk}"


def progress_set(*, kind: str, pk: int, done: int, total: int, label: str = "") -> None:
    cache.set(_key(kind, pk), {"done": done, "total": total, "label": label[:255]},
              TTL_SECONDS)


def progress_get(*, kind: str, pk: int) -> dict | None:
    return cache.get(_key(kind, pk))


def progress_clear(*, kind: str, pk: int) -> None:
    cache.delete(_key(kind, pk))
