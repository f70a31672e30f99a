"""Writes of the surveillance companion: asking a worker for a stay's
checkpoints when a page finds them not computed for its present trajectory."""

from __future__ import annotations

from django.core.cache import cache
from django.utils import timezone

from jobs.outbox import outbox_send
from surveillance.selectors import checkpoints_cache_key, stay_checkpoints_cached
from windows.models import Stay

CHECKPOINTS_TASK = "surveillance.tasks.stay_checkpoints_task"
# A request lost on the way (a worker that died, a broker that lost it) is
# sent again by the first page view after this long.
QUEUED_SECONDS = 120
# The page says no worker has answered once it has waited this long (the
# longest demo stay takes a worker 1-4 s).
SLOW_SECONDS = 30


def stay_checkpoints_request(*, stay: Stay) -> dict:
    """The stay's checkpoints when computed for its present trajectory
    (``points``); else a worker is asked for them, once per QUEUED_SECONDS
    whatever the page views, and ``queued_at`` says since when the page
    waits (``slow`` past SLOW_SECONDS: no worker has answered). Computing
    them in the request took 0.8 s of CPU for the longest demo stay, 3 s and
    more of wall time on a loaded machine."""
    key = checkpoints_cache_key(stay=stay)
    points = stay_checkpoints_cached(key=key)
    if points is not None:
        return {"points": points, "queued_at": None, "slow": False}
    now = timezone.now()
    marker = f"{key}:queued"
    if cache.add(marker, now, QUEUED_SECONDS):
        outbox_send(
            task=CHECKPOINTS_TASK,
            args=[stay.pk],
            key=f"surveillance:checkpoints:{stay.pk}",
        )
    queued_at = cache.get(marker) or now
    slow = (now - queued_at).total_seconds() > SLOW_SECONDS
    return {"points": None, "queued_at": queued_at, "slow": slow}
