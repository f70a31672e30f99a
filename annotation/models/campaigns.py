"""Gold campaigns: which physician labels which window, their labels of the four
tasks (spec sections 3-4), and the append-only history of every save."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from annotation.critical import (
    critical_action_rules_clean,
    default_critical_action_rules,
)
from annotation.models.appendonly import AppendOnlyModel
from windows.models import Window

USER_MODEL = settings.AUTH_USER_MODEL


class CampaignKind(models.TextChoices):
    GOLD = "gold", "Gold"


class Campaign(models.Model):
    """A set of windows, each labelled blind by ``annotators_per_window``
    physicians."""

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(
        max_length=8, choices=CampaignKind.choices, default=CampaignKind.GOLD
    )
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    annotators_per_window = models.PositiveSmallIntegerField(default=2)
    evidence_required = models.BooleanField(
        default=True,
        help_text=(
            "Each acute problem, added action and red flag must cite at least one "
            "evidence event before the label can be submitted."
        ),
    )
    critical_action_categories = models.JSONField(
        default=default_critical_action_rules,
        help_text=(
            "Rules for the recorded actions shown for rating: a list of "
            '{"key", "label", "domains": [...], "categories": [...]}; an empty '
            "categories list takes every action of the domains."
        ),
    )
    physicians = models.ManyToManyField(
        USER_MODEL, through="CampaignPhysician", related_name="annotation_campaigns"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            self.critical_action_categories = critical_action_rules_clean(
                self.critical_action_categories
            )
        except ValidationError as error:
            raise ValidationError(
                {"critical_action_categories": error.messages}
            ) from error


class CampaignPhysician(models.Model):
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="campaign_physicians"
    )
    user = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="campaign_memberships"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "user"], name="campaign_physician_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.campaign}"


class CampaignWindow(models.Model):
    """A window of a campaign and where its review stands. Once adjudication has
    started, authors can no longer reopen their labels. Once its consensus has
    no open dispute (all agreed, or all adjudicated) it is closed for good
    (annotation.blindness): its labels are final and its raters no longer
    blind to each other."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="campaign_windows"
    )
    # PROTECT: rebuilding a stay's windows must not delete physicians' labels.
    window = models.ForeignKey(
        Window, on_delete=models.PROTECT, related_name="campaign_windows"
    )
    adjudication_started_at = models.DateTimeField(null=True, blank=True)
    adjudicated_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the window closed (annotation.blindness): its consensus "
        "first had no open dispute, agreed or adjudicated. Never unset.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "window"], name="campaign_window_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.campaign}: {self.window}"


class AssignmentState(models.TextChoices):
    TODO = "todo", "To do"
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"


class Assignment(models.Model):
    """One physician's task of labelling one window of a campaign. A window taken
    from a physician who abandoned it keeps its row, inactive, and the new
    assignment points back to it."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="assignments"
    )
    window = models.ForeignKey(
        Window, on_delete=models.PROTECT, related_name="assignments"
    )
    annotator = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="assignments"
    )
    state = models.CharField(
        max_length=10, choices=AssignmentState.choices, default=AssignmentState.TODO
    )
    active = models.BooleanField(default=True)
    reassigned_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reassigned_to",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    assigned_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "window", "annotator"],
                name="assignment_campaign_window_annotator_uniq",
            )
        ]
        indexes = [
            models.Index(
                fields=["annotator", "active", "campaign"],
                name="assignment_annotator_queue",
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.window} ({self.state})"


class PatientStatus(models.TextChoices):
    IMPROVING = "improving", "Improving"
    STABLE = "stable", "Stable"
    DETERIORATING = "deteriorating", "Deteriorating"


class ActionRating(models.TextChoices):
    BEST_PRACTICE = "best_practice", "Best practice"
    ACCEPTABLE = "acceptable", "Acceptable"
    POTENTIALLY_HARMFUL = "potentially_harmful", "Potentially harmful"


class Label(models.Model):
    """The current label of an assignment, draft or submitted.

    ``payload`` holds the set tasks and the status evidence::

        {"status_evidence": [event ids],
         "acute_problems": [{"text", "evidence": [event ids]}],
         "action_ratings": [{"event_id", "rating", "evidence": [event ids]}],
         "added_actions": [{"text", "evidence"}],
         "red_flags": [{"text", "evidence"}]}

    ``version`` counts saves; a save names the version it was based on and is
    refused when another save came first.
    """

    assignment = models.OneToOneField(
        Assignment, on_delete=models.CASCADE, related_name="label"
    )
    status = models.CharField(max_length=16, choices=PatientStatus.choices, blank=True)
    payload = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    submission_id = models.CharField(max_length=64, blank=True)
    time_on_task_seconds = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"Label of {self.assignment} v{self.version}"

    def as_payload(self) -> dict:
        """The label as a client sends it back: the payload with its status."""
        return {"status": self.status, **self.payload}


class RevisionKind(models.TextChoices):
    DRAFT = "draft", "Draft saved"
    SUBMIT = "submit", "Submitted"
    REOPEN = "reopen", "Reopened"


class LabelRevision(AppendOnlyModel):
    """One save of a label, as it was: append-only (the database refuses updates
    and deletes on PostgreSQL too)."""

    label = models.ForeignKey(Label, on_delete=models.PROTECT, related_name="revisions")
    version = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=RevisionKind.choices)
    author = models.ForeignKey(USER_MODEL, on_delete=models.PROTECT, related_name="+")
    saved_at = models.DateTimeField()
    payload = models.JSONField(help_text="The label as saved, status included.")
    time_on_task_seconds = models.PositiveIntegerField(default=0)

    append_only_refusal = "Label history is append-only: revisions are never {verb}."

    class Meta:
        ordering = ["label_id", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["label", "version"], name="label_revision_version_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.label} revision {self.version} ({self.kind})"
