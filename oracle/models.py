"""The Oracle (spec section 7): the backbones an admin configures, the versioned
hindsight prompts, Oracle runs over a campaign's or a cohort's windows, the labels
they produce with full provenance, and their validation against Gold consensus."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from annotation.models import Campaign, PatientStatus
from jobs.models import JobFields
from oracle.backbones.endpoints import EndpointRefused, Purpose, url_check
from windows.models import Cohort, Window

USER_MODEL = settings.AUTH_USER_MODEL


class BackboneKind(models.TextChoices):
    RULES = "rules", "Rules from concept tracks (no LLM)"
    OPENAI = "openai", "OpenAI-compatible chat completions"


class ReplyFormat(models.TextChoices):
    """How a backbone asks its server to constrain the reply to the label's
    JSON Schema, in the dialect that server speaks."""

    JSON_SCHEMA = "json_schema", "response_format json_schema (OpenAI, vLLM, llama.cpp)"
    LLAMACPP_PYTHON = (
        "llamacpp_python",
        "response_format json_object with schema (llama-cpp-python server)",
    )
    OLLAMA = "ollama", "format with the schema (Ollama's native field)"
    JSON_OBJECT = "json_object", "response_format json_object, no schema"
    NONE = "none", "Nothing: the prompt alone asks for JSON"


class Tokenizer(models.TextChoices):
    """Where a backbone's prompts are counted in the model's own tokens."""

    ESTIMATE = "", "Estimate from characters (calibrated from the server's usage)"
    LLAMACPP_PYTHON = "llamacpp_python", "llama-cpp-python /extras/tokenize/count"
    LLAMACPP = "llamacpp", "llama.cpp server /tokenize"
    VLLM = "vllm", "vLLM /tokenize"


class AddressChecked:
    """A model with a URL field (``address_field``) that ``clean_fields``
    checks against the one address policy (oracle.backbones.endpoints) for
    ``address_purpose``, so that every form that saves one (the admin site's
    among them) checks it as the service that creates one does. A refusal is
    ``address_refused`` with the policy's reason in it."""

    address_field: str
    address_purpose: Purpose
    address_refused = "{}"

    def clean_fields(self, exclude=None) -> None:
        """The fields' own checks, then the address policy's."""
        errors: dict = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as error:
            errors = error.update_error_dict(errors)
        field, url = self.address_field, getattr(self, self.address_field)
        if url and field not in errors and field not in (exclude or ()):
            try:
                url_check(url, purpose=self.address_purpose)
            except EndpointRefused as error:
                errors[field] = [self.address_refused.format(error)]
        if errors:
            raise ValidationError(errors)


class Backbone(AddressChecked, models.Model):
    """A labeller the admin has configured. The API key is never stored: the
    backbone names the environment variable that holds it.

    ``context_tokens`` and ``max_completion_tokens`` bound every request: the
    prompt gets the window minus the reply budget minus a margin.
    ``server_report`` keeps what was detected from the server (and when);
    ``calibration`` the observed characters per token of its prompts, from
    the server's ``usage.prompt_tokens``."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=8, choices=BackboneKind.choices)
    base_url = models.URLField(
        blank=True, help_text="e.g. http://127.0.0.1:8000/v1 (OpenAI-compatible only)."
    )
    model = models.CharField(
        max_length=200, blank=True, help_text="The model name the endpoint expects."
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the API key "
        "(the key itself is never stored or logged).",
    )
    parameters = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            'Sampling parameters sent with each request, e.g. {"temperature": 0}.'
        ),
    )
    timeout_seconds = models.FloatField(default=120.0)
    max_retries = models.PositiveSmallIntegerField(default=5)
    concurrency = models.PositiveSmallIntegerField(
        default=16, help_text="Requests in flight at once, per run."
    )
    requests_per_minute = models.PositiveIntegerField(
        default=600, help_text="Upper bound on requests per minute, per run."
    )
    context_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The model's context window in tokens, as the server runs it "
        "(filled in from the server where it reports it).",
    )
    max_completion_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens a reply may take, sent as max_tokens.",
    )
    reply_format = models.CharField(
        max_length=16,
        choices=ReplyFormat.choices,
        default=ReplyFormat.JSON_OBJECT,
        help_text="How the label's JSON Schema is sent to constrain the reply.",
    )
    tokenizer = models.CharField(
        max_length=16, choices=Tokenizer.choices, default=Tokenizer.ESTIMATE, blank=True
    )
    server_report = models.JSONField(default=dict, blank=True)
    calibration = models.JSONField(default=dict, blank=True)
    price_per_million_input = models.FloatField(
        default=0.0, help_text="Estimated cost, currency units per 1M input tokens."
    )
    price_per_million_output = models.FloatField(
        default=0.0, help_text="Estimated cost, currency units per 1M output tokens."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # Checked in clean_fields, not in clean: a run's start calls clean and
    # checks the URL itself, with its own sentence.
    address_field = "base_url"
    address_purpose = Purpose.BACKBONE

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        if self.kind == BackboneKind.RULES:
            return f"{self.name} (rules, no LLM)"
        return f"{self.name} ({self.model} at {self.base_url})"

    def clean(self) -> None:
        if self.kind == BackboneKind.OPENAI:
            missing = [
                field for field in ("base_url", "model") if not getattr(self, field)
            ]
            if missing:
                raise ValidationError(
                    {
                        field: "Required for an OpenAI-compatible backbone."
                        for field in missing
                    }
                )
        if not isinstance(self.parameters, dict):
            raise ValidationError({"parameters": "Parameters must be a JSON object."})

    def snapshot(self) -> dict:
        """What a run records of its backbone, so later edits do not rewrite
        history (never the key)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url,
            "model": self.model if self.kind == BackboneKind.OPENAI else "rules-v1",
            "parameters": dict(self.parameters or {}),
            "timeout_seconds": self.timeout_seconds,
            "max_retries": self.max_retries,
            "concurrency": self.concurrency,
            "requests_per_minute": self.requests_per_minute,
            "context_tokens": self.context_tokens,
            "max_completion_tokens": self.max_completion_tokens,
            "reply_format": self.reply_format,
            "tokenizer": self.tokenizer,
            "price_per_million_input": self.price_per_million_input,
            "price_per_million_output": self.price_per_million_output,
        }


class PromptTemplate(models.Model):
    """A versioned hindsight prompt. A version that a run has used is frozen: a
    change is a new version."""

    version = models.CharField(max_length=50, unique=True)
    system = models.TextField(help_text="The system message.")
    instructions = models.TextField(
        help_text="The label instructions placed after the window's context."
    )
    token_budget = models.PositiveIntegerField(
        default=12000, help_text="Upper bound on prompt tokens per request."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.version


class RunScope(models.TextChoices):
    CAMPAIGN = "campaign", "A campaign's windows"
    COHORT = "cohort", "Every candidate window of a cohort"


class RunState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    CANCELLED = "cancelled", "Cancelled"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class OracleRun(JobFields):
    """One pass of a backbone and prompt over a set of windows. Resumable: the
    windows still to do are those without an ``OracleLabel`` of this run.

    Its chunk tasks write ``heartbeat_at`` (each claim, and every few seconds
    while labelling) and the progress onto the row; a run none of whose chunks
    has written for ``REALICU_JOB_STALE_SECONDS`` lost its workers, and the
    reaper queues its chunks again (``oracle.services.oracle_run_requeue``)."""

    name = models.CharField(max_length=200)
    backbone = models.ForeignKey(
        Backbone, on_delete=models.PROTECT, related_name="runs"
    )
    backbone_snapshot = models.JSONField(default=dict)
    prompt = models.ForeignKey(
        PromptTemplate, on_delete=models.PROTECT, related_name="runs"
    )
    scope = models.CharField(max_length=10, choices=RunScope.choices)
    campaign = models.ForeignKey(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="oracle_runs",
    )
    cohort = models.ForeignKey(
        Cohort,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="oracle_runs",
    )
    state = models.CharField(
        max_length=10, choices=RunState.choices, default=RunState.QUEUED
    )
    total_windows = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The requests to the backbone as they happen (issue 32): sent, answered,
    # timed out, failed otherwise (connection errors, 429, 5xx), and retried,
    # summed over the run's chunks; the last problem met, with when. The run
    # page shows them while the windows are still unlabelled.
    requests_sent = models.PositiveIntegerField(default=0)
    requests_answered = models.PositiveIntegerField(default=0)
    requests_timed_out = models.PositiveIntegerField(default=0)
    requests_errored = models.PositiveIntegerField(default=0)
    requests_retried = models.PositiveIntegerField(default=0)
    request_problem = models.CharField(max_length=255, blank=True)
    request_problem_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Oracle run {self.pk}: {self.name}"

    @property
    def requests_in_flight(self) -> int:
        finished = (
            self.requests_answered + self.requests_timed_out + self.requests_errored
        )
        return max(0, self.requests_sent - finished)


class OracleLabelState(models.TextChoices):
    OK = "ok", "Labelled"
    FAILED = "failed", "Failed"


class OracleLabel(models.Model):
    """The Oracle's label of one window in one run, or the record of why it
    failed. At most one per (run, window), so a rerun never duplicates.

    ``payload`` has the physicians' label shape (annotation.models.Label)::

        {"status_evidence": [event ids],
         "acute_problems": [{"text", "evidence"}],
         "action_ratings": [{"event_id", "rating", "evidence"}],
         "added_actions": [{"text", "evidence"}],
         "red_flags": [{"text", "evidence"}]}

    A failed window keeps the raw reply and the reason, never a payload.
    """

    run = models.ForeignKey(OracleRun, on_delete=models.CASCADE, related_name="labels")
    window = models.ForeignKey(
        Window, on_delete=models.PROTECT, related_name="oracle_labels"
    )
    state = models.CharField(max_length=8, choices=OracleLabelState.choices)
    status = models.CharField(max_length=16, choices=PatientStatus.choices, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    backbone_kind = models.CharField(max_length=8, choices=BackboneKind.choices)
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=50)
    parameters = models.JSONField(default=dict, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(
        default=0,
        help_text="The requests' own time, from sending to reply, summed over "
        "retries and the repair turn; waits for a concurrency slot, the rate "
        "limit and backoff are not in it (rules: the labelling time).",
    )
    attempts = models.PositiveSmallIntegerField(default=1)
    prompt_chars = models.PositiveIntegerField(
        default=0, help_text="Characters of the first request's messages."
    )
    prompt_tokens = models.PositiveIntegerField(
        default=0,
        help_text="The first request's prompt tokens as the server counted them "
        "(usage.prompt_tokens, else its tokenizer); 0 when unknown.",
    )
    prompt_estimate = models.PositiveIntegerField(
        default=0, help_text="The prompt tokens the budget was kept with."
    )
    prompt_compressions = models.JSONField(default=list, blank=True)
    raw_response = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "window"], name="oracle_label_run_window_uniq"
            )
        ]
        indexes = [models.Index(fields=["run", "state"], name="oracle_label_run_state")]

    def __str__(self) -> str:
        return f"Oracle label of {self.window} in run {self.run_id} ({self.state})"


class ValidationReport(models.Model):
    """An Oracle run measured against a campaign's Gold consensus (spec section 6,
    paper Table 1). ``report`` holds status macro-F1 and confusion matrix, the
    set tasks' semantic F1, breakdowns per disease group, and the counts."""

    run = models.ForeignKey(
        OracleRun, on_delete=models.CASCADE, related_name="validation_reports"
    )
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    matcher_model = models.CharField(max_length=200)
    tau = models.FloatField()
    report = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Validation of run {self.run_id} against {self.campaign}"


class OracleWindowClaim(models.Model):
    """A chunk task's lease on a window of a run while it labels it, so two
    workers never label the same window at once. ``token`` names the chunk
    task; the lease is renewed while the task works, and a window whose lease
    has run out (its worker died) may be claimed again. Deleted when the chunk
    ends; the rows in flight also count the run's chunk tasks at work, which
    share the run's concurrency and rate limits."""

    run = models.ForeignKey(OracleRun, on_delete=models.CASCADE, related_name="claims")
    window = models.ForeignKey(Window, on_delete=models.CASCADE, related_name="+")
    token = models.CharField(max_length=32)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "window"], name="oracle_claim_run_window_uniq"
            )
        ]
        indexes = [models.Index(fields=["run", "token"], name="oracle_claim_run_token")]

    def __str__(self) -> str:
        return f"Claim of window {self.window_id} in run {self.run_id} by {self.token}"


class ValidationJobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ValidationJob(JobFields):
    """A validation of a run against a campaign, computed on a worker (embedding
    the Gold and Oracle texts may take a while on a cold cache). Done, it points
    to the ``ValidationReport`` it made; a report exists only once complete."""

    run = models.ForeignKey(
        OracleRun, on_delete=models.CASCADE, related_name="validation_jobs"
    )
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(
        max_length=8,
        choices=ValidationJobState.choices,
        default=ValidationJobState.QUEUED,
    )
    report = models.ForeignKey(
        ValidationReport,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Validation job {self.pk} of run {self.run_id} ({self.state})"


class PromotionThresholds(models.Model):
    """The validation figures an Oracle run's report must reach before its labels
    can become a RealICU-Scale release (spec section 7: validated against Gold
    before it labels Scale). Admins set them; every change is a new row and the
    newest applies, so a release can name the thresholds it was held to. With
    no row, ``oracle.promotion_gate.DEFAULT_THRESHOLDS`` apply."""

    status_macro_f1 = models.FloatField()
    acute_problems_f1 = models.FloatField()
    recommended_actions_f1 = models.FloatField()
    red_flags_f1 = models.FloatField()
    note = models.TextField(blank=True)
    set_by = models.ForeignKey(USER_MODEL, on_delete=models.PROTECT, related_name="+")
    set_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-set_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status_macro_f1__gte=0, status_macro_f1__lte=1)
                & models.Q(acute_problems_f1__gte=0, acute_problems_f1__lte=1)
                & models.Q(recommended_actions_f1__gte=0, recommended_actions_f1__lte=1)
                & models.Q(red_flags_f1__gte=0, red_flags_f1__lte=1),
                name="promotion_thresholds_in_unit_range",
            )
        ]

    def __str__(self) -> str:
        return f"Promotion thresholds set {self.set_at:%Y-%m-%d %H:%M}"


class PromotionOverride(models.Model):
    """An admin's decision to promote an Oracle run whose validation report is
    below the promotion thresholds: who, when, why, and which thresholds failed
    with the report's figures. ``release_id`` is the exports Release it allowed;
    a plain id, not a foreign key, because oracle sits before exports in the
    apps' data flow (STYLE: no app imports one to its right)."""

    run = models.ForeignKey(OracleRun, on_delete=models.PROTECT, related_name="+")
    report = models.ForeignKey(
        ValidationReport, on_delete=models.PROTECT, related_name="overrides"
    )
    release_id = models.PositiveIntegerField(unique=True)
    reason = models.TextField()
    thresholds = models.JSONField(default=dict)
    failures = models.JSONField(default=list)
    created_by = models.ForeignKey(
        USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(reason=""), name="promotion_override_has_reason"
            )
        ]

    def __str__(self) -> str:
        return f"Override of run {self.run_id} for release {self.release_id}"


class GoldInclusionPhase(models.TextChoices):
    PILOT = "pilot", "labelled before the draw (the pilot)"
    ACTIVE = "active", "drawn by the active draw"
    NONE = "none", "not drawn"


class GoldInclusion(models.Model):
    """A window of the pool of a Gold campaign drawn actively (issue 33): the
    Oracle's uncertainty on it when it was drawn, its level, and its
    probability of being in the Gold set, the union of the pilot (the pool's
    windows with a consensus before the draw) and the active draw,
    1 - (1 - pilot_probability)(1 - q), a pilot window's q the one its own
    label did not set (evaluation.ppi_active.union_probabilities). Score
    intervals weight the Gold windows' physician labels by 1 / probability,
    so an estimate stays unbiased
    however unequal the draw was, and take lam's strata from every window's
    level (rows of windows not drawn keep theirs for that)."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="gold_inclusions"
    )
    window = models.ForeignKey(Window, on_delete=models.PROTECT, related_name="+")
    uncertainty = models.FloatField()
    level = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="The uncertainty's level (evaluation.ppi_active), whose "
        "second moment set the probability; empty for draws before levels.",
    )
    probability = models.FloatField(
        help_text="The window's probability of being in the Gold set: of the "
        "pilot or the active draw."
    )
    pilot_probability = models.FloatField(
        null=True,
        blank=True,
        help_text="The window's probability of being in the pilot: the stored "
        "probability of the earlier active draw the labels so far came from, "
        "or labelled windows over the pool's when they came some other way; "
        "empty when the pool had no labels before the draw.",
    )
    phase = models.CharField(
        max_length=8,
        choices=GoldInclusionPhase.choices,
        default=GoldInclusionPhase.ACTIVE,
        help_text="How the window came to be in the Gold set, or that it did not.",
    )
    floor = models.FloatField(
        help_text="The share of the budget the draw spread uniformly: every "
        "window's probability is at least floor * budget / windows."
    )
    source = models.CharField(
        max_length=200, help_text="Where the uncertainty came from."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "window"], name="gold_inclusion_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(probability__gt=0, probability__lte=1),
                name="gold_inclusion_probability_range",
            ),
            models.CheckConstraint(
                condition=models.Q(floor__gt=0, floor__lte=1),
                name="gold_inclusion_floor_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.window} in {self.campaign}: p={self.probability:.3f}"
