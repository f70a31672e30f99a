"""Rate limits that hold when many clients hit several web processes at once.

DRF's own throttles keep a list of request times per client in the cache and
write it back after reading it, so concurrent requests overwrite each other's
entries (16 concurrent clients got 452 of 600 downloads through a 300/min
limit). Here each request is one atomic ``incr`` of a counter per client, scope
and minute (Redis INCR in production), and a sliding window is estimated from
the current and the previous counter, as Cloudflare's rate limiter does: at most
the rate passes in any window, give or take the share of the previous window's
requests that the estimate weighs out.
"""

from __future__ import annotations

import time

from django.core.cache import caches
from rest_framework.throttling import ScopedRateThrottle

_DURATIONS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def scope_rate(scope: str) -> str | None:
    """The rate of a scope, for a view outside DRF (the web upload)."""
    return ScopedRateThrottle.THROTTLE_RATES.get(scope)


def rate_parse(rate: str) -> tuple[int, int]:
    """'300/min' -> (300, 60), as DRF reads rates."""
    count, period = rate.split("/")
    return int(count), _DURATIONS[period[0]]


def _incr(cache, key: str, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 0, timeout=timeout)
        return cache.incr(key)


def rate_limit_hit(*, scope: str, ident: str, rate: str) -> float | None:
    """Counts one request of ``ident`` in ``scope``. Returns None when it is
    within ``rate``, else the seconds to wait (the request is then not
    counted, so a client that keeps trying is not locked out for longer)."""
    allowed, duration = rate_parse(rate)
    cache = caches["default"]
    now = time.time()
    bucket = int(now // duration)
    key = f"ratelimit:{scope}:{ident}:{bucket}"
    count = _incr(cache, key, timeout=2 * duration + 5)
    previous = cache.get(f"ratelimit:{scope}:{ident}:{bucket - 1}") or 0
    elapsed = now / duration - bucket
    if previous * (1 - elapsed) + count <= allowed:
        return None
    cache.decr(key)
    if count > allowed:
        return (bucket + 1) * duration - now
    # Until the previous window's weighed share has fallen enough.
    return max(1.0, duration * (1 - (allowed - count) / previous - elapsed))


class AtomicScopedRateThrottle(ScopedRateThrottle):
    """DRF's scoped throttle (the view's ``throttle_scope``, rates from
    ``DEFAULT_THROTTLE_RATES`` as DRF keeps them in ``THROTTLE_RATES``, per
    user or else per address) on atomic counters."""

    def allow_request(self, request, view):
        self.scope = getattr(view, self.scope_attr, None)
        rates = self.THROTTLE_RATES
        if not self.scope or not rates.get(self.scope):
            return True
        if request.user and request.user.is_authenticated:
            ident = f"user{request.user.pk}"
        else:
            ident = f"addr{self.get_ident(request)}"
        self._wait = rate_limit_hit(
            scope=self.scope, ident=ident, rate=rates[self.scope]
        )
        return self._wait is None

    def wait(self):
        return getattr(self, "_wait", None)
