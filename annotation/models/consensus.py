"""Agreement, consensus and adjudication (spec section 4): how a window's
submitted labels agree, the consensus built from them, the campaign-wide
recompute job, and the admins' append-only decisions on what is disputed."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models.appendonly import AppendOnlyModel
from annotation.models.campaigns import Campaign, PatientStatus
from annotation.models.jobs import AdminJob
from windows.models import Window

USER_MODEL = settings.AUTH_USER_MODEL


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


class AgreementRecompute(AdminJob):
    """An admin's recompute of the agreement and consensus of every complete
    window of a campaign: a job row (jobs.leases) that its worker heart-beats
    and the reaper re-queues when that worker dies. ``computed``: windows whose
    agreement this job wrote; ``skipped``: windows still waiting for labels."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="agreement_recomputes"
    )
    computed = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"Recompute {self.pk} of {self.campaign} ({self.state})"


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


class AdjudicationDecision(AppendOnlyModel):
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

    append_only_refusal = (
        "Adjudication decisions are append-only: they are never {verb}."
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["campaign", "window"], name="adjudication_window")
        ]

    def __str__(self) -> str:
        return f"{self.action} on {self.task} of {self.window} by {self.author}"
