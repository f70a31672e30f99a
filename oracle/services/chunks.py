"""An Oracle run's chunked execution on Celery workers (spec section 7): a
chunk task claims windows under the run's row lock, labels them through the
run's backbone and saves each label as it arrives. How runs share out across
workers and keep their limits is told in oracle.services.runs."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from annotation.models import PatientStatus
from jobs.leases import heartbeat_seconds, worker_name
from oracle import selectors
from oracle.backbones.base import BackboneResult
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    OracleWindowClaim,
    RunScope,
    RunState,
)
from oracle.services.runs import (
    FINISHED_STATES,
    POLL_SECONDS,
    WAIT_SECONDS,
    chunk_size_default,
    lease_seconds,
    run_lanes,
)
from oracle.services.tokens import (
    calibration_record,
    context_learned,
    speed_record,
)
from windows.models import Window

logger = logging.getLogger(__name__)


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


NONE_LABELLED = (
    "No window was labelled: every window failed (the reasons are listed "
    "below). Retry the failed windows once the backbone answers."
)


def _complete(run: OracleRun) -> None:
    """Every window has its label row: the run is complete, or failed when
    not one window was labelled (a page or command never calls a run without
    a label complete)."""
    now = timezone.now()
    labelled = OracleLabel.objects.filter(
        run_id=run.pk, state=OracleLabelState.OK
    ).exists()
    fields = {"state": RunState.COMPLETED, "finished_at": now}
    if not labelled and run.total_windows:
        fields.update(state=RunState.FAILED, error=NONE_LABELLED)
    OracleRun.objects.filter(pk=run.pk, state=RunState.RUNNING).update(**fields)
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
