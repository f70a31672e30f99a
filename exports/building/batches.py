"""A build's rows (window records, file checksums), committed in short
transactions of at most ``ROWS_PER_COMMIT`` rows, each written only while the
build still holds its lease (jobs.leases). On SQLite, the embedded default,
one connection writes at a time: a build in one transaction kept sign-ins,
draft saves and heartbeats waiting for its whole length (issue 29), so no
build holds the write lock for longer than one batch takes.

Rows committed before the release is published belong to a release that is not
ready, which no reader serves (``exports.selectors``, ``Release.published_files``);
a build that stops leaves them for its next attempt, which deletes them before
writing its own (``ReleaseRows.clear``), or for ``release_rows_discard``.

On SQLite a write must not start while a read of the same connection is still
open (its snapshot is older than the last commit, and the write fails with
"database is locked" at once): callers add rows between reads, never inside a
loop over a streamed query."""

from __future__ import annotations

import json

from django.db import connection, transaction

from exports.models import Release, ReleaseFile, ReleaseState, ReleaseWindow
from jobs.leases import JobLeaseLost

# Rows per transaction: about 0.1 s on SQLite for window records of a few KB.
ROWS_PER_COMMIT = 1000


def _release_windows_store(release: Release, rows: list[tuple]) -> None:
    """Stores window records: ``rows`` are (window id, stay id, disease group,
    hours since admission, the record's JSON as written to the release's
    records file). On PostgreSQL with COPY: an insert would serialise each
    record again and quote it into an array parameter, which costs more than
    writing the files."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        ReleaseWindow.objects.bulk_create(
            ReleaseWindow(
                release=release,
                window_id=window_id,
                stay_id=stay_id,
                disease_group=group,
                hours_since_admit=hours,
                record=json.loads(text),
            )
            for window_id, stay_id, group, hours, text in rows
        )
        return
    meta = ReleaseWindow._meta
    quote = connection.ops.quote_name
    columns = ", ".join(
        quote(meta.get_field(name).column)
        for name in (
            "release",
            "window_id",
            "stay_id",
            "disease_group",
            "hours_since_admit",
            "record",
        )
    )
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
            f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row((release.pk, *row))


def _delete_in_batches(release_id: int, still_allowed) -> bool:
    """Deletes the release's window and file rows, ``ROWS_PER_COMMIT`` per
    transaction, while ``still_allowed()`` (called inside each) is true.
    Returns False when it stopped because it was not."""
    for model in (ReleaseWindow, ReleaseFile):
        while True:
            with transaction.atomic():
                if not still_allowed():
                    return False
                ids = list(
                    model.objects.filter(release_id=release_id).values_list(
                        "pk", flat=True
                    )[:ROWS_PER_COMMIT]
                )
                if not ids:
                    break
                model.objects.filter(pk__in=ids).delete()
    return True


class ReleaseRows:
    """The rows of one build attempt, held by ``lease``: window records added
    stay by stay and committed ``ROWS_PER_COMMIT`` at a time, then the files'
    rows. Every transaction first checks that the release still names the
    lease (under its row lock on PostgreSQL, the one write lock on SQLite, so a
    cancel or a takeover is ordered with it) and raises ``JobLeaseLost``
    otherwise: a build that lost its release writes nothing more."""

    def __init__(self, *, release: Release, lease: str, size: int | None = None):
        self.release = release
        self.lease = lease
        self.size = size or ROWS_PER_COMMIT
        self.pending: list[tuple] = []

    def _held(self) -> bool:
        return (
            Release.objects.select_for_update()
            .filter(pk=self.release.pk, lease=self.lease)
            .exists()
        )

    def _check(self) -> None:
        if not self._held():
            raise JobLeaseLost(f"release {self.release.pk}: cancelled or taken over")

    def clear(self) -> None:
        """Deletes the rows an earlier attempt committed (a build that stopped
        mid-way), so that this attempt's rows are the only ones."""
        if not _delete_in_batches(self.release.pk, self._held):
            raise JobLeaseLost(f"release {self.release.pk}: cancelled or taken over")

    def windows(self, rows: list[tuple]) -> None:
        """Adds window records (as ``_release_windows_store`` takes them);
        commits every full batch."""
        self.pending.extend(rows)
        while len(self.pending) >= self.size:
            batch, self.pending = self.pending[: self.size], self.pending[self.size :]
            self._commit_windows(batch)

    def flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self._commit_windows(batch)

    def _commit_windows(self, batch: list[tuple]) -> None:
        with transaction.atomic():
            self._check()
            _release_windows_store(self.release, batch)

    def files(self, files: list[dict]) -> None:
        """The release's files (path, bytes, sha256, as the manifest lists
        them), in batches."""
        for start in range(0, len(files), self.size):
            with transaction.atomic():
                self._check()
                ReleaseFile.objects.bulk_create(
                    ReleaseFile(
                        release=self.release,
                        path=f["path"],
                        size_bytes=f["bytes"],
                        sha256=f["sha256"],
                    )
                    for f in files[start : start + self.size]
                )


def release_rows_discard(release: Release) -> bool:
    """Deletes the rows of a build that stopped, batch by batch, while no
    worker holds the release and it is not ready (a worker that takes it
    meanwhile deletes the rest itself before writing). Returns True when
    none is left."""

    def unheld() -> bool:
        return (
            Release.objects.select_for_update()
            .filter(pk=release.pk, lease="")
            .exclude(state=ReleaseState.READY)
            .exists()
        )

    return _delete_in_batches(release.pk, unheld)
