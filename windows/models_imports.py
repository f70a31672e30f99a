"""Import runs and the batches of a fanned-out import: job rows
(jobs.models.JobFields) of the windows app, kept apart from the clinical
tables; ``windows.models`` exports them."""

from django.conf import settings
from django.db import models

from jobs.models import JobFields
from windows.models import BatchFields, DataSource, Source


class ImportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    # A fanned-out MIMIC-IV import whose batches are jobs of their own
    # (windows.import_batches): no worker holds the run itself.
    BATCHES = "batches", "Batches running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class ImportRun(JobFields):
    """One run of an importer, with its progress and outcome, from page or command.
    A job row (jobs.models.JobFields): the worker running it writes its heartbeat
    and progress here, and the reaper re-queues it when the worker goes silent."""

    source = models.CharField(max_length=8, choices=Source.choices)
    path = models.CharField(
        max_length=1024, blank=True, help_text="Empty: the CLIF demo."
    )
    status = models.CharField(
        max_length=16, choices=ImportStatus.choices, default=ImportStatus.QUEUED
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    data_sources = models.ManyToManyField(
        DataSource,
        blank=True,
        related_name="import_runs",
        help_text="The sources the import read, with their data-use terms: "
        "linked to every stay it imports.",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_source_display()} import {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        return self.live_progress["percent"]

    @property
    def live_progress(self) -> dict:
        """Progress as the worker last wrote it onto the row (every heartbeat
        while the run is open, the final figures when it ended)."""
        done, total = self.progress_done, self.progress_total
        if total:
            percent = min(100, round(100 * done / total))
        else:
            percent = 100 if self.status == ImportStatus.DONE else 0
        return {
            "done": done,
            "total": total,
            "label": self.progress_label,
            "percent": percent,
        }

    @property
    def is_open(self) -> bool:
        return self.status in (
            ImportStatus.QUEUED,
            ImportStatus.RUNNING,
            ImportStatus.BATCHES,
        )

    @property
    def worker_alive(self) -> bool:
        """A running import whose worker wrote a heartbeat recently."""
        from jobs.leases import is_live

        return self.status == ImportStatus.RUNNING and is_live(self)

    @property
    def heartbeat_age_seconds(self) -> int | None:
        if self.heartbeat_at is None:
            return None
        from django.utils import timezone

        return max(0, round((timezone.now() - self.heartbeat_at).total_seconds()))

    @property
    def resumable(self) -> bool:
        """Failed, cancelled, or running without a live worker (stuck)."""
        return self.status in (ImportStatus.FAILED, ImportStatus.CANCELLED) or (
            self.status == ImportStatus.RUNNING and not self.worker_alive
        )


class ImportBatch(BatchFields):
    """One batch of a fanned-out MIMIC-IV import (windows.import_batches): the
    admissions of a few patients, whose spilled event rows wait in the store
    under ``spill_prefix``. A job row: one worker at a time holds it under a
    lease, the reaper re-queues it when its worker goes silent. Its rows and
    its ``done`` state commit in one transaction, so a batch is imported once.
    ``result`` holds its share of the run's summary."""

    run = models.ForeignKey(ImportRun, on_delete=models.CASCADE, related_name="batches")
    index = models.PositiveIntegerField()
    hadm_ids = models.JSONField(default=list)
    spill_prefix = models.CharField(max_length=255)
    state = models.CharField(max_length=8, default="queued")

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="import_batch_uniq")
        ]

    def __str__(self) -> str:
        return f"Batch {self.index} of import {self.run_id} ({self.state})"


# Cohort has a field named ``settings``, which hides django.conf.settings in its body.
