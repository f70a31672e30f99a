"""The jobs an admin starts from a page (a campaign's agreement recompute, a
calibration draw): a job row (jobs.leases) with its state, who started it
and when, and the error that ended it."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from jobs.models import JobFields

USER_MODEL = settings.AUTH_USER_MODEL


class RecomputeState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class AdminJob(JobFields):
    """A job an admin started; ``active`` while queued or running, newest
    first."""

    state = models.CharField(
        max_length=8, choices=RecomputeState.choices, default=RecomputeState.QUEUED
    )
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def active(self) -> bool:
        return self.state in (RecomputeState.QUEUED, RecomputeState.RUNNING)
