"""The build job driver: takes a queued release with a lease, writes its files
into a hidden folder under a heartbeat outside any transaction and commits its
rows in batches, then marks it ready and renames the folder into place in one
short transaction; a failed, cancelled or taken-over build leaves no folder
and no rows behind."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from exports.building.batches import ReleaseRows, release_rows_discard
from exports.building.manifest import (
    _make_read_only,
    _manifest,
    _remove_tree,
    folder_files,
    manifest_write,
    release_published_exists,
    release_store_prefix,
)
from exports.building.records import release_files_write
from exports.datacard import datacard_write
from exports.models import Release, ReleaseKind, ReleaseState
from jobs.progress import Progress
from realicu_web.storage import object_store, store_put_new, store_remove_prefix

logger = logging.getLogger(__name__)


def release_partial_remove(release: Release) -> None:
    """Removes the unfinished folder of a build of ``release``, if any."""
    _remove_tree(Path(settings.REALICU_RELEASES_DIR) / f".{release.name}.partial")


def release_build(*, release: Release, progress=None) -> Release:
    """Builds a queued release into its own new folder and marks it ready.

    The build is a job (jobs.leases): it is taken with ``job_claim`` (state
    building, in its own short transaction), a heartbeat thread writes the
    progress onto the row while the files are written, and the build stops
    when the row's lease changes (cancelled, or given to another worker after
    this one went silent).

    No transaction lasts longer than a batch of rows (issue 29: on SQLite one
    connection writes at a time, and a build in one transaction kept every
    sign-in waiting): the files are written outside any transaction, the rows
    committed in batches while the lease is still this build's
    (``exports.building.batches``), and the release is published at the end
    in one short transaction, ready on its row and its folder renamed into
    place together. Until then the release is not ready and nothing serves
    its rows or files.

    Idempotent: a ready release, or one another live worker holds, is returned
    as it is; the unfinished folder and the rows of an earlier attempt are
    removed and the build starts again. A failed or cancelled build leaves no
    folder and no rows behind. A release whose final folder already exists is
    refused and never rewritten."""
    from jobs.leases import JobLeaseLost, job_heartbeat, job_release, job_take

    # A ready release is not claimable: job_take returns None and the release.
    lease = job_take(
        release,
        extra={
            "error": "",
            "finished_at": None,
            "progress_done": 0,
            "progress_total": 0,
            "progress_label": "starting",
        },
    )
    if lease is None:
        return release
    root = Path(settings.REALICU_RELEASES_DIR)
    final = root / release.name
    partial = root / f".{release.name}.partial"
    renamed = False
    store = object_store()
    try:
        # Inside the try: a releases folder that cannot be written fails the
        # build with the reason, rather than leaving it building.
        root.mkdir(parents=True, exist_ok=True)
        # This worker holds the lease: a folder left by an earlier attempt is
        # stale, and so are keys in the store without a manifest (a worker
        # that died while copying them: the manifest is copied last).
        _remove_tree(partial)
        if store is not None and not release_published_exists(release.name):
            store_remove_prefix(store, release_store_prefix(release.name))
        if release_published_exists(release.name):
            from django.core.exceptions import ValidationError

            raise ValidationError(
                f"The folder {release.name} already exists in the releases folder"
                f"{' (object store)' if store is not None else ''}. "
                "A release's folder is never rewritten: move it away if it is a "
                "leftover, or rebuild as a new version."
            )
        rows = ReleaseRows(release=release, lease=lease)
        with job_heartbeat(model=Release, pk=release.pk, lease=lease) as beat:
            sinks = [beat, *(progress.sinks if progress is not None else [])]
            job_progress = Progress(sinks=sinks)
            rows.clear()
            stats, manifest, files = _release_write(
                release=release, folder=partial, rows=rows, progress=job_progress
            )
            rows.files(files)
            if store is not None:
                # Every file is in the store before the release is published;
                # renamed: keys of this build to remove should it stop now.
                renamed = True
                _release_upload(store, release, partial, files, job_progress)
            job_progress.advance(1, "done")
        # Published in one short transaction: ready on the row (only while the
        # lease is still this build's: a cancel or a takeover undoes it) and
        # the folder renamed into place commit together.
        with transaction.atomic():
            if not job_release(
                model=Release,
                pk=release.pk,
                lease=lease,
                state=ReleaseState.READY,
                finished_at=timezone.now(),
                directory=release.name,
                manifest=manifest,
                window_count=stats.windows,
                heartbeat_at=timezone.now(),
                progress_done=job_progress.done,
                progress_total=job_progress.total,
                progress_label="done",
            ):
                raise JobLeaseLost(f"release {release.pk}: cancelled or taken over")
            if store is None:
                os.replace(partial, final)
                renamed = True
        if store is None:
            _make_read_only(final)
        else:
            # The worker's unfinished copy: the store holds the release now.
            _remove_left(partial)
    except JobLeaseLost:
        # Whoever holds the row now (a cancel, another worker) owns its state;
        # a cancelled build's rows go (a new holder deletes them itself).
        _remove_left(partial)
        if renamed and store is None:
            _remove_left(final)
        elif renamed:
            _remove_stored(store, release)
        _rows_discard_quietly(release)
        release.refresh_from_db()
        return release
    except BaseException as exc:
        left = _remove_left(partial)
        if (
            renamed
            and not Release.objects.filter(
                pk=release.pk, state=ReleaseState.READY
            ).exists()
        ):
            left = (
                _remove_left(final) if store is None else _remove_stored(store, release)
            ) or left
        if not Release.objects.filter(pk=release.pk, lease=lease).exists():
            # Cancelled meanwhile (the cancel removes the folder this build was
            # writing), or taken over: not this build's failure to record.
            _rows_discard_quietly(release)
            release.refresh_from_db()
            return release
        _release_after_error(release, lease, exc, left=left)
        _rows_discard_quietly(release)
        raise
    release.refresh_from_db()
    return release


def _rows_discard_quietly(release: Release) -> None:
    """The rows of a build that stopped go; when they cannot (the database is
    away), the release's next attempt deletes them before writing its own."""
    try:
        release_rows_discard(release)
    except Exception:
        logger.exception("release %s: the rows of its stopped build stay", release.pk)


def _remove_left(path: Path) -> str:
    """Removes what a stopped build left at ``path``; returns why that failed
    (empty when it did not), so the build's own error is still recorded."""
    from jobs.leases import error_text

    try:
        _remove_tree(path)
    except OSError as error:
        logger.error("release folder %s not removed: %s", path, error)
        return error_text(error)
    return ""


def _release_upload(store, release, folder: Path, files, progress) -> None:
    """Copies the built files to the release's write-once keys in the store,
    checking the lease (through ``progress``) between files; the manifest goes
    last, so that keys without it are an unfinished copy."""
    prefix = release_store_prefix(release.name)
    files = sorted(files, key=lambda entry: entry["path"] == "manifest.json")
    for number, entry in enumerate(files, start=1):
        store_put_new(store, prefix + entry["path"], folder / entry["path"])
        if number % 50 == 0:
            progress.advance(0, f"stored {number} of {len(files)} files")


def _remove_stored(store, release: Release) -> str:
    """Removes the keys a stopped build wrote to the store; returns why that
    failed (empty when it did not)."""
    from jobs.leases import error_text

    try:
        store_remove_prefix(store, release_store_prefix(release.name))
    except Exception as error:
        logger.error("release %s: its stored files not removed: %s", release.pk, error)
        return error_text(error)
    return ""


def _release_after_error(
    release: Release, lease: str, exc: BaseException, *, left: str = ""
) -> None:
    """Records why the build stopped (and ``left``: why its unfinished folder
    could not be removed). A lost database connection queues the release again
    (the task's retry, or the reaper, takes it) unless workers already tried
    three times; anything else fails it with the reason. When even that write
    fails, the row keeps its stale heartbeat and the reaper handles it."""
    from django.db import OperationalError

    from jobs.leases import job_release

    messages = getattr(exc, "messages", None)
    error = "; ".join(messages) if messages else f"{type(exc).__name__}: {exc}"
    if left:
        error += f"; its unfinished folder could not be removed: {left}"
    fields = {
        "state": ReleaseState.FAILED,
        "finished_at": timezone.now(),
        "error": error,
        "progress_label": "failed",
    }
    try:
        if isinstance(exc, OperationalError):
            attempts = (
                Release.objects.filter(pk=release.pk)
                .values_list("attempts", flat=True)
                .first()
                or 0
            )
            if attempts < 3:
                fields = {
                    "state": ReleaseState.QUEUED,
                    "heartbeat_at": timezone.now(),
                    "progress_label": f"re-queued after a database error: {exc}"[:255],
                }
        job_release(model=Release, pk=release.pk, lease=lease, **fields)
    except Exception:
        logger.exception("release %s: its failure could not be recorded", release.pk)


def _release_write(
    *, release: Release, folder: Path, rows: ReleaseRows, progress: Progress
) -> tuple[object, dict, list[dict]]:
    """Writes the release's files into ``folder`` with their checksums, and
    hands its window records to ``rows``; returns the statistics, the manifest
    and the files (path, bytes, sha256) whose rows are still to be stored."""
    from django.core.exceptions import ValidationError

    if release.kind == ReleaseKind.SURVEILLANCE:
        from exports.building.surveillance import surveillance_release_write

        return surveillance_release_write(
            release=release, folder=folder, rows_out=rows, progress=progress
        )
    stats = release_files_write(
        release=release, folder=folder, rows_out=rows, progress=progress
    )
    if stats.windows == 0:
        raise ValidationError(
            f"{release} has no windows to release: no finished consensus "
            "(Gold) or no successful Oracle label (Scale)."
        )
    datacard_write(release=release, stats=stats, folder=folder)
    progress.advance(1, "checksums")
    files = folder_files(folder)
    manifest = _manifest(release=release, stats=stats, files=files)
    manifest_write(folder, manifest, files)
    return stats, manifest, files
