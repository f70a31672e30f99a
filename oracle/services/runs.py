"""Oracle runs (spec section 7): create, cancel, resume, retry, and their
chunked, resumable execution on Celery workers.

How a run shares out across workers: it is labelled in chunks. A chunk task
claims up to ``chunk_size`` windows of the run that have no label and no live
claim (``OracleWindowClaim``, a lease the task renews while it works), labels
them, and saves each label as it arrives. The claim is taken with the run's row
locked, so claims never overlap; a worker that dies stops renewing, its lease
runs out and another chunk claims those windows. A label is inserted with ON
CONFLICT DO NOTHING on (run, window), so even a chunk that outlived its lease
never duplicates a label.

How the limits hold across workers: at most ``lanes`` chunk tasks of a run hold
claims at once (counted under the same row lock), and each labels with
``concurrency // lanes`` requests in flight and ``requests_per_minute // lanes``
per minute. The sum over workers is then within the run's limits with no shared
counter to call per request, and it works on every broker and database the
platform supports (Redis or the filesystem transport, PostgreSQL or SQLite). The
price is that a lane whose worker is busy elsewhere leaves its share unused;
``REALICU_ORACLE_LANES`` should match the worker processes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from accounts.roles import require_admin
from annotation.models import Campaign, PatientStatus
from jobs.leases import heartbeat_seconds, worker_name
from jobs.outbox import outbox_send
from oracle import selectors
from oracle.backbones.base import BackboneResult
from oracle.egress import egress_guard
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    OracleWindowClaim,
    PromptTemplate,
    RunScope,
    RunState,
)
from oracle.services.tokens import (
    calibration_record,
    context_learned,
    speed_record,
)
from windows.models import Cohort, Window

logger = logging.getLogger(__name__)

CHUNK_TASK = "oracle.tasks.oracle_run_chunk_task"
# How often a chunk looks for a cancel request and writes its progress.
POLL_SECONDS = 1.0
# A chunk task that found nothing to claim (the other lanes hold the rest, or a
# dead worker's lease has not run out yet) tries again after this long.
WAIT_SECONDS = 5
MAX_NAME = 200
FINISHED_STATES = (RunState.CANCELLED, RunState.COMPLETED, RunState.FAILED)


def run_lanes(run: OracleRun | None = None) -> int:
    """Chunk tasks of a run at work at once: the setting, bounded by the
    backbone's limits so every lane gets at least one request in flight and one
    per minute."""
    lanes = max(1, int(getattr(settings, "REALICU_ORACLE_LANES", 2)))
    if run is not None:
        snapshot = run.backbone_snapshot or {}
        lanes = min(
            lanes,
            max(1, int(snapshot.get("concurrency") or 1)),
            max(1, int(snapshot.get("requests_per_minute") or 1)),
        )
    return lanes


def chunk_size_default() -> int:
    return max(1, int(getattr(settings, "REALICU_ORACLE_CHUNK_SIZE", 50)))


def lease_seconds() -> int:
    return max(5, int(getattr(settings, "REALICU_ORACLE_CLAIM_LEASE_SECONDS", 120)))


# Runs ---------------------------------------------------------------------------


def _backbone_endpoint_check(backbone: Backbone) -> None:
    """A backbone saved before the operator's rules (or under other ones) is
    checked again when a run starts: its key variable must be allowed and its
    URL not refused (oracle.backbones.endpoints)."""
    from oracle.backbones.endpoints import EndpointRefused, key_env_check, url_check

    if backbone.kind != BackboneKind.OPENAI:
        return
    try:
        key_env_check(backbone.api_key_env)
        url_check(backbone.base_url)
    except EndpointRefused as error:
        raise ValidationError(
            f"Backbone {backbone.name} cannot be used: {error} Edit the backbone first."
        ) from None


def _enqueue_chunks(run_id: int, count: int) -> None:
    """Queue ``count`` chunk tasks through the outbox (jobs.outbox): sent once
    the transaction commits, or by the reaper when the broker was away."""
    for _ in range(count):
        outbox_send(task=CHUNK_TASK, args=[run_id])


def oracle_run_requeue(run: OracleRun) -> None:
    """The reaper's hook (jobs.registry) for a run none of whose chunks has
    written a heartbeat for ``REALICU_JOB_STALE_SECONDS``: its workers died.
    Their claims are dropped (a late reply of a chunk presumed dead is still
    saved once: labels are written ON CONFLICT DO NOTHING) and the run's lanes
    queued again. After ``max_attempts`` losses without a chunk finishing in
    between, the reaper fails the run with the reason instead."""
    OracleWindowClaim.objects.filter(run_id=run.pk).delete()
    _in_flight_forget(run.pk)
    if run.state == RunState.RUNNING:
        OracleRun.objects.filter(pk=run.pk).update(attempts=F("attempts") + 1)
    _enqueue_chunks(run.pk, run_lanes(run))


def oracle_run_create(
    *,
    admin,
    name: str,
    backbone: Backbone,
    prompt: PromptTemplate | None = None,
    campaign: Campaign | None = None,
    cohort: Cohort | None = None,
    enqueue: bool = True,
) -> OracleRun:
    """A run of ``backbone`` over a campaign's windows or over every candidate
    window of a cohort's stays, queued for the workers once committed. The
    backbone's settings are copied onto the run; later edits change nothing.
    The endpoint's check (a name lookup) runs before the transaction: on
    SQLite a transaction holds the database's one write lock."""
    require_admin(admin, "start an Oracle run")
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Give the run a name."})
    if len(name) > MAX_NAME:
        raise ValidationError({"name": f"At most {MAX_NAME} characters."})
    if (campaign is None) == (cohort is None):
        raise ValidationError(
            "Choose either a campaign (its windows) or a cohort (all its candidate "
            "windows), not both and not neither."
        )
    if backbone is None or backbone.pk is None:
        raise ValidationError({"backbone": "Choose a backbone."})
    try:
        backbone.clean()
    except ValidationError as error:
        raise ValidationError(
            f"Backbone {backbone.name} is not fully configured: "
            + " ".join(error.messages)
        ) from error
    _backbone_endpoint_check(backbone)
    egress_guard(
        actor=admin, purpose="oracle_run", data=campaign or cohort, backbone=backbone
    )
    with transaction.atomic():
        return _oracle_run_save(
            admin=admin,
            name=name,
            backbone=backbone,
            prompt=prompt,
            campaign=campaign,
            cohort=cohort,
            enqueue=enqueue,
        )


def _oracle_run_save(
    *, admin, name, backbone, prompt, campaign, cohort, enqueue
) -> OracleRun:
    if prompt is None:
        from oracle.prompts import prompt_default_get_or_create

        prompt = prompt_default_get_or_create()
    run = OracleRun(
        name=name,
        backbone=backbone,
        backbone_snapshot=backbone.snapshot(),
        prompt=prompt,
        scope=RunScope.CAMPAIGN if campaign is not None else RunScope.COHORT,
        campaign=campaign,
        cohort=cohort,
        created_by=admin,
    )
    total = selectors.run_windows(run=run).count()
    if total == 0:
        where = f"campaign {campaign}" if campaign else f"cohort {cohort}"
        raise ValidationError(
            f"The {where} has no windows to label; build them first "
            "(manage.py build_windows)."
        )
    run.total_windows = total
    run.progress_total = total
    run.progress_label = "queued"
    run.save()
    if enqueue:
        _enqueue_chunks(run.pk, run_lanes(run))
    return run


@transaction.atomic
def oracle_run_cancel(*, admin, run: OracleRun) -> OracleRun:
    """Stop the run: no new request is started (chunks poll for this); replies
    already in flight are still saved. Resumable."""
    require_admin(admin, "cancel an Oracle run")
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if run.state in (RunState.COMPLETED, RunState.CANCELLED):
        raise ValidationError(f"The run is already {run.get_state_display().lower()}.")
    now = timezone.now()
    run.cancel_requested_at = now
    run.state = RunState.CANCELLED
    run.finished_at = now
    run.save(update_fields=["cancel_requested_at", "state", "finished_at"])
    return run


def _in_flight_forget(run_id: int) -> None:
    """Requests of chunks that are gone (finished, or their workers died)
    are no longer in flight: sent is set to what finished."""
    OracleRun.objects.filter(pk=run_id).update(
        requests_sent=F("requests_answered")
        + F("requests_timed_out")
        + F("requests_errored")
    )


def _restart(run: OracleRun) -> None:
    _in_flight_forget(run.pk)
    run.state = RunState.QUEUED
    run.cancel_requested_at = None
    run.finished_at = None
    run.error = ""
    run.save(update_fields=["state", "cancel_requested_at", "finished_at", "error"])
    _enqueue_chunks(run.pk, run_lanes(run))


def oracle_run_resume(*, admin, run: OracleRun, enqueue: bool = True) -> OracleRun:
    """Queue the run again for the windows that have no label yet. A running
    run may be resumed too (its workers died): the lanes bound the chunks at
    work, so the limits still hold. The endpoint and the egress guard are
    checked (a name lookup) before the transaction."""
    require_admin(admin, "resume an Oracle run")
    _run_egress_check(admin=admin, run=run)
    with transaction.atomic():
        return _oracle_run_resume(run=run, enqueue=enqueue)


def _run_egress_check(*, admin, run: OracleRun) -> None:
    """The endpoint's address policy and the data-use egress guard, asked
    again whenever a run's windows are sent anew (resume, retry): an
    attestation revoked since the run started stops it here."""
    backbone = Backbone.objects.get(pk=run.backbone_id)
    _backbone_endpoint_check(backbone)
    egress_guard(
        actor=admin,
        purpose="oracle_run",
        data=run.campaign or run.cohort or run,
        backbone=backbone,
    )


def _oracle_run_resume(*, run: OracleRun, enqueue: bool) -> OracleRun:
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if not selectors.run_windows_todo(run=run).exists():
        failed = run.labels.filter(state=OracleLabelState.FAILED).count()
        hint = (
            f" {failed} window{'s' if failed != 1 else ''} failed: retry them instead."
            if failed
            else ""
        )
        raise ValidationError(f"Every window of this run is labelled.{hint}")
    if enqueue:
        _restart(run)
    else:
        run.state = RunState.QUEUED
        run.cancel_requested_at = None
        run.finished_at = None
        run.error = ""
        run.save(update_fields=["state", "cancel_requested_at", "finished_at", "error"])
    return run


def oracle_run_retry_failed(*, admin, run: OracleRun, enqueue: bool = True) -> int:
    """Forget the run's failed windows (this run's only) and label them again.
    Returns how many were forgotten. The endpoint is checked (a name lookup)
    before the transaction."""
    require_admin(admin, "retry an Oracle run's failures")
    _run_egress_check(admin=admin, run=run)
    with transaction.atomic():
        return _oracle_run_retry_failed(run=run, enqueue=enqueue)


def _oracle_run_retry_failed(*, run: OracleRun, enqueue: bool) -> int:
    run = OracleRun.objects.select_for_update().get(pk=run.pk)
    if run.state in (RunState.QUEUED, RunState.RUNNING):
        raise ValidationError(
            "The run is still going: wait for it to finish, or cancel it first."
        )
    failed, _ = OracleLabel.objects.filter(
        run=run, state=OracleLabelState.FAILED
    ).delete()
    if not failed:
        raise ValidationError("No window of this run failed: nothing to retry.")
    if enqueue:
        _restart(run)
    else:
        run.state = RunState.QUEUED
        run.cancel_requested_at = None
        run.finished_at = None
        run.save(update_fields=["state", "cancel_requested_at", "finished_at"])
    return failed


def oracle_run_fail(*, run_id: int, error: str) -> None:
    """Record an error that stopped a chunk (not a window's failure)."""
    OracleRun.objects.filter(pk=run_id).exclude(state__in=FINISHED_STATES).update(
        state=RunState.FAILED, error=error[:5000], finished_at=timezone.now()
    )


# Chunk execution ------------------------------------------------------------------


class ChunkOutcome:
    LABELLED = "labelled"  # labelled a chunk; more may remain
    DONE = "done"  # every window has a label: the run is complete
    STOPPED = "stopped"  # cancelled, finished or gone: nothing more to do
    WAITING = "waiting"  # nothing to claim now; try again later


@dataclass
class ChunkResult:
    outcome: str
    claimed: int = 0
    labelled: int = 0
    failed: int = 0
    retry_after: float = 0.0
    window_ids: list[int] = field(default_factory=list)


def _progress_write(
    run: OracleRun, *, label: str = "", finished_chunk: bool = False
) -> None:
    """The run's progress and heartbeat, on its row: windows labelled of the
    total. A chunk that finished resets the count of lost workers."""
    done = OracleLabel.objects.filter(run_id=run.pk).count()
    fields = dict(
        progress_done=done,
        progress_total=run.total_windows,
        progress_label=label[:255],
        heartbeat_at=timezone.now(),
    )
    if finished_chunk:
        fields["attempts"] = 0
    OracleRun.objects.filter(pk=run.pk).update(**fields)


def _complete(run: OracleRun) -> None:
    now = timezone.now()
    OracleRun.objects.filter(pk=run.pk, state=RunState.RUNNING).update(
        state=RunState.COMPLETED, finished_at=now
    )
    OracleWindowClaim.objects.filter(run_id=run.pk).delete()
    _progress_write(run, label="completed")


def _claim(
    *, run_id: int, token: str, chunk_size: int
) -> tuple[OracleRun | None, list[int], str]:
    """Claim the next windows of the run for the chunk ``token``, under the
    run's row lock: the lowest ids with no label and no live claim, if fewer
    than ``lanes`` chunks hold claims."""
    with transaction.atomic():
        run = (
            OracleRun.objects.select_for_update(of=("self",))
            .select_related("prompt", "backbone", "campaign")
            .filter(pk=run_id)
            .first()
        )
        if run is None or run.state in FINISHED_STATES or run.cancel_requested_at:
            return run, [], ChunkOutcome.STOPPED
        now = timezone.now()
        OracleWindowClaim.objects.filter(run=run, expires_at__lt=now).delete()
        run.heartbeat_at = now
        run.worker = worker_name()
        fields = ["heartbeat_at", "worker"]
        if run.state == RunState.QUEUED:
            run.state = RunState.RUNNING
            run.started_at = run.started_at or now
            fields += ["state", "started_at"]
        run.save(update_fields=fields)
        at_work = (
            OracleWindowClaim.objects.filter(run=run).values("token").distinct().count()
        )
        todo = selectors.run_windows_todo(run=run)
        if at_work >= run_lanes(run):
            if not todo.exists():
                _complete(run)
                return run, [], ChunkOutcome.DONE
            return run, [], ChunkOutcome.WAITING
        claimed = OracleWindowClaim.objects.filter(
            run_id=run.pk, window_id=OuterRef("pk")
        )
        ids = list(
            todo.filter(~Exists(claimed))
            .order_by("pk")
            .values_list("pk", flat=True)[:chunk_size]
        )
        if not ids:
            if not todo.exists():
                _complete(run)
                return run, [], ChunkOutcome.DONE
            return run, [], ChunkOutcome.WAITING
        expires = now + timedelta(seconds=lease_seconds())
        OracleWindowClaim.objects.bulk_create(
            [
                OracleWindowClaim(
                    run=run, window_id=pk, token=token, expires_at=expires
                )
                for pk in ids
            ]
        )
        return run, ids, "claimed"


def _backbone_for_run(run: OracleRun, lanes: int):
    """The run's backbone as it was snapshotted, with this lane's share of the
    concurrency and rate limits. What describes the server rather than the
    experiment (context window, reply tokens and dialect, tokenizer, the
    calibration, the key's variable) is read from the live row, which the
    server's detection may have filled since the run was made."""
    from oracle.backbones import backbone_for

    snapshot = run.backbone_snapshot or {}
    live = Backbone.objects.get(pk=run.backbone_id)
    kind = snapshot.get("kind", live.kind)
    share = Backbone(
        name=snapshot.get("name", live.name),
        kind=kind,
        base_url=snapshot.get("base_url", ""),
        model=snapshot.get("model", "") if kind == BackboneKind.OPENAI else "",
        # The variable's name, read from the live row: the snapshot keeps no
        # trace of where the key lives, and the key itself is never stored.
        api_key_env=live.api_key_env,
        parameters=dict(snapshot.get("parameters") or {}),
        timeout_seconds=snapshot.get("timeout_seconds", live.timeout_seconds),
        max_retries=snapshot.get("max_retries", live.max_retries),
        concurrency=max(1, int(snapshot.get("concurrency") or 1) // lanes),
        requests_per_minute=max(
            1, int(snapshot.get("requests_per_minute") or 1) // lanes
        ),
        context_tokens=live.context_tokens,
        max_completion_tokens=live.max_completion_tokens,
        reply_format=live.reply_format,
        tokenizer=live.tokenizer,
        calibration=live.calibration,
        price_per_million_input=snapshot.get("price_per_million_input", 0.0),
        price_per_million_output=snapshot.get("price_per_million_output", 0.0),
    )
    in_use = {
        key: getattr(share, key)
        for key in (
            "context_tokens",
            "max_completion_tokens",
            "reply_format",
            "tokenizer",
        )
    }
    if any(snapshot.get(key) != value for key, value in in_use.items()):
        # The run records the server settings it labels with.
        OracleRun.objects.filter(pk=run.pk).update(
            backbone_snapshot={**snapshot, **in_use}
        )
    return backbone_for(share, template=run.prompt)


class _ChunkKeeper:
    """Saves each result as it arrives, renews the chunk's lease, and tells the
    backbone to stop once the run is cancelled. Thread-safe: a backbone may
    report from its own threads."""

    def __init__(self, *, run: OracleRun, token: str, window_ids: list[int]):
        self.run = run
        self.token = token
        self.window_ids = set(window_ids)
        self.snapshot = run.backbone_snapshot or {}
        self.owner = threading.get_ident()
        self.lock = threading.Lock()
        self.stopped = False
        self.saved: set[int] = set()
        self.samples: list[tuple[int, int]] = []
        self.context_reported: int | None = None
        # Request events not yet written to the run's row (flushed each poll).
        self.request_counts: dict[str, int] = {}
        self.request_problem = ""
        self.labelled = 0
        self.failed = 0
        now = time.monotonic()
        self.last_poll = now
        self.last_renew = now
        self.last_beat = now
        self.lease = lease_seconds()

    def _label(self, result: BackboneResult) -> OracleLabel:
        ok = bool(result.ok)
        error = result.error or ""
        payload = result.payload if isinstance(result.payload, dict) else {}
        if ok and result.status not in PatientStatus.values:
            ok, error = False, f"The reply's status {result.status!r} is not a status."
        if not ok and not error:
            error = "The backbone gave no label and no reason."
        return OracleLabel(
            run_id=self.run.pk,
            window_id=result.window_id,
            state=OracleLabelState.OK if ok else OracleLabelState.FAILED,
            status=result.status if ok else "",
            payload=payload if ok else {},
            backbone_kind=self.snapshot.get("kind", self.run.backbone.kind),
            model=str(self.snapshot.get("model", ""))[:200],
            prompt_version=self.run.prompt.version,
            parameters=dict(self.snapshot.get("parameters") or {}),
            tokens_in=max(0, int(result.tokens_in or 0)),
            tokens_out=max(0, int(result.tokens_out or 0)),
            latency_ms=max(0, int(result.latency_ms or 0)),
            attempts=max(1, min(int(result.attempts or 1), 32767)),
            prompt_chars=max(0, int(result.prompt_chars or 0)),
            prompt_tokens=max(0, int(result.prompt_tokens or 0)),
            prompt_estimate=max(0, int(result.prompt_estimate or 0)),
            prompt_compressions=list(result.compressions or []),
            raw_response=result.raw_response or "",
            error=error,
        )

    def save(self, result: BackboneResult) -> None:
        if result.window_id not in self.window_ids:
            logger.warning(
                "Oracle run %s: a result for window %s, which this chunk did not "
                "claim, was ignored",
                self.run.pk,
                result.window_id,
            )
            return
        with self.lock:
            if result.window_id in self.saved:
                return
            self.saved.add(result.window_id)
            if result.prompt_chars and result.prompt_tokens:
                self.samples.append((result.prompt_chars, result.prompt_tokens))
            if result.context_tokens_reported:
                self.context_reported = result.context_tokens_reported
        label = self._label(result)
        try:
            # ON CONFLICT DO NOTHING: a window labelled by a chunk that outlived
            # its lease keeps its first label.
            OracleLabel.objects.bulk_create([label], ignore_conflicts=True)
            with self.lock:
                if label.state == OracleLabelState.OK:
                    self.labelled += 1
                else:
                    self.failed += 1
            self.tick()
        finally:
            if threading.get_ident() != self.owner:
                connection.close()

    def request(self, event) -> None:
        """A request event of the backbone (openai_compat.RequestEvent): counted
        now, written to the run's row at the next poll, so that the page shows
        attempts, timeouts and retries while no window is labelled yet."""
        with self.lock:
            self.request_counts[event.kind] = self.request_counts.get(event.kind, 0) + 1
            if event.detail and event.kind != "answered":
                self.request_problem = event.detail
        self.tick()

    def flush_requests(self) -> None:
        with self.lock:
            counts, self.request_counts = self.request_counts, {}
            problem, self.request_problem = self.request_problem, ""
        fields = {
            f"requests_{name}": F(f"requests_{name}") + counts[kind]
            for kind, name in (
                ("sent", "sent"),
                ("answered", "answered"),
                ("timed_out", "timed_out"),
                ("errored", "errored"),
                ("retry", "retried"),
            )
            if counts.get(kind)
        }
        if problem:
            fields["request_problem"] = problem[:255]
            fields["request_problem_at"] = timezone.now()
        if fields:
            OracleRun.objects.filter(pk=self.run.pk).update(**fields)

    def should_stop(self) -> bool:
        self.tick()
        return self.stopped

    def tick(self) -> None:
        now = time.monotonic()
        with self.lock:
            poll = now - self.last_poll >= POLL_SECONDS
            renew = now - self.last_renew >= self.lease / 3
            beat = now - self.last_beat >= heartbeat_seconds()
            if poll:
                self.last_poll = now
            if renew:
                self.last_renew = now
            if beat:
                self.last_beat = now
        if not (poll or renew or beat):
            return
        try:
            if renew:
                OracleWindowClaim.objects.filter(
                    run_id=self.run.pk, token=self.token
                ).update(expires_at=timezone.now() + timedelta(seconds=self.lease))
            if poll:
                self.flush_requests()
                state = (
                    OracleRun.objects.filter(pk=self.run.pk)
                    .values("state", "cancel_requested_at")
                    .first()
                )
                if (
                    state is None
                    or state["cancel_requested_at"] is not None
                    or state["state"] in FINISHED_STATES
                ):
                    self.stopped = True
            if beat:
                _progress_write(self.run, label="running")
        finally:
            if threading.get_ident() != self.owner:
                connection.close()

    def release(self) -> None:
        OracleWindowClaim.objects.filter(run_id=self.run.pk, token=self.token).delete()


def _contexts_build(
    windows: list[Window], critical_rules: list[dict] | None
) -> tuple[list, dict[int, str]]:
    """Contexts of the windows; a window whose context cannot be built is a
    failure with the reason, not a reason to lose the chunk. A campaign's run
    rates the recorded actions its physicians rated (the campaign's rules)."""
    from oracle.context import window_contexts_build

    try:
        return list(
            window_contexts_build(windows=windows, critical_rules=critical_rules)
        ), {}
    except Exception:
        logger.exception("context of a chunk failed; building window by window")
    contexts, failures = [], {}
    for window in windows:
        try:
            contexts.extend(
                window_contexts_build(windows=[window], critical_rules=critical_rules)
            )
        except Exception as error:  # noqa: BLE001 - the reason is recorded
            failures[window.pk] = f"The window's context could not be built: {error}"
    return contexts, failures


def oracle_run_execute_chunk(
    *, run_id: int, chunk_size: int | None = None, token: str | None = None
) -> ChunkResult:
    """Label the next chunk of the run's windows (see the module docstring):
    claim, build contexts, label through the backbone with each result saved as
    it arrives, release the claim. Idempotent and safe to run on any number of
    workers at once."""
    chunk_size = chunk_size or chunk_size_default()
    token = token or uuid.uuid4().hex
    run, ids, outcome = _claim(run_id=run_id, token=token, chunk_size=chunk_size)
    if outcome == ChunkOutcome.WAITING:
        return ChunkResult(outcome, retry_after=WAIT_SECONDS)
    if outcome != "claimed":
        return ChunkResult(outcome)
    keeper = _ChunkKeeper(run=run, token=token, window_ids=ids)
    backbone = None
    try:
        windows = list(
            Window.objects.filter(pk__in=ids).select_related("stay").order_by("pk")
        )
        rules = (
            run.campaign.critical_action_categories
            if run.scope == RunScope.CAMPAIGN and run.campaign_id
            else None
        )
        contexts, context_failures = _contexts_build(windows, rules)
        for window_id, reason in context_failures.items():
            keeper.save(BackboneResult(window_id=window_id, ok=False, error=reason))
        if contexts and not keeper.should_stop():
            if run.backbone.kind == BackboneKind.OPENAI:
                from oracle.services.backbones import backbone_detect_if_new

                backbone_detect_if_new(backbone_id=run.backbone_id)
            backbone = _backbone_for_run(run, run_lanes(run))
            hooks = {"on_result": keeper.save, "should_stop": keeper.should_stop}
            if run.backbone.kind == BackboneKind.OPENAI:
                hooks["on_request"] = keeper.request
            results = backbone.label_many(contexts, **hooks)
            if not keeper.stopped:
                # A backbone that returned results it did not report: save them
                # too (saving twice is a no-op).
                for result in results or []:
                    keeper.save(result)
    finally:
        keeper.release()
        keeper.flush_requests()
        speeds = list(getattr(backbone, "observed_speeds", None) or [])
        if speeds:
            speed_record(backbone_id=run.backbone_id, speeds=speeds)
        if keeper.samples:
            calibration_record(backbone_id=run.backbone_id, samples=keeper.samples)
        if keeper.context_reported:
            context_learned(backbone_id=run.backbone_id, tokens=keeper.context_reported)
    _progress_write(run, label="running", finished_chunk=True)
    if keeper.stopped:
        return ChunkResult(
            ChunkOutcome.STOPPED,
            len(ids),
            keeper.labelled,
            keeper.failed,
            window_ids=ids,
        )
    return ChunkResult(
        ChunkOutcome.LABELLED, len(ids), keeper.labelled, keeper.failed, window_ids=ids
    )


def oracle_run_execute_inline(
    *, run_id: int, chunk_size: int | None = None, on_chunk=None, wait=time.sleep
) -> str:
    """Run chunks in this process until the run is done or stopped: the command
    line's ``--inline`` for small jobs, with no worker."""
    while True:
        result = oracle_run_execute_chunk(run_id=run_id, chunk_size=chunk_size)
        if on_chunk is not None:
            on_chunk(result)
        if result.outcome in (ChunkOutcome.DONE, ChunkOutcome.STOPPED):
            return result.outcome
        if result.outcome == ChunkOutcome.WAITING:
            wait(result.retry_after)
