"""Agent runs over a release (spec section 9): a reference agent on a backbone,
or a researcher's HTTP endpoint (online evaluation), one window at a time.

A run is split per stay: each ``AgentStayState`` is a job of its own (jobs
registry, kind ``agent-stay``) that a Celery worker takes with a lease and
works through the stay's windows in time order, saving each prediction with
the stay's memory in one transaction, so a stay taken over after its worker
died restarts from its first window without a prediction. The run row
(``AgentRun``) carries the totals; when its last stay finishes its predictions
are scored as a baseline submission (exports.Submission)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from jobs.models import JobFields
from jobs.progress import percent_of
from oracle.backbones.endpoints import Purpose
from oracle.models import AddressChecked

USER_MODEL = settings.AUTH_USER_MODEL


class RunState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SCORING = "scoring", "Scoring"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


OPEN_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.SCORING)


class ContextMode(models.TextChoices):
    """How a stay's bedside history reaches an endpoint (agents.sessions)."""

    STREAMED = "streamed", "Streamed: the history once, then each window's new events"
    FULL = "full", "Whole: the whole history with every window"


class OnlineEndpoint(AddressChecked, models.Model):
    """A researcher's agent behind an HTTP endpoint, registered for a release.
    Its URL must be on a public address, unless the operator allowed its
    network (oracle.backbones.endpoints). ``context_mode`` says whether a
    stay's history is sent once per session then only what is new
    (streamed), or whole with every window (agents.sessions)."""

    release = models.ForeignKey(
        "exports.Release", on_delete=models.CASCADE, related_name="agent_endpoints"
    )
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500)
    timeout_seconds = models.FloatField(default=30.0)
    max_retries = models.PositiveSmallIntegerField(default=3)
    requests_per_minute = models.PositiveIntegerField(default=600)
    context_mode = models.CharField(
        max_length=10, choices=ContextMode.choices, default=ContextMode.STREAMED
    )
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="agent_endpoints"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    address_field = "url"
    address_purpose = Purpose.ENDPOINT
    address_refused = "The endpoint's URL is refused: {}"

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"


class AgentRun(JobFields):
    release = models.ForeignKey(
        "exports.Release", on_delete=models.PROTECT, related_name="agent_runs"
    )
    agent = models.CharField(
        max_length=40, help_text="A reference agent's name, or 'endpoint'."
    )
    backbone = models.ForeignKey(
        "oracle.Backbone",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="agent_runs",
    )
    endpoint = models.ForeignKey(
        OnlineEndpoint,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
    )
    prompt_version = models.CharField(max_length=40, blank=True)
    state = models.CharField(
        max_length=10, choices=RunState.choices, default=RunState.QUEUED
    )
    stays_total = models.PositiveIntegerField(default=0)
    stays_done = models.PositiveIntegerField(default=0)
    windows_total = models.PositiveIntegerField(default=0)
    windows_done = models.PositiveIntegerField(default=0)
    windows_failed = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    requests = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    submission = models.ForeignKey(
        "exports.Submission",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="agent_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Agent run {self.pk} ({self.label}) on {self.release.name}"

    @property
    def label(self) -> str:
        if self.endpoint_id:
            return f"endpoint: {self.endpoint.name}"
        return self.agent

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_RUN_STATES

    @property
    def plumbing_only(self) -> bool:
        """Predictions from a fake or test LLM: their scores test the
        plumbing, not a model."""
        if self.backbone_id is None:
            return False
        return backbone_is_fake(self.backbone)

    @property
    def live_progress(self) -> dict:
        total = self.windows_total
        done = self.windows_done
        return {
            "done": done,
            "total": total,
            "percent": percent_of(done, total),
            "label": self.progress_label,
        }


def backbone_is_fake(backbone) -> bool:
    """A backbone whose model names a fake, test or rules server: its
    parameters say ``{"plumbing_only": true}``, or its model name or kind
    says so."""
    if (backbone.parameters or {}).get("plumbing_only"):
        return True
    model = (backbone.model or "").lower()
    return backbone.kind == "rules" or any(
        word in model for word in ("fake", "test", "smollm2", "mock")
    )


class StayState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class AgentStayState(JobFields):
    """One stay of a run: a job of its own (kind ``agent-stay``), and the
    agent's memory for the stay after its last predicted window."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="stays")
    stay = models.ForeignKey("windows.Stay", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(
        max_length=10, choices=StayState.choices, default=StayState.QUEUED
    )
    memory = models.JSONField(default=dict, blank=True)
    windows_total = models.PositiveIntegerField(default=0)
    windows_done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "stay_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "stay"], name="agent_stay_once")
        ]

    def __str__(self) -> str:
        return f"Run {self.run_id}, stay {self.stay_id}"


class AgentPrediction(models.Model):
    run = models.ForeignKey(
        AgentRun, on_delete=models.CASCADE, related_name="predictions"
    )
    window = models.ForeignKey(
        "windows.Window", on_delete=models.PROTECT, related_name="+"
    )
    stay_id = models.BigIntegerField()
    prediction = models.JSONField(default=dict, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # What the connection met, for admins only: an online endpoint's owner is
    # told one sentence for every failure to reach it (agents.remote).
    error_detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "stay_id", "window_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "window"], name="agent_prediction_once"
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.run_id}, window {self.window_id}"
