"""The fields every long job row carries, and the outbox.

A job row (an import, an Oracle run, a release build, a validation, an agreement
recompute, a scoring) is the truth about its job: the worker holding it writes a
heartbeat and its progress onto the row every few seconds (``jobs.heartbeat``),
and a page or the reaper reads liveness from there, never from a cache key.
"""

from django.db import models

from jobs.progress import percent_of


class JobFields(models.Model):
    """Mixed into each job model. ``lease`` names the attempt that holds the job
    (empty when none does): a worker writes its heartbeat only while its lease
    is the row's, so a worker presumed dead that wakes up finds out and stops.
    ``attempts`` counts the workers that took the job; the reaper fails a job
    whose workers keep dying rather than re-queue it forever."""

    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease = models.CharField(max_length=32, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    progress_label = models.CharField(max_length=255, blank=True)

    class Meta:
        abstract = True

    @property
    def percent(self) -> int:
        return percent_of(self.progress_done, self.progress_total)


class OutboxMessage(models.Model):
    """A task that must run because a transaction committed (agreement after a
    window's last submit, a release build, an import start). Written in that
    transaction; sent to the broker once it commits and deleted when sent. A
    broker that cannot be reached leaves the row for the reaper, so an outage
    delays the work but never loses it. Tasks sent twice are harmless: every
    task behind the outbox is idempotent."""

    task = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    key = models.CharField(
        max_length=200,
        blank=True,
        db_index=True,
        help_text="Messages with the same key waiting at once are sent once.",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"


class WorkerPresence(models.Model):
    """One row per worker process: when its consumer loop last passed
    (jobs.liveness). Written every few seconds by the worker, read by pages and
    commands that must say whether any worker is taking work."""

    name = models.CharField(max_length=255, unique=True)
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-beat_at"]

    def __str__(self) -> str:
        return self.name
