"""Agent runs: start, the per-stay job, cancel, and the scoring at the end.

A run over a release has one job per stay (``AgentStayState``, jobs kind
``agent-stay``), sent to Celery through the outbox when the run starts, so the
stays run in parallel on as many workers as there are while each stay's
windows go in time order. A stay's worker holds it with a lease and a
heartbeat (jobs.leases); each window's prediction is saved with the stay's new
memory and the run's counters in one transaction, so a stay whose worker died
is re-queued by the reaper and restarts from its first window without a
prediction, with the memory it had there. The run's heartbeat is written by
its stays' workers.

When the last stay finishes, the run's predictions (windows whose agent
failed are left out) become a public baseline submission of the release
(exports.Submission with ``baseline`` naming agent, prompt version and
backbone), scored by exports.services.submission_score as any other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import user_is_admin, user_is_researcher
from agents.base import Agent, AgentError
from agents.context import stay_contexts
from agents.finishing import agent_run_finish, agent_run_settle
from agents.models import (
    OPEN_RUN_STATES,
    AgentPrediction,
    AgentRun,
    AgentStayState,
    ContextMode,
    OnlineEndpoint,
    RunState,
    StayState,
)
from agents.prompts import prediction_normalise
from agents.reference import agent_class
from exports.models import Release, ReleaseWindow
from jobs.leases import JobLeaseLost, job_claim, job_heartbeat, job_release
from jobs.outbox import outbox_send
from oracle.egress import egress_guard
from oracle.services.runs import backbone_endpoint_check

logger = logging.getLogger(__name__)

STAY_TASK = "agents.tasks.agent_stay_task"
ENDPOINT_AGENT = "endpoint"


# Starting -------------------------------------------------------------------


def _release_ready(release: Release) -> None:
    from exports.services import release_require_ready

    release_require_ready(release)


def _create_run(*, user, release: Release, enqueue: bool = True, **fields) -> AgentRun:
    rows = list(
        ReleaseWindow.objects.filter(release=release)
        .order_by("stay_id", "hours_since_admit", "window_id")
        .values_list("stay_id", "window_id")
    )
    if not rows:
        raise ValidationError(f"{release} has no windows to predict.")
    per_stay: dict[int, int] = {}
    for stay_id, _ in rows:
        per_stay[stay_id] = per_stay.get(stay_id, 0) + 1
    with transaction.atomic():
        run = AgentRun.objects.create(
            release=release,
            created_by=user,
            stays_total=len(per_stay),
            windows_total=len(rows),
            progress_total=len(rows),
            **fields,
        )
        AgentStayState.objects.bulk_create(
            AgentStayState(run=run, stay_id=stay_id, windows_total=count)
            for stay_id, count in per_stay.items()
        )
        for state in AgentStayState.objects.filter(run=run).only("pk"):
            if not enqueue:
                break
            outbox_send(
                task=STAY_TASK, args=[state.pk], key=f"job:agent-stay:{state.pk}"
            )
    return run


def agent_run_start(
    *, user, release: Release, agent: str, backbone, enqueue: bool = True
) -> AgentRun:
    """An admin starts a reference agent over a ready release on a backbone."""
    if not user_is_admin(user):
        raise PermissionDenied("Only an admin can start a reference agent run.")
    _release_ready(release)
    try:
        cls = agent_class(agent)
    except ValueError as error:
        raise ValidationError(str(error)) from None
    if cls.uses_llm:
        if backbone is None:
            raise ValidationError("Choose the backbone the agent runs on.")
        if backbone.kind != "openai":
            raise ValidationError(
                f"{backbone.name} is not an OpenAI-compatible backbone; agents "
                "need a language model."
            )
        backbone_endpoint_check(backbone)
    egress_guard(
        actor=user,
        purpose="agent_run",
        data=release,
        backbone=backbone if cls.uses_llm else None,
    )
    return _create_run(
        user=user,
        release=release,
        agent=agent,
        backbone=backbone,
        prompt_version=cls.prompt_version,
        enqueue=enqueue,
    )


def _endpoint_url_usable(url: str) -> None:
    """The address policy for online-evaluation endpoints, at registering and
    again when a run starts or resumes (oracle.backbones.endpoints)."""
    from oracle.backbones.endpoints import EndpointRefused, Purpose, url_check

    try:
        url_check(url, purpose=Purpose.ENDPOINT)
    except EndpointRefused as error:
        raise ValidationError(f"The endpoint's URL is refused: {error}") from None


def _text_usable(text: str, what: str, limit: int) -> str:
    text = (text or "").strip()
    if not text or len(text) > limit:
        raise ValidationError(f"Name the {what} (at most {limit} characters).")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValidationError(f"The {what}'s name holds control characters.")
    return text


def endpoint_register(
    *,
    user,
    release: Release,
    name: str,
    url: str,
    timeout_seconds: float = 30.0,
    max_retries: int = 3,
    requests_per_minute: int = 600,
    context_mode: str = ContextMode.STREAMED,
) -> OnlineEndpoint:
    """A researcher (or admin) registers their agent's URL for a release. The
    URL must be on a public address, unless the operator allowed its network
    (REALICU_ENDPOINT_ALLOWED_NETWORKS; oracle.backbones.endpoints), and at
    most 500 characters. ``context_mode``: a stay's history streamed (once,
    then what is new) or whole with every window (agents.sessions)."""
    from exports.roles import user_may_use_releases

    if not (user_is_researcher(user) or user_is_admin(user)) or not (
        user_may_use_releases(user)
    ):
        raise PermissionDenied("Only researchers and admins evaluate endpoints.")
    _release_ready(release)
    name = _text_usable(name, "endpoint", 100)
    url = (url or "").strip()
    if not url.startswith(("http://", "https://")):
        raise ValidationError("The endpoint's URL must start with http:// or https://.")
    _endpoint_url_usable(url)
    if context_mode not in ContextMode.values:
        raise ValidationError(
            "Choose how contexts are sent: "
            + " or ".join(f"{value!r}" for value in ContextMode.values)
            + "."
        )
    egress_guard(actor=user, purpose="endpoint_register", data=release, url=url)
    try:
        timeout_seconds = float(timeout_seconds)
        max_retries = int(max_retries)
        requests_per_minute = int(requests_per_minute)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(
            "The timeout, retries and requests per minute must be numbers."
        ) from None
    if not (1 <= timeout_seconds <= 600):
        raise ValidationError("The timeout must be between 1 and 600 seconds.")
    if not (0 <= max_retries <= 10):
        raise ValidationError("Retries must be between 0 and 10.")
    if not (1 <= requests_per_minute <= 6000):
        raise ValidationError("Requests per minute must be between 1 and 6000.")
    return OnlineEndpoint.objects.create(
        release=release,
        name=name,
        url=url,
        timeout_seconds=float(timeout_seconds),
        max_retries=int(max_retries),
        requests_per_minute=int(requests_per_minute),
        context_mode=context_mode,
        created_by=user,
    )


def endpoint_evaluate(
    *, user, release: Release, name: str, url: str, context_mode: str
) -> AgentRun:
    """The endpoint page's one action: a researcher's endpoint registered for
    ``release`` (endpoint_register) and its run started at once
    (online_eval_start). Not one transaction: a start the egress guard refuses
    keeps its audit row, and the registered endpoint stays listed for a later
    start, as it did when the page made the two calls."""
    endpoint = endpoint_register(
        user=user, release=release, name=name, url=url, context_mode=context_mode
    )
    return online_eval_start(user=user, endpoint=endpoint)


def online_eval_start(
    *, user, endpoint: OnlineEndpoint, enqueue: bool = True
) -> AgentRun:
    """A run of the endpoint over its release (its owner or an admin)."""
    from agents.remote import PROTOCOL_VERSION

    if endpoint.created_by_id != user.pk and not user_is_admin(user):
        raise PermissionDenied("Only the researcher who registered it can run it.")
    _release_ready(endpoint.release)
    _endpoint_url_usable(endpoint.url)
    egress_guard(
        actor=user,
        purpose="online_eval",
        data=endpoint.release,
        url=endpoint.url,
        endpoint=endpoint,
        owner=endpoint.created_by,
    )
    return _create_run(
        user=user,
        release=endpoint.release,
        agent=ENDPOINT_AGENT,
        endpoint=endpoint,
        prompt_version=PROTOCOL_VERSION,
        enqueue=enqueue,
    )


def agent_run_cancel(*, user, run: AgentRun) -> AgentRun:
    if run.created_by_id != user.pk and not user_is_admin(user):
        raise PermissionDenied("Only who started the run, or an admin, can cancel it.")
    with transaction.atomic():
        AgentRun.objects.filter(pk=run.pk, state__in=OPEN_RUN_STATES).update(
            state=RunState.CANCELLED, lease="", finished_at=timezone.now()
        )
        AgentStayState.objects.filter(
            run=run, state__in=(StayState.QUEUED, StayState.RUNNING)
        ).update(state=StayState.CANCELLED, lease="")
    run.refresh_from_db()
    return run


def agent_run_resume(*, user, run: AgentRun) -> AgentRun:
    """A cancelled or failed run goes on from where its stays stopped."""
    if run.created_by_id != user.pk and not user_is_admin(user):
        raise PermissionDenied("Only who started the run, or an admin, can resume it.")
    # The address policy and the data-use egress guard are asked again: an
    # attestation or credential revoked since the run started stops it here.
    if run.endpoint_id:
        _endpoint_url_usable(run.endpoint.url)
        egress_guard(
            actor=user,
            purpose="online_eval",
            data=run.release,
            url=run.endpoint.url,
            endpoint=run.endpoint,
            owner=run.endpoint.created_by,
        )
    elif run.backbone_id and run.backbone.kind == "openai":
        backbone_endpoint_check(run.backbone)
        egress_guard(
            actor=user, purpose="agent_run", data=run.release, backbone=run.backbone
        )
    with transaction.atomic():
        updated = AgentRun.objects.filter(
            pk=run.pk, state__in=(RunState.CANCELLED, RunState.FAILED)
        ).update(state=RunState.RUNNING, finished_at=None, error="")
        if not updated:
            raise ValidationError("Only a cancelled or failed run can be resumed.")
        stays = AgentStayState.objects.filter(
            run=run, state__in=(StayState.CANCELLED, StayState.FAILED)
        )
        pks = list(stays.values_list("pk", flat=True))
        stays.update(state=StayState.QUEUED, lease="", attempts=0, error="")
        for pk in pks:
            outbox_send(task=STAY_TASK, args=[pk], key=f"job:agent-stay:{pk}")
    run.refresh_from_db()
    if not pks:
        agent_run_finish(run=run)
    return run


def agent_run_inline(
    *, run: AgentRun, on_window: Callable[[AgentRun], None] | None = None
) -> AgentRun:
    """Every queued stay of the run, in this process, one after the other, then
    the scoring (manage.py agent_run --inline, online_eval --inline)."""
    pks = AgentStayState.objects.filter(run=run, state=StayState.QUEUED).values_list(
        "pk", flat=True
    )
    for pk in list(pks):
        agent_stay_work(stay_state_id=pk, on_window=on_window, score_inline=True)
    run.refresh_from_db()
    return run


# The agent of a run ---------------------------------------------------------


def agent_for_run(run: AgentRun) -> Agent:
    if run.endpoint_id:
        from agents.remote import RemoteAgent

        endpoint = run.endpoint
        return RemoteAgent(
            url=endpoint.url,
            timeout_seconds=endpoint.timeout_seconds,
            max_retries=endpoint.max_retries,
            requests_per_minute=endpoint.requests_per_minute,
            context_mode=endpoint.context_mode,
        )
    cls = agent_class(run.agent)
    llm = None
    if cls.uses_llm and run.backbone_id:
        from agents.llm import ChatClient
        from oracle.models import Backbone
        from oracle.services.backbones import backbone_detect_if_new

        # As an Oracle run does: the server is asked (again, if its last check
        # failed) for its tokenizer, reply format and window before the client
        # is built with them.
        backbone_detect_if_new(backbone_id=run.backbone_id)
        llm = ChatClient.for_backbone(Backbone.objects.get(pk=run.backbone_id))
    return cls(llm)


def _predict(agent: Agent, ctx, memory: dict) -> tuple[dict, dict]:
    """The agent's prediction of the window; once more when its first prompt
    taught the client the server's shorter context window (ContextLearned):
    the agent then compresses to the new budget by its own rule."""
    from agents.llm import ContextLearned

    try:
        return agent.predict(ctx, dict(memory))
    except ContextLearned:
        return agent.predict(ctx, dict(memory))


def _usage(agent: Agent) -> tuple[int, int, int]:
    llm = agent.llm
    if llm is None:
        return 0, 0, getattr(agent, "requests", 0)
    return llm.tokens_in, llm.tokens_out, llm.requests


def _cost(run: AgentRun, tokens_in: int, tokens_out: int) -> float:
    backbone = run.backbone
    if backbone is None:
        return 0.0
    return (
        tokens_in * (backbone.price_per_million_input or 0.0)
        + tokens_out * (backbone.price_per_million_output or 0.0)
    ) / 1_000_000


class _StayBeat(job_heartbeat):
    """The stay's heartbeat, which also keeps its run's heartbeat fresh. When
    the stay is lost (its run cancelled, or taken over) it calls
    ``on_lost``: the agent's request in flight is abandoned."""

    def __init__(self, *, run_id: int, on_lost: Callable[[], None], **kwargs):
        super().__init__(**kwargs)
        self.run_id = run_id
        self.on_lost = on_lost

    def beat(self) -> None:
        super().beat()
        if not self.lost:
            AgentRun.objects.filter(pk=self.run_id).update(heartbeat_at=timezone.now())
        else:
            self.on_lost()


def _abort(agent: Agent) -> None:
    """Close the connection of the agent's request in flight (an endpoint's,
    or its language model's), from the heartbeat's thread."""
    abort = getattr(agent, "abort", None) or getattr(agent.llm, "abort", None)
    if abort is not None:
        abort()


# The per-stay job -----------------------------------------------------------


def agent_stay_work(
    *,
    stay_state_id: int,
    agent_factory: Callable[[AgentRun], Agent] | None = None,
    on_window: Callable[[AgentRun], None] | None = None,
    score_inline: bool = False,
) -> str:
    """Predict the stay's windows that have no prediction yet, in time order.
    Returns what happened ("done", "taken", "cancelled", "lost")."""
    lease = job_claim(
        model=AgentStayState,
        pk=stay_state_id,
        claimable=(StayState.QUEUED,),
        running=StayState.RUNNING,
        started_field=None,
    )
    if lease is None:
        return "taken"
    state = AgentStayState.objects.select_related("run", "stay").get(pk=stay_state_id)
    run = state.run
    if run.state not in (RunState.QUEUED, RunState.RUNNING):
        job_release(model=AgentStayState, pk=state.pk, lease=lease)
        return "cancelled"
    now = timezone.now()
    AgentRun.objects.filter(pk=run.pk, state=RunState.QUEUED).update(
        state=RunState.RUNNING, started_at=now, heartbeat_at=now
    )
    agent = (agent_factory or agent_for_run)(run)
    window_ids = list(
        ReleaseWindow.objects.filter(
            release_id=run.release_id, stay_id=state.stay_id
        ).values_list("window_id", flat=True)
    )
    done = set(
        AgentPrediction.objects.filter(run=run, stay_id=state.stay_id).values_list(
            "window_id", flat=True
        )
    )
    memory = state.memory or {}
    try:
        with _StayBeat(
            run_id=run.pk,
            on_lost=lambda: _abort(agent),
            model=AgentStayState,
            pk=state.pk,
            lease=lease,
        ) as beat:
            for ctx in stay_contexts(state.stay, window_ids):
                if ctx.window_id in done:
                    continue
                beat(len(done), len(window_ids), f"window {ctx.window_index}")
                before = _usage(agent)
                error = detail = ""
                prediction: dict = {}
                try:
                    raw, new_memory = _predict(agent, ctx, memory)
                    prediction = prediction_normalise(raw)
                    json.dumps(new_memory)
                except AgentError as exc:
                    error, detail, new_memory = str(exc), exc.detail, memory
                except DatabaseError:
                    raise
                except Exception as exc:
                    # An agent's own bug fails its window, not the run.
                    logger.exception("agent %s failed on window %s", run.agent, ctx)
                    error, new_memory = f"{type(exc).__name__}: {exc}", memory
                after = _usage(agent)
                tokens_in, tokens_out = after[0] - before[0], after[1] - before[1]
                with transaction.atomic():
                    kept = AgentStayState.objects.filter(
                        pk=state.pk, lease=lease
                    ).update(
                        memory=new_memory,
                        windows_done=F("windows_done") + 1,
                        updated_at=timezone.now(),
                    )
                    if not kept:
                        raise JobLeaseLost("the stay was cancelled or taken over")
                    AgentPrediction.objects.create(
                        run=run,
                        window_id=ctx.window_id,
                        stay_id=ctx.stay_id,
                        prediction=prediction,
                        tokens_in=tokens_in,
                        tokens_out=tokens_out,
                        error=error[:2000],
                        error_detail=detail[:2000],
                    )
                    AgentRun.objects.filter(pk=run.pk).update(
                        windows_done=F("windows_done") + 1,
                        progress_done=F("progress_done") + 1,
                        windows_failed=F("windows_failed") + (1 if error else 0),
                        tokens_in=F("tokens_in") + tokens_in,
                        tokens_out=F("tokens_out") + tokens_out,
                        requests=F("requests") + (after[2] - before[2]),
                        cost=F("cost") + _cost(run, tokens_in, tokens_out),
                        heartbeat_at=timezone.now(),
                    )
                memory = new_memory
                done.add(ctx.window_id)
                if on_window is not None:
                    on_window(run)
            beat(len(done), len(window_ids), "done")
    except JobLeaseLost:
        return "lost"
    finally:
        learned = getattr(agent.llm, "context_reported", None)
        if learned and run.backbone_id:
            from oracle.services.tokens import context_learned

            context_learned(backbone_id=run.backbone_id, tokens=learned)
        close = getattr(agent, "close", None) or getattr(agent.llm, "close", None)
        if close is not None:
            close()
    released = job_release(
        model=AgentStayState,
        pk=state.pk,
        lease=lease,
        state=StayState.DONE,
        finished_at=timezone.now(),
    )
    if not released:
        return "lost"
    AgentRun.objects.filter(pk=run.pk).update(stays_done=F("stays_done") + 1)
    agent_run_finish(run=run, score_inline=score_inline)
    return "done"


__all__ = [
    "agent_for_run",
    "agent_run_cancel",
    "agent_run_finish",
    "agent_run_inline",
    "agent_run_resume",
    "agent_run_settle",
    "agent_run_start",
    "agent_stay_work",
    "endpoint_register",
    "online_eval_start",
]
