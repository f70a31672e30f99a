"""A MIMIC-IV import fanned out on the workers (issue 36): the run's own task
plans it (windows.importers.mimic.fanout: the folder checked, each batch's rows
in the store) and queues one ImportBatch job per batch; the run then waits in
``batches`` state, holding no worker, and the last batch to end closes it.

Each batch is a job as every job is (jobs.leases, jobs.reaper, jobs.outbox):
claimed under a lease, heart-beating, re-queued by the reaper when its worker
dies. It is imported once: its rows and its ``done`` state commit in one
transaction, and a batch that is done, or held by a live worker, is left alone
when its message comes again. A worker that dies mid-batch leaves nothing (its
transaction never committed); the batch's next worker imports it whole.

``REALICU_IMPORT_FANOUT``: ``auto`` (the default) fans out on PostgreSQL and
imports in one process on SQLite (the embedded default), where batches would
only wait on each other for the one writer's lock; ``on`` or ``off`` force it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from jobs.leases import JobLeaseLost, job_fail, job_heartbeat
from jobs.outbox import outbox_send
from jobs.progress import Progress
from windows.builds import batch_claim
from windows.models import BuildState, ImportBatch, ImportRun, ImportStatus

logger = logging.getLogger(__name__)

IMPORT_BATCH_JOB = "import-batch"  # the JobKind registered in windows.apps
IMPORT_BATCH_TASK = "windows.tasks.import_batch_execute_task"
OPEN = (BuildState.QUEUED, BuildState.RUNNING)


def import_fanout_enabled() -> bool:
    """Whether a MIMIC-IV import started from the page fans out (module doc)."""
    choice = str(getattr(settings, "REALICU_IMPORT_FANOUT", "auto")).lower()
    if choice not in ("auto", "on", "off"):
        raise ValidationError(
            f"REALICU_IMPORT_FANOUT is {choice!r}; set it to auto, on or off."
        )
    if choice == "auto":
        return connection.vendor == "postgresql"
    return choice == "on"


def _prefix(run_pk: int) -> str:
    return f"imports/run-{run_pk}"


def _batch_key(pk: int) -> str:
    return f"job:{IMPORT_BATCH_JOB}:{pk}"


def import_run_fan_out(
    *,
    import_run: ImportRun,
    lease: str,
    progress: Progress,
    batch_stays: int | None = None,
) -> list[ImportBatch]:
    """Plan the run's import, store its batches and queue them, leaving the run
    in ``batches`` state without a lease. Called by the run's task while it
    holds ``lease``; a run whose lease went meanwhile queues nothing
    (JobLeaseLost). Batches of an earlier attempt are replaced."""
    from windows.importers.mimic.fanout import mimic_fanout_plan

    prefix = _prefix(import_run.pk)
    plan = mimic_fanout_plan(
        directory=Path(import_run.path),
        prefix=prefix,
        progress=progress,
        batch_stays=batch_stays,
    )
    now = timezone.now()
    with transaction.atomic():
        ImportBatch.objects.filter(run=import_run).delete()
        batches = ImportBatch.objects.bulk_create(
            ImportBatch(
                run=import_run,
                index=n,
                hadm_ids=hadm_ids,
                spill_prefix=plan.prefixes[n],
                state=BuildState.QUEUED,
            )
            for n, hadm_ids in enumerate(plan.batches)
        )
        held = ImportRun.objects.filter(pk=import_run.pk, lease=lease).update(
            status=ImportStatus.BATCHES,
            lease="",
            heartbeat_at=now,
            summary=plan.summary,
            progress_done=0,
            progress_total=len(batches),
            progress_label=f"0 of {len(batches)} batches done",
        )
        if not held:
            raise JobLeaseLost(f"ImportRun {import_run.pk}: cancelled or taken over")
        for batch in batches:
            outbox_send(
                task=IMPORT_BATCH_TASK, args=[batch.pk], key=_batch_key(batch.pk)
            )
    if not batches:
        import_run_finish(run_id=import_run.pk)
    return batches


def import_run_fan_out_here(
    *, directory: Path, progress: Progress, batch_stays: int | None = None
) -> ImportRun:
    """``manage.py import_mimic --fan-out``: a run of ``directory`` planned in
    this process (the folder read, each batch's rows stored, the batches
    queued) as a worker plans one queued from the page; the workers then import
    its batches. The folder is the command line's, so no import root applies.
    A plan that fails leaves the run failed with its reason, and raises."""
    from jobs.leases import job_claim
    from windows.datasources import MIMIC_IV, data_source_get
    from windows.models import Source

    run = ImportRun.objects.create(source=Source.MIMIC, path=str(directory.resolve()))
    run.data_sources.set([data_source_get(MIMIC_IV)])
    lease = job_claim(model=ImportRun, pk=run.pk)
    try:
        with job_heartbeat(model=ImportRun, pk=run.pk, lease=lease) as heartbeat:
            import_run_fan_out(
                import_run=run,
                lease=lease,
                progress=Progress(sinks=[heartbeat, *progress.sinks]),
                batch_stays=batch_stays,
            )
    except Exception as exc:
        job_fail(model=ImportRun, pk=run.pk, lease=lease, error=exc)
        raise
    run.refresh_from_db()
    return run


def import_run_follow(*, run_id: int) -> ImportRun:
    """One look at a fanned-out run for a command following it: the reaper's
    check of its open batches (a batch whose worker went silent is queued
    again, or failed), then the run closed if none is left open."""
    from jobs.reaper import job_check

    for batch in ImportBatch.objects.filter(run_id=run_id, state__in=OPEN):
        job_check(batch)
    run = ImportRun.objects.get(pk=run_id)
    import_run_batches_check(run)
    return run


def import_batch_execute(*, batch_id: int) -> ImportBatch | None:
    """Import one batch under a lease (module doc); ends the run when this was
    its last open batch."""
    from windows.importers.mimic.fanout import mimic_batch_import
    from windows.services import admission_events_touch, events_high_water

    batch, lease = batch_claim(ImportBatch, batch_id)
    if lease is None:
        return batch
    run = batch.run
    if run.status != ImportStatus.BATCHES:
        job_fail(
            model=ImportBatch,
            pk=batch.pk,
            lease=lease,
            error=f"Import {run.pk} is {run.get_status_display().lower()}.",
        )
        return batch

    def commit(result: dict) -> None:
        now = timezone.now()
        done = ImportBatch.objects.filter(pk=batch.pk, lease=lease).update(
            state=BuildState.DONE,
            lease="",
            result=result,
            finished_at=now,
            heartbeat_at=now,
            progress_label="done",
        )
        if not done:  # cancelled or taken over: its rows roll back
            raise JobLeaseLost(f"ImportBatch {batch.pk}: cancelled or taken over")

    high_water = events_high_water()
    failure: Exception | None = None
    with job_heartbeat(model=ImportBatch, pk=batch.pk, lease=lease) as heartbeat:
        try:
            mimic_batch_import(
                directory=Path(run.path),
                prefix=batch.spill_prefix,
                progress=Progress(sinks=[heartbeat]),
                commit=commit,
            )
        except JobLeaseLost:
            logger.warning("import batch %s stopped: its lease was taken", batch.pk)
            return batch
        except Exception as exc:
            failure = exc
    # The stored tracks of the admissions this batch added are out of date.
    admission_events_touch(since_event_id=high_water)
    if failure is not None:
        message = job_fail(model=ImportBatch, pk=batch.pk, lease=lease, error=failure)
        logger.error("import batch %s failed: %s", batch.pk, message)
    import_run_finish(run_id=run.pk)
    batch.refresh_from_db()
    return batch


def import_run_finish(*, run_id: int) -> ImportRun | None:
    """Count the run's batches done onto its bar; once none is open, close it:
    done with every batch's summary merged, or failed naming the first batch
    that failed (what the other batches imported stays; resume imports the
    rest). Its stored files are then removed."""
    from windows.datasources import data_source_get
    from windows.importers.mimic.fanout import batch_files_remove, summary_merge

    with transaction.atomic():
        run = ImportRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != ImportStatus.BATCHES:
            return run
        rows = list(run.batches.values_list("state", "result", "error", "index"))
        done = sum(state == BuildState.DONE for state, *_ in rows)
        counted = (run.progress_done, run.progress_total)
        run.progress_done, run.progress_total = done, len(rows)
        run.progress_label = f"{done} of {len(rows)} batches done"
        fields = ["progress_done", "progress_total", "progress_label"]
        if any(state in OPEN for state, *_ in rows):
            if counted != (done, len(rows)):  # a page polling writes nothing
                run.save(update_fields=fields)
            return run
        results = [result for state, result, *_ in rows if state == BuildState.DONE]
        run.summary = summary_merge(run.summary, results)
        failed = [(i, e) for state, _, e, i in rows if state != BuildState.DONE]
        if failed:
            index, error = failed[0]
            run.status = ImportStatus.FAILED
            run.error = (
                f"{len(failed)} of {len(rows)} batches failed; batch {index + 1}: "
                f"{error} (the {done} batch(es) imported stay: resume the import "
                "to import the rest)"
            )[:5000]
        else:
            run.status = ImportStatus.DONE
            run.progress_label = "done"
        run.finished_at = timezone.now()
        run.save(update_fields=[*fields, "summary", "status", "error", "finished_at"])
        keys = run.summary.get("data_sources") or []
        if run.status == ImportStatus.DONE and keys:
            run.data_sources.add(*(data_source_get(k) for k in keys))
    batch_files_remove(_prefix(run.pk))
    return run


def import_batch_reaped(batch: ImportBatch) -> None:
    """The reaper's cleanup of a batch whose worker went silent (JobKind.cleanup,
    run in its transaction before the batch is queued again or, after its last
    attempt, failed): once that commits, the run is counted and closed if no
    batch is left open, as the batch's own worker would have closed it; no
    page has to look at the run first."""
    transaction.on_commit(lambda: import_run_finish(run_id=batch.run_id))


def import_run_batches_check(run: ImportRun) -> None:
    """For a page showing the run: close it if its last batch was failed by
    the reaper (no batch task is left to close it)."""
    if run.status == ImportStatus.BATCHES:
        import_run_finish(run_id=run.pk)
        run.refresh_from_db()


def import_runs_check(runs) -> None:
    """The reaper's check for each open run a page shows (jobs.reaper.job_check):
    a run whose worker went silent is re-queued (or failed) before the page says
    "Running", and one whose last batch failed is closed."""
    from jobs.reaper import job_check

    for run in runs:
        if run.is_open:
            job_check(run)
            import_run_batches_check(run)


def import_batches_cancel(*, run: ImportRun, reason: str) -> None:
    """End a cancelled run's open batches: their leases go, so a worker still
    at one stops at its next step and its transaction rolls back."""
    run.batches.filter(state__in=OPEN).update(
        state=BuildState.FAILED,
        lease="",
        error=reason,
        finished_at=timezone.now(),
        progress_label="cancelled",
    )
