"""Concept tracks, and windows with their Gold draw, built on the workers: a
BuildRun split into BuildBatch job rows of a few stays each, which N workers on
M machines share (each batch claimed under a lease, jobs.leases; a batch whose
worker dies is re-queued by the reaper, jobs.reaper).

Every batch is idempotent: a batch already done, or held by a live worker, is
left alone when its task is delivered again, and the per-stay work itself
replaces what it writes (tracks by stay, windows upserted by (stay, index)).
The Gold draw is per stay (windows.windowing.windows_sample_gold: the stay's own
median density, a generator seeded by the seed and the stay's source id), so the
fanned-out draw is the one ``--inline`` makes. The run-level part (the summary)
is summed once, when the last batch ends.

A run none of whose batches has a live worker for longer than a lost worker's
bound is stalled (``build_run_progress``); an admin resumes it (its unfinished
batches queued again) or cancels it (their leases dropped, so a late worker
stops).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from jobs.leases import (
    JobLeaseLost,
    job_claim,
    job_fail,
    job_heartbeat,
    job_release,
    stale_before,
    stale_seconds,
)
from jobs.outbox import outbox_send
from jobs.progress import Progress
from jobs.registry import kind_for
from windows.models import BuildBatch, BuildKind, BuildRun, BuildState, Stay, Window

logger = logging.getLogger(__name__)

BUILD_JOB = "build"  # the JobKind registered in windows.apps
BUILD_TASK = "windows.tasks.build_batch_execute_task"
OPEN = (BuildState.QUEUED, BuildState.RUNNING)
CANCELLED_BY = "Cancelled by "  # how a cancelled run's error starts


def build_batch_stays() -> int:
    """Stays per batch: small enough that a few workers share a cohort evenly,
    large enough that a task's overhead (claim, heartbeat) is small beside it."""
    return int(getattr(settings, "REALICU_BUILD_BATCH_STAYS", 20))


def _batch_key(pk: int) -> str:
    # The key the reaper uses for this job too, so a waiting message is sent once.
    return f"job:{BUILD_JOB}:{pk}"


def _windows_params(params: dict) -> dict:
    from windows.windowing import (
        _check_gold_settings,
        _check_window_settings,
        window_settings,
    )

    defaults = window_settings()
    resolved = {
        k: defaults[k] if params.get(k) is None else params[k]
        for k in ("window_minutes", "stride_hours", "per_stay", "high_share")
    }
    _check_window_settings(
        window_minutes=resolved["window_minutes"],
        stride_hours=resolved["stride_hours"],
    )
    _check_gold_settings(
        per_stay=resolved["per_stay"], high_share=resolved["high_share"]
    )
    resolved["seed"] = int(params.get("seed") or 0)
    return resolved


def build_run_create(
    *,
    kind: str,
    stays,
    params: dict | None = None,
    user=None,
    batch_stays: int | None = None,
) -> BuildRun:
    """Queue a build over ``stays``: one BuildBatch per ``batch_stays`` stays,
    each sent to the workers through the outbox in the transaction that creates
    it. Windows settings are checked, and every stay's windows are checked
    against what refers to them (windows.windowing.windows_change_check), before
    anything is written: a refusal changes nothing."""
    from windows.windowing import window_bounds, windows_change_check

    if kind not in BuildKind.values:
        raise ValidationError(
            f"Unknown build {kind!r}; choose one of {', '.join(BuildKind.values)}."
        )
    size = batch_stays or build_batch_stays()
    if size < 1:
        raise ValidationError(f"Stays per batch must be at least 1, not {size}.")
    params = dict(params or {})
    stays = list(stays)
    if kind == BuildKind.WINDOWS:
        params = _windows_params(params)
        # Only stays that have windows can have windows something refers to.
        built = set(
            Window.objects.filter(stay__in=[s.pk for s in stays])
            .values_list("stay_id", flat=True)
            .distinct()
        )
        for stay in (s for s in stays if s.pk in built):
            windows_change_check(
                stay=stay,
                bounds=window_bounds(
                    intime=stay.intime,
                    outtime=stay.outtime,
                    window_minutes=params["window_minutes"],
                    stride_hours=params["stride_hours"],
                ),
            )
    else:
        params = {"force": bool(params.get("force"))}
    ids = sorted(s.pk for s in stays)
    with transaction.atomic():
        run = BuildRun.objects.create(
            kind=kind, params=params, stays_total=len(ids), started_by=user
        )
        batches = BuildBatch.objects.bulk_create(
            BuildBatch(run=run, index=i, stay_ids=ids[start : start + size])
            for i, start in enumerate(range(0, len(ids), size))
        )
        for batch in batches:
            outbox_send(task=BUILD_TASK, args=[batch.pk], key=_batch_key(batch.pk))
        if not batches:
            build_run_finish(run_id=run.pk)
    run.refresh_from_db()
    return run


def _batch_work(*, run: BuildRun, stay_ids: list[int], progress: Progress) -> dict:
    from windows.tracks import tracks_build_all
    from windows.windowing import windows_build_many

    stays = Stay.objects.filter(pk__in=stay_ids).order_by("pk")
    if run.kind == BuildKind.TRACKS:
        computed = tracks_build_all(
            stays=stays, progress=progress, force=run.params.get("force", False)
        )
        return {"stays": len(stay_ids), "computed": computed}
    p = run.params
    summary = windows_build_many(
        stays=stays,
        seed=p["seed"],
        window_minutes=p["window_minutes"],
        stride_hours=p["stride_hours"],
        per_stay=p["per_stay"],
        high_share=p["high_share"],
        progress=progress,
    )
    result = summary.as_dict()
    result.pop("settings", None)
    return result


def batch_claim(model, batch_id: int):
    """(batch, lease) of a queued batch row (BuildBatch, ImportBatch) with its
    run; lease None when the batch is done, failed or held by a live worker (a
    duplicate delivery then writes nothing); (None, None) when it is gone."""
    batch = model.objects.select_related("run").filter(pk=batch_id).first()
    if batch is None:
        return None, None
    lease = job_claim(
        model=model,
        pk=batch.pk,
        extra={"error": "", "finished_at": None},
    )
    return batch, lease


def build_batch_execute(*, batch_id: int) -> BuildBatch | None:
    """Run one queued batch under a lease with a heartbeat that writes its
    progress onto the row. A batch that is done, failed, or held by a live
    worker is left alone (a duplicate delivery writes nothing). Ends the run
    when this was its last open batch."""
    batch, lease = batch_claim(BuildBatch, batch_id)
    if lease is None:
        return batch
    BuildRun.objects.filter(pk=batch.run_id, state=BuildState.QUEUED).update(
        state=BuildState.RUNNING
    )
    failure: Exception | None = None
    result: dict = {}
    with job_heartbeat(model=BuildBatch, pk=batch.pk, lease=lease) as heartbeat:
        progress = Progress(sinks=[heartbeat])
        try:
            result = _batch_work(
                run=batch.run, stay_ids=batch.stay_ids, progress=progress
            )
        except JobLeaseLost:
            logger.warning("build batch %s stopped: its lease was taken", batch.pk)
            return batch
        except Exception as exc:
            failure = exc
    finished = {
        "finished_at": timezone.now(),
        "heartbeat_at": timezone.now(),
        "progress_done": progress.done,
        "progress_total": len(batch.stay_ids),
    }
    if failure is not None:
        message = job_fail(
            model=BuildBatch, pk=batch.pk, lease=lease, error=failure, **finished
        )
        logger.error("build batch %s failed: %s", batch.pk, message)
    else:
        job_release(
            model=BuildBatch,
            pk=batch.pk,
            lease=lease,
            state=BuildState.DONE,
            result=result,
            progress_label="done",
            **finished,
        )
    build_run_finish(run_id=batch.run_id)
    batch.refresh_from_db()
    return batch


def _sum_results(results: list[dict]) -> dict:
    total: dict = {}
    for result in results:
        for key, value in result.items():
            total[key] = total.get(key, 0) + value
    return total


def build_run_finish(*, run_id: int) -> BuildRun | None:
    """Close the run once none of its batches is open: failed when one failed
    (its message on the run), else done with the batches' results summed."""
    with transaction.atomic():
        run = BuildRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state not in OPEN:
            return run
        rows = list(run.batches.values_list("state", "result", "error", "index"))
        if any(state in OPEN for state, *_ in rows):
            return run
        failed = [(index, error) for state, _, error, index in rows if state != "done"]
        run.finished_at = timezone.now()
        if failed:
            run.state = BuildState.FAILED
            index, error = failed[0]
            run.error = (
                f"{len(failed)} of {len(rows)} batches failed; batch {index}: {error}"
            )[:5000]
        else:
            run.state = BuildState.DONE
            run.summary = _sum_results([result for _, result, _, _ in rows])
            if not rows:
                run.summary = {"stays": 0}
        run.save(update_fields=["state", "finished_at", "error", "summary"])
    return run


def _liveness(run: BuildRun, rows: list[dict], now) -> dict:
    """Who is at the run's batches: the workers whose heartbeat is fresh, the
    ones gone silent on a running batch, how long since any batch showed life
    (a heartbeat, an end; the run's creation when none has), and whether any
    worker ever took a batch."""
    cutoff = stale_before(now)
    live, lost = set(), set()
    seen = run.created_at
    for row in rows:
        if row["state"] == BuildState.RUNNING:
            beat = row["heartbeat_at"]
            (live if beat and beat >= cutoff else lost).add(row["worker"] or "?")
        for moment in (row["heartbeat_at"], row["finished_at"]):
            if moment and moment > seen:
                seen = moment
    silent = max(0.0, (now - seen).total_seconds())
    is_open = run.state in OPEN and any(row["state"] in OPEN for row in rows)
    return {
        "live_workers": sorted(live),
        "lost_workers": sorted(lost),
        "silent_seconds": round(silent),
        "taken": any(
            row["worker"] or row["state"] != BuildState.QUEUED for row in rows
        ),
        "stalled": is_open and not live and silent > stale_seconds(),
    }


_ROW_FIELDS = ("state", "stay_ids", "progress_done", "worker", "heartbeat_at")


def build_run_progress(*, run: BuildRun, now=None) -> dict:
    """Stays done of the run (finished batches whole, running ones as far as
    their heartbeat last said), for a bar on a page or a command line, with
    its true state: ``stalled`` when no worker has shown life on its batches
    for longer than a lost worker's bound (``workers``: the live ones only).
    Closes a run whose last batch the reaper failed."""
    now = now or timezone.now()
    rows = list(run.batches.values(*_ROW_FIELDS, "finished_at"))
    done = 0
    for row in rows:
        if row["state"] in (BuildState.DONE, BuildState.FAILED):
            done += len(row["stay_ids"])
        elif row["state"] == BuildState.RUNNING:
            done += min(row["progress_done"], len(row["stay_ids"]))
    if run.state in OPEN and rows and all(r["state"] not in OPEN for r in rows):
        run = build_run_finish(run_id=run.pk) or run
    total = run.stays_total
    alive = _liveness(run, rows, now)
    cancelled = run.state == BuildState.FAILED and run.error.startswith(CANCELLED_BY)
    if alive["stalled"]:
        label = "Stalled"
    elif cancelled:
        label = "Cancelled"
    else:
        label = run.get_state_display()
    return {
        "state": run.state,
        "label": label,
        "done": done,
        "total": total,
        "percent": min(100, round(100 * done / total)) if total else 100,
        "batches": len(rows),
        "batches_done": sum(r["state"] == BuildState.DONE for r in rows),
        "batches_failed": sum(r["state"] == BuildState.FAILED for r in rows),
        "workers": len(alive["live_workers"]),
        **alive,
        "cancelled": cancelled,
        "resumable": alive["stalled"] or run.state == BuildState.FAILED,
        "cancellable": run.state in OPEN,
    }


def _require_admin(admin, doing: str) -> None:
    from accounts.roles import user_is_admin

    if not user_is_admin(admin):
        raise PermissionDenied(f"Only an admin may {doing}.")


def build_run_resume(*, admin, run: BuildRun) -> BuildRun:
    """Queue a stalled, failed or cancelled build's unfinished batches again
    (a fresh start: the count of workers lost on each starts over). A batch a
    worker still holds is taken from it: its lease goes, so that worker stops
    at its next step if it ever wakes. Refused while a live worker is at the
    build, or when nothing is left to do."""
    _require_admin(admin, "resume a build")
    now = timezone.now()
    with transaction.atomic():
        locked = BuildRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:
            raise ValidationError("This build no longer exists.")
        batches = list(run.batches.select_for_update().order_by("index"))
        rows = [
            {f: getattr(b, f) for f in (*_ROW_FIELDS, "finished_at")} for b in batches
        ]
        alive = _liveness(locked, rows, now)
        if locked.state == BuildState.DONE:
            raise ValidationError(f"Build {locked.pk} is done: nothing to resume.")
        if alive["live_workers"]:
            raise ValidationError(
                f"Build {locked.pk} is running on "
                f"{', '.join(alive['live_workers'])}: it needs no resume."
            )
        if locked.state in OPEN and not alive["stalled"]:
            raise ValidationError(
                f"Build {locked.pk} was queued {alive['silent_seconds']} s ago: its "
                "batches wait for a worker. Resume is for a build no worker has "
                f"shown life on for {round(stale_seconds())} s."
            )
        unfinished = [b for b in batches if b.state != BuildState.DONE]
        BuildBatch.objects.filter(pk__in=[b.pk for b in unfinished]).update(
            progress_done=0, **kind_for(BuildBatch).resumed(admin.get_username(), now)
        )
        for batch in unfinished:
            outbox_send(task=BUILD_TASK, args=[batch.pk], key=_batch_key(batch.pk))
        locked.state = (
            BuildState.RUNNING if len(unfinished) < len(batches) else BuildState.QUEUED
        )
        locked.error = ""
        locked.finished_at = None
        locked.save(update_fields=["state", "error", "finished_at"])
        if not unfinished:
            build_run_finish(run_id=locked.pk)
    run.refresh_from_db()
    return run


def build_run_cancel(*, admin, run: BuildRun) -> BuildRun:
    """Stop a queued or running build: its open batches end, their leases
    dropped, so a worker still at one finds its lease gone at its next step and
    stops, and a message still on its way finds nothing to take. What finished
    batches wrote stays (every stay's work is whole); resume completes it."""
    _require_admin(admin, "cancel a build")
    now = timezone.now()
    reason = f"{CANCELLED_BY}{admin.get_username()}."
    with transaction.atomic():
        locked = BuildRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:
            raise ValidationError("This build no longer exists.")
        if locked.state not in OPEN:
            raise ValidationError(
                f"Build {locked.pk} is {locked.get_state_display().lower()}: only a "
                "queued or running build can be cancelled."
            )
        locked.batches.filter(state__in=OPEN).update(
            state=BuildState.FAILED,
            lease="",
            error=reason,
            finished_at=now,
            progress_label="cancelled",
        )
        locked.state = BuildState.FAILED
        locked.error = reason
        locked.finished_at = now
        locked.save(update_fields=["state", "error", "finished_at"])
    run.refresh_from_db()
    return run
