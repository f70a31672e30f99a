"""The runner in-process: each stay's memory carried from window to window in
time order; a stay interrupted mid-way restarts at its first window without a
prediction, with the memory it had there; an agent's own bug fails its window,
not the run; a stay that failed fails the run, which resumes."""

import pytest

from agents.base import Agent
from agents.models import (
    AgentPrediction,
    AgentStayState,
    RunState,
    StayState,
)
from agents.services import (
    agent_run_resume,
    agent_run_settle,
    agent_stay_work,
)
from tests.agents.helpers import run_queued

pytestmark = pytest.mark.django_db


class Counting(Agent):
    """Counts the stay's windows in its memory and records what it saw."""

    name = "counting"
    prompt_version = "count-v1"
    uses_llm = False
    seen: list = []

    def __init__(self, *, interrupt_at=None, crash_at=None):
        super().__init__(None)
        self.interrupt_at, self.crash_at = interrupt_at, crash_at

    def predict(self, ctx, memory):
        Counting.seen.append((ctx.window_id, dict(memory)))
        if ctx.window_id == self.interrupt_at:
            # Another worker takes the stay over while this one works.
            AgentStayState.objects.filter(stay_id=ctx.stay_id).update(lease="other")
        if ctx.window_id == self.crash_at:
            raise KeyError("a bug")
        count = memory.get("count", 0) + 1
        return {"status": "stable", "acute_problems": [f"note {count}"]}, {
            "count": count,
            "last_window": ctx.window_id,
        }


@pytest.fixture
def run(fake_backbone, tiny_release, admin_user):
    Counting.seen = []
    return run_queued(user=admin_user, release=tiny_release, backbone=fake_backbone)


def stay_a(run, tiny_stays):
    return AgentStayState.objects.get(run=run, stay=tiny_stays["stays"][0])


def test_memory_is_carried_and_an_interrupted_stay_resumes(run, tiny_stays):
    a0, a1 = (w.pk for w in tiny_stays["windows"]["A"])
    state = stay_a(run, tiny_stays)
    outcome = agent_stay_work(
        stay_state_id=state.pk, agent_factory=lambda r: Counting(interrupt_at=a1)
    )
    assert outcome == "lost"
    # A0 was saved with its memory; A1's prediction was not (lease lost).
    assert list(
        AgentPrediction.objects.filter(run=run).values_list("window_id", flat=True)
    ) == [a0]
    state.refresh_from_db()
    assert state.memory == {"count": 1, "last_window": a0}
    # The reaper would queue it again; the next worker starts at A1 with
    # A0's memory.
    AgentStayState.objects.filter(pk=state.pk).update(state=StayState.QUEUED, lease="")
    Counting.seen = []
    assert (
        agent_stay_work(stay_state_id=state.pk, agent_factory=lambda r: Counting())
        == "done"
    )
    assert Counting.seen == [(a1, {"count": 1, "last_window": a0})]
    state.refresh_from_db()
    assert state.memory["count"] == 2 and state.windows_done == 2
    predictions = AgentPrediction.objects.filter(run=run).order_by("window_id")
    assert [p.prediction["acute_problems"] for p in predictions] == [
        ["note 1"],
        ["note 2"],
    ]


def test_an_agents_bug_fails_its_window_only(run, tiny_stays):
    a0, a1 = (w.pk for w in tiny_stays["windows"]["A"])
    state = stay_a(run, tiny_stays)
    agent_stay_work(
        stay_state_id=state.pk, agent_factory=lambda r: Counting(crash_at=a0)
    )
    errors = dict(
        AgentPrediction.objects.filter(run=run).values_list("window_id", "error")
    )
    assert errors[a0] == "KeyError: 'a bug'" and errors[a1] == ""
    run.refresh_from_db()
    assert run.windows_failed == 1 and run.windows_done == 2


def test_a_failed_stay_fails_the_run_which_resumes(run, tiny_stays, admin_user):
    states = list(AgentStayState.objects.filter(run=run))
    for state in states[1:]:
        agent_stay_work(stay_state_id=state.pk, agent_factory=lambda r: Counting())
    AgentStayState.objects.filter(pk=states[0].pk).update(
        state=StayState.FAILED, error="its workers kept dying"
    )
    run.refresh_from_db()
    assert agent_run_settle(run=run).state == RunState.FAILED
    assert "its workers kept dying" in run.error
    resumed = agent_run_resume(user=admin_user, run=run)
    assert resumed.state == RunState.RUNNING and not resumed.error
    states[0].refresh_from_db()
    assert states[0].state == StayState.QUEUED
    agent_stay_work(stay_state_id=states[0].pk, agent_factory=lambda r: Counting())
    run.refresh_from_db()
    assert run.state == RunState.DONE and run.submission.prediction_count == 4


def test_the_rate_limit_is_shared_through_the_cache(settings, monkeypatch):
    """Two limiters of one key (two workers) keep together to its rate: 20
    requests at 600 a minute get 20 distinct slots 0.1 s apart, whichever
    limiter took them (the waits themselves are skipped)."""
    import threading
    import time

    from agents import llm

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    }
    monkeypatch.setattr(llm.time, "sleep", lambda seconds: None)
    key = f"test-{time.time()}"
    one, two = llm.RateLimiter(key, 600), llm.RateLimiter(key, 600)
    slots: list[float] = []

    def take(limiter):
        for _ in range(10):
            slots.append(limiter.acquire())

    threads = [threading.Thread(target=take, args=(lim,)) for lim in (one, two)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots.sort()
    assert len(set(slots)) == 20
    gaps = [b - a for a, b in zip(slots, slots[1:])]
    assert min(gaps) >= 0.1 - 1e-6
    # Taken in the cache, where every worker process sees them.
    from django.core.cache import cache

    assert all(cache.get(f"agents-rate:{key}:{round(s / 0.1)}") == 1 for s in slots)
