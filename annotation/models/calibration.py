"""Threshold calibration (spec section 5): pairs of real label items drawn for
physicians to judge as the same or different, their judgments, and the tau an
admin adopted from them.

Here rather than in evaluation: the pairs are drawn from campaigns' labels and
judged by physicians, which evaluation (campaign-agnostic) knows nothing of.
The sweep itself is evaluation.calibration's, on plain cosines and judgments."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models.campaigns import Campaign
from annotation.models.consensus import ConsensusTask
from annotation.models.jobs import AdminJob

USER_MODEL = settings.AUTH_USER_MODEL


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


class CalibrationDraw(AdminJob):
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
    calibration_set = models.ForeignKey(
        CalibrationSet,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    def __str__(self) -> str:
        return f"Draw {self.pk} of {self.name!r} ({self.state})"


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
