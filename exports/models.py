"""Immutable benchmark releases (spec section 8): RealICU-Gold from a campaign's
consensus, RealICU-Scale from a validated Oracle run; their files and window
records; researchers' prediction submissions and their scores."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotation.models import Campaign
from jobs.models import JobFields
from oracle.models import OracleRun, ValidationReport
from windows.models import Cohort

USER_MODEL = settings.AUTH_USER_MODEL


class ReleaseKind(models.TextChoices):
    GOLD = "gold", "RealICU-Gold"
    SCALE = "scale", "RealICU-Scale"
    SURVEILLANCE = "surveillance", "CodeClinic surveillance"


class ReleaseState(models.TextChoices):
    QUEUED = "queued", "Queued"
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class Release(JobFields, models.Model):
    """One versioned build of a benchmark. Once ``ready`` its files never change:
    a rebuild is a new version in a new directory. The build is a job
    (jobs.leases): its worker, heartbeat and progress are on the row."""

    kind = models.CharField(max_length=12, choices=ReleaseKind.choices)
    version = models.PositiveIntegerField()
    state = models.CharField(
        max_length=10, choices=ReleaseState.choices, default=ReleaseState.QUEUED
    )
    campaign = models.ForeignKey(
        Campaign, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    oracle_run = models.ForeignKey(
        OracleRun, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    cohort = models.ForeignKey(
        Cohort,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Surveillance: the cohort whose stays are checkpointed.",
    )
    validation_report = models.ForeignKey(
        ValidationReport,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    matcher_model = models.CharField(max_length=200)
    tau = models.FloatField()
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    directory = models.CharField(
        max_length=200, blank=True, help_text="Folder under REALICU_RELEASES_DIR."
    )
    manifest = models.JSONField(default=dict, blank=True)
    window_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "version"], name="release_kind_version_uniq"
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(
                        kind="gold", campaign__isnull=False, oracle_run__isnull=True
                    )
                    | models.Q(
                        kind="scale", oracle_run__isnull=False, campaign__isnull=True
                    )
                    | models.Q(
                        kind="surveillance",
                        cohort__isnull=False,
                        campaign__isnull=True,
                        oracle_run__isnull=True,
                    )
                ),
                name="release_source_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} v{self.version}"

    @property
    def name(self) -> str:
        return f"realicu-{self.kind}-v{self.version}"

    @property
    def live_progress(self) -> dict:
        """Progress as the worker last wrote it on the row (jobs.leases)."""
        return _row_progress(self, finished=self.state == ReleaseState.READY)

    @property
    def published_files(self):
        """The files of a ready release; none before: a build commits its
        rows in batches before it publishes the release (exports.building)."""
        return self.files.all() if self.state == ReleaseState.READY else []


class ReleaseFile(models.Model):
    """A file of a release, with the checksum that the manifest lists."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=300, help_text="Relative to the release folder.")
    size_bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "path"], name="release_file_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.release.name}/{self.path}"


class ReleaseWindow(models.Model):
    """A window record of a release as written to ``windows.jsonl``, kept for
    paging with filters and for scoring against the release's own labels."""

    release = models.ForeignKey(
        Release, on_delete=models.CASCADE, related_name="window_records"
    )
    window_id = models.BigIntegerField()
    stay_id = models.BigIntegerField()
    disease_group = models.CharField(max_length=20)
    hours_since_admit = models.FloatField()
    record = models.JSONField()

    class Meta:
        ordering = ["release", "stay_id", "hours_since_admit", "window_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "window_id"], name="release_window_uniq"
            )
        ]
        indexes = [
            models.Index(
                fields=["release", "stay_id", "hours_since_admit"],
                name="release_window_stay",
            ),
            models.Index(
                fields=["release", "disease_group"], name="release_window_group"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.release.name} window {self.window_id}"


class SubmissionState(models.TextChoices):
    QUEUED = "queued", "Queued"
    SCORING = "scoring", "Scoring"
    SCORED = "scored", "Scored"
    FAILED = "failed", "Failed"


class Submission(JobFields, models.Model):
    """A researcher's predictions for a release (a validated JSONL file) and,
    once scored, its metrics (spec section 6) overall and by group. Scoring is
    a job (jobs.leases)."""

    release = models.ForeignKey(
        Release, on_delete=models.PROTECT, related_name="submissions"
    )
    submitted_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="release_submissions"
    )
    model_name = models.CharField(max_length=100)
    k = models.PositiveSmallIntegerField(default=5)
    public = models.BooleanField(
        default=False, help_text="Shown on the release's leaderboard."
    )
    state = models.CharField(
        max_length=10, choices=SubmissionState.choices, default=SubmissionState.QUEUED
    )
    file_path = models.CharField(
        max_length=300, help_text="Under the submissions folder."
    )
    sha256 = models.CharField(max_length=64)
    prediction_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    scored_at = models.DateTimeField(null=True, blank=True)
    scores = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    baseline = models.JSONField(
        default=dict,
        blank=True,
        help_text="For a run of an agent on the platform (agents.AgentRun): its "
        "agent, prompt version, backbone, run id and whether its scores are "
        "plumbing only (a fake LLM). Empty for an uploaded file.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["release", "public", "state"], name="submission_board")
        ]

    def __str__(self) -> str:
        return f"Submission {self.pk} ({self.model_name}) to {self.release.name}"

    @property
    def live_progress(self) -> dict:
        return _row_progress(self, finished=self.state == SubmissionState.SCORED)


def _row_progress(row: JobFields, *, finished: bool) -> dict:
    percent = 100 if finished and not row.progress_total else row.percent
    return {
        "done": row.progress_done,
        "total": row.progress_total,
        "label": row.progress_label,
        "percent": percent,
    }


class ApiToken(models.Model):
    """A researcher's or admin's key to the API (one per user), kept only as a
    keyed hash (exports.tokens): ``prefix`` is the key's first characters, to
    find it and to tell tokens apart on the admin site; ``digest`` its
    HMAC-SHA256 under a key derived from SECRET_KEY. The key itself is shown
    once, when made, and stored nowhere. Refused ``REALICU_API_TOKEN_DAYS``
    after ``created``."""

    user = models.OneToOneField(
        USER_MODEL, on_delete=models.CASCADE, related_name="api_token"
    )
    prefix = models.CharField(max_length=8, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
