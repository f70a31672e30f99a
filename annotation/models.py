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
from jobs.models import JobFields
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


class LabelRevisionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ValidationError(
            "Label history is append-only: revisions are never changed."
        )

    def delete(self):
        raise ValidationError(
            "Label history is append-only: revisions are never deleted."
        )


class LabelRevision(models.Model):
    """One save of a label, as it was: append-only (the database refuses updates
    and deletes on PostgreSQL too)."""

    label = models.ForeignKey(Label, on_delete=models.PROTECT, related_name="revisions")
    version = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=RevisionKind.choices)
    author = models.ForeignKey(USER_MODEL, on_delete=models.PROTECT, related_name="+")
    saved_at = models.DateTimeField()
    payload = models.JSONField(help_text="The label as saved, status included.")
    time_on_task_seconds = models.PositiveIntegerField(default=0)

    objects = LabelRevisionQuerySet.as_manager()

    class Meta:
        ordering = ["label_id", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["label", "version"], name="label_revision_version_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.label} revision {self.version} ({self.kind})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError(
                "Label history is append-only: revisions are never changed."
            )
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError(
            "Label history is append-only: revisions are never deleted."
        )


# Agreement, consensus and adjudication (spec section 4) ----------------------


class ConsensusTask(models.TextChoices):
    """What an adjudication decision is about: a task, or the whole window."""

    STATUS = "status", "Patient status"
    ACUTE_PROBLEMS = "acute_problems", "Acute problems"
    RECOMMENDED_ACTIONS = "recommended_actions", "Recommended actions"
    RED_FLAGS = "red_flags", "Red flags"
    WINDOW = "window", "Whole window"


class WindowAgreement(models.Model):
    """How the submitted labels of a window agree, as last computed: derived
    data, replaced on every computation and removed while a third rater is
    awaited.

    ``clusters`` holds, per set task, the items of all labels grouped by
    meaning: ``[{"id", "kept", "annotators": [user ids], "items": [{"ref",
    "label_id", "annotator_id", "field", "index", "text", "evidence",
    "event_id"}]}]``; a cluster is kept when at least two annotators have an
    item in it. ``pairwise_f1`` holds, per set task, ``{"mean", "pairs":
    [{"labels": [a, b], "annotators": [a, b], "f1"}]}``.
    """

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="window_agreements"
    )
    window = models.ForeignKey(Window, on_delete=models.PROTECT, related_name="+")
    computed_at = models.DateTimeField()
    labels = models.JSONField(
        default=list, help_text='The labels used: [{"label_id", "version"}].'
    )
    statuses = models.JSONField(
        default=dict, help_text="Status of each label, by label id."
    )
    status_agreed = models.BooleanField()
    status_value = models.CharField(
        max_length=16, choices=PatientStatus.choices, blank=True
    )
    pairwise_f1 = models.JSONField(default=dict)
    clusters = models.JSONField(default=dict)
    matcher_model = models.CharField(max_length=200)
    tau = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "window"], name="window_agreement_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"Agreement on {self.window} in {self.campaign}"


class RecomputeState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class AgreementRecompute(JobFields):
    """An admin's recompute of the agreement and consensus of every complete
    window of a campaign: a job row (jobs.leases) that its worker heart-beats
    and the reaper re-queues when that worker dies. ``computed``: windows whose
    agreement this job wrote; ``skipped``: windows still waiting for labels."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="agreement_recomputes"
    )
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
    computed = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Recompute {self.pk} of {self.campaign} ({self.state})"

    @property
    def active(self) -> bool:
        return self.state in (RecomputeState.QUEUED, RecomputeState.RUNNING)


class ConsensusStatusSource(models.TextChoices):
    AGREED = "agreed", "All annotators agreed"
    MAJORITY = "majority", "Majority of three or more"
    SETTLED = "settled", "Settled by an admin"


class ConsensusLabel(models.Model):
    """The window's Gold label as it stands: agreed or settled status and kept
    items, each with its provenance, and the disputes still open. Rebuilt from
    the agreement and the adjudication decisions; never edited by hand.

    ``items`` per set task: ``[{"text", "texts", "evidence", "source":
    "consensus" | "adjudicated", "cluster_id", "label_ids", "annotators",
    "decision_id"}]``. ``open_disputes``: ``[{"task", "item_ref", "kind",
    "texts"}]``.
    """

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="consensus_labels"
    )
    window = models.ForeignKey(Window, on_delete=models.PROTECT, related_name="+")
    agreement = models.OneToOneField(
        WindowAgreement, on_delete=models.CASCADE, related_name="consensus"
    )
    built_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=PatientStatus.choices, blank=True)
    status_source = models.CharField(
        max_length=10, choices=ConsensusStatusSource.choices, blank=True
    )
    status_decision = models.ForeignKey(
        "AdjudicationDecision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    status_evidence = models.JSONField(
        default=list,
        blank=True,
        help_text="Event ids: the union of the status evidence of the labels "
        "whose status is the consensus status.",
    )
    dropped = models.BooleanField(default=False)
    items = models.JSONField(default=dict)
    open_disputes = models.JSONField(default=list)
    dispute_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "window"], name="consensus_label_uniq"
            )
        ]
        indexes = [
            models.Index(
                fields=["campaign", "dispute_count"], name="consensus_open_disputes"
            )
        ]

    def __str__(self) -> str:
        return f"Consensus on {self.window} in {self.campaign}"


class AdjudicationAction(models.TextChoices):
    ACCEPT = "accept", "Accept the item"
    REWRITE = "rewrite", "Rewrite the item"
    MERGE = "merge", "Merge matched items into one wording"
    DROP = "drop", "Drop the item"
    SETTLE_STATUS = "settle_status", "Settle the status"
    REQUEST_THIRD_RATER = "request_third_rater", "Ask a third physician"
    DROP_WINDOW = "drop_window", "Drop the window"


class AdjudicationDecisionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ValidationError(
            "Adjudication decisions are append-only: they are never changed."
        )

    def delete(self):
        raise ValidationError(
            "Adjudication decisions are append-only: they are never deleted."
        )


class AdjudicationDecision(models.Model):
    """One admin decision on a disputed field of a window: append-only, with its
    author, time and reason. Physicians' labels are never changed by it."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.PROTECT, related_name="adjudication_decisions"
    )
    window = models.ForeignKey(Window, on_delete=models.PROTECT, related_name="+")
    task = models.CharField(max_length=20, choices=ConsensusTask.choices)
    item_ref = models.CharField(
        max_length=100,
        blank=True,
        help_text="The disputed cluster's id (its first item, label/field/index).",
    )
    action = models.CharField(max_length=20, choices=AdjudicationAction.choices)
    new_text = models.CharField(max_length=300, blank=True)
    new_status = models.CharField(
        max_length=16, choices=PatientStatus.choices, blank=True
    )
    reason = models.TextField()
    author = models.ForeignKey(USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    context = models.JSONField(
        default=dict,
        help_text="What the admin decided on: the disputed texts, the labels, "
        "the assignment added.",
    )

    objects = AdjudicationDecisionQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["campaign", "window"], name="adjudication_window")
        ]

    def __str__(self) -> str:
        return f"{self.action} on {self.task} of {self.window} by {self.author}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError(
                "Adjudication decisions are append-only: they are never changed."
            )
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError(
            "Adjudication decisions are append-only: they are never deleted."
        )


# Threshold calibration (spec section 5) ---------------------------------------
# Here rather than in evaluation: the pairs are drawn from campaigns' labels and
# judged by physicians, which evaluation (campaign-agnostic) knows nothing of.
# The sweep itself is evaluation.calibration's, on plain cosines and judgments.


class CalibrationStratum(models.TextChoices):
    NEAR_MATCH = "near_match", "Near match (just at or above tau)"
    NEAR_MISS = "near_miss", "Near miss (just below tau)"
    RANDOM = "random", "Random pair"


class CalibrationSet(models.Model):
    """Pairs of real label items, drawn for physicians to judge as the same or
    different, stratified by their cosine under one matcher model."""

    name = models.CharField(max_length=200, unique=True)
    model_name = models.CharField(
        max_length=200, help_text="The matcher model whose cosines the pairs carry."
    )
    tau_at_draw = models.FloatField(help_text="The model's tau the strata were cut at.")
    band = models.FloatField(help_text="Width of the near-match and near-miss bands.")
    seed = models.IntegerField(default=0)
    campaigns = models.ManyToManyField(Campaign, related_name="+")
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class CalibrationDraw(JobFields):
    """An admin's request to draw a calibration set. Drawing embeds the
    campaigns' items with the matcher model, so a worker runs it (the web
    processes never load the model: jobs.leases) and the list page polls its
    progress; ``calibration_set`` is the set drawn once it is done."""

    name = models.CharField(max_length=200)
    campaigns = models.ManyToManyField(Campaign, related_name="+")
    judges = models.ManyToManyField(USER_MODEL, related_name="+")
    per_stratum = models.PositiveIntegerField()
    band = models.FloatField()
    seed = models.IntegerField(default=0)
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
    calibration_set = models.ForeignKey(
        CalibrationSet,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Draw {self.pk} of {self.name!r} ({self.state})"

    @property
    def active(self) -> bool:
        return self.state in (RecomputeState.QUEUED, RecomputeState.RUNNING)


class CalibrationPair(models.Model):
    """Two items of the same task, as written in labels. ``sources`` says where
    each text was first found: ``[{"label_id", "field", "index"}, {...}]``."""

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="pairs"
    )
    position = models.PositiveIntegerField(help_text="Order shown to judges.")
    task = models.CharField(max_length=20, choices=ConsensusTask.choices)
    text_a = models.CharField(max_length=300)
    text_b = models.CharField(max_length=300)
    cosine = models.FloatField()
    stratum = models.CharField(max_length=12, choices=CalibrationStratum.choices)
    sources = models.JSONField(default=list)

    class Meta:
        ordering = ["calibration_set", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["calibration_set", "position"], name="calibration_pair_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.text_a!r} / {self.text_b!r} ({self.cosine:.2f})"


class CalibrationJudgment(models.Model):
    """A physician's judgment of a pair: the same item or not. One per judge
    and pair; judging again replaces it."""

    pair = models.ForeignKey(
        CalibrationPair, on_delete=models.CASCADE, related_name="judgments"
    )
    judge = models.ForeignKey(USER_MODEL, on_delete=models.PROTECT, related_name="+")
    same = models.BooleanField()
    judged_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge"], name="calibration_judgment_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.judge}: {'same' if self.same else 'different'} ({self.pair_id})"


class CalibrationInvitation(models.Model):
    """An admin inviting a physician to judge a calibration set: only invited
    physicians see the set (blindness: its pairs are real label items)."""

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="invitations"
    )
    judge = models.ForeignKey(
        USER_MODEL, on_delete=models.CASCADE, related_name="calibration_invitations"
    )
    invited_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    invited_at = models.DateTimeField()

    class Meta:
        ordering = ["calibration_set", "judge__username"]
        constraints = [
            models.UniqueConstraint(
                fields=["calibration_set", "judge"], name="calibration_invitation_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.judge} invited to judge {self.calibration_set}"


class TauAdoption(models.Model):
    """An admin adopting a tau for a matcher model from a calibration report:
    who, when, the tau before and after, and the report as it was shown."""

    matcher_model = models.ForeignKey(
        "evaluation.MatcherModel", on_delete=models.PROTECT, related_name="+"
    )
    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.PROTECT, related_name="adoptions"
    )
    tau = models.FloatField()
    previous_tau = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    report = models.JSONField(
        default=dict, help_text="The sweep (per tau) and pair counts adopted from."
    )
    adopted_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    adopted_at = models.DateTimeField()

    class Meta:
        ordering = ["-adopted_at", "-id"]

    def __str__(self) -> str:
        return f"tau {self.tau:g} for {self.matcher_model.name} by {self.adopted_by}"
