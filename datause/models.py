"""Data use (issue 34): researchers' credentials for credentialed sources,
admins' attestations for third-party services, the egress guard's decisions
at run start, and the audit log of downloads, attestations, approvals and
refused egress.

The sources and their terms are windows.DataSource; what a set of data is
built from is windows.datasources. Rows here name releases, runs and
endpoints by id and name, not by foreign key: the log outlives what it
records, and the ground floor knows no app above it."""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from windows.models import DataSource, DataUseTerms

USER_MODEL = settings.AUTH_USER_MODEL


class Approvable(models.Model):
    """Who approved a credential or attestation and when, and who revoked it."""

    approved_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class CredentialState(models.TextChoices):
    REQUESTED = "requested", "Awaiting an admin's approval"
    APPROVED = "approved", "Approved"
    EXPIRED = "expired", "Expired"
    REVOKED = "revoked", "Revoked"


class Credential(Approvable):
    """A user's credentialed access to a source, as PhysioNet granted it: the
    PhysioNet username, the version of the agreement signed, when, and until
    when. Valid once an admin approved it, until it expires or is revoked."""

    user = models.ForeignKey(
        USER_MODEL, on_delete=models.CASCADE, related_name="data_credentials"
    )
    source = models.ForeignKey(
        DataSource, on_delete=models.PROTECT, related_name="credentials"
    )
    physionet_username = models.CharField(max_length=100, blank=True)
    agreement_version = models.CharField(
        max_length=200,
        help_text="The data use agreement signed, with its version, e.g. "
        "PhysioNet Credentialed Health Data Use Agreement 1.5.0.",
    )
    signed_on = models.DateField(help_text="When the agreement was signed.")
    expires_on = models.DateField(help_text="The last day the access is valid.")
    note = models.TextField(blank=True)
    recorded_by = models.ForeignKey(
        USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-recorded_at", "-id"]
        indexes = [models.Index(fields=["user", "source"], name="credential_user")]

    def __str__(self) -> str:
        return f"{self.user} for {self.source.name} until {self.expires_on}"

    def state_on(self, day: datetime.date | None = None) -> str:
        day = day or timezone.localdate()
        if self.revoked_at is not None:
            return CredentialState.REVOKED
        if self.approved_at is None:
            return CredentialState.REQUESTED
        if self.expires_on < day:
            return CredentialState.EXPIRED
        return CredentialState.APPROVED

    @property
    def state(self) -> str:
        return self.state_on()

    @property
    def state_label(self) -> str:
        return CredentialState(self.state).label

    @property
    def valid(self) -> bool:
        return self.state == CredentialState.APPROVED


class AttestationPurpose(models.TextChoices):
    BACKBONE = "backbone", "LLM backbone (Oracle, reference agents)"
    ENDPOINT = "endpoint", "A researcher's online-evaluation endpoint"


class Attestation(Approvable):
    """That a third-party service may receive a source's data: the service,
    its zero retention, no training and no human review of the data, who
    attests it, when, and the evidence. For a backbone an admin records it;
    for a researcher's endpoint the researcher does and an admin approves.
    Keyed by the host the endpoint connects to."""

    host = models.CharField(
        max_length=253, help_text="The service's host name, as URLs name it."
    )
    source = models.ForeignKey(
        DataSource, on_delete=models.PROTECT, related_name="attestations"
    )
    purpose = models.CharField(max_length=10, choices=AttestationPurpose.choices)
    service = models.CharField(
        max_length=200, help_text="The service and its plan, e.g. its ZDR tier."
    )
    zero_retention = models.BooleanField(default=False)
    no_training = models.BooleanField(default=False)
    no_human_review = models.BooleanField(default=False)
    evidence_url = models.URLField(
        max_length=500, help_text="The contract, terms or settings that show it."
    )
    expires_on = models.DateField(null=True, blank=True)
    attested_by = models.ForeignKey(
        USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    attested_by_name = models.CharField(max_length=150)
    attested_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-attested_at", "-id"]
        indexes = [
            models.Index(fields=["host", "source"], name="attestation_host"),
        ]

    def __str__(self) -> str:
        return f"{self.service} ({self.host}) for {self.source.name}"

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.approved_at is None:
            return "requested"
        if self.expires_on is not None and self.expires_on < timezone.localdate():
            return "expired"
        return "active"

    @property
    def active(self) -> bool:
        return self.state == "active"

    def snapshot(self) -> dict:
        """What a run's and a release's provenance record of it."""
        return {
            "id": self.pk,
            "host": self.host,
            "source": self.source.key,
            "service": self.service,
            "zero_retention": self.zero_retention,
            "no_training": self.no_training,
            "no_human_review": self.no_human_review,
            "evidence_url": self.evidence_url,
            "attested_by": self.attested_by_name,
            "attested_at": self.attested_at.isoformat(),
            "approved_by": self.approved_by.get_username()
            if self.approved_by_id
            else "",
            "approved_at": self.approved_at.isoformat() if self.approved_at else None,
            "expires_on": self.expires_on.isoformat() if self.expires_on else None,
        }


class EgressPurpose(models.TextChoices):
    ORACLE_RUN = "oracle_run", "Oracle run"
    AGENT_RUN = "agent_run", "Reference agent run"
    ENDPOINT_REGISTER = "endpoint_register", "Online endpoint registered"
    ONLINE_EVAL = "online_eval", "Online evaluation run"


class EgressDecision(models.Model):
    """The egress guard's decision when a run starts (oracle.egress): where
    the contexts would go (on site or a third party, by the addresses its
    host resolves to), the terms of the data, and whether it was allowed, on
    which attestations, or refused and why. A run's provenance is the
    decision it started under."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    purpose = models.CharField(max_length=20, choices=EgressPurpose.choices)
    subject = models.CharField(max_length=300, blank=True)
    url = models.CharField(max_length=500, blank=True)
    host = models.CharField(max_length=253, blank=True)
    addresses = models.JSONField(default=list, blank=True)
    on_site = models.BooleanField(
        null=True, help_text="Empty: not classed, the data being open."
    )
    terms = models.CharField(max_length=12, choices=DataUseTerms.choices)
    sources = models.JSONField(default=list, blank=True)
    allowed = models.BooleanField()
    reason = models.TextField(blank=True)
    attestations = models.ManyToManyField(Attestation, blank=True, related_name="+")
    attestations_snapshot = models.JSONField(default=list, blank=True)
    campaign_id = models.PositiveBigIntegerField(null=True, blank=True)
    cohort_id = models.PositiveBigIntegerField(null=True, blank=True)
    release_id = models.PositiveBigIntegerField(null=True, blank=True)
    backbone_id = models.PositiveBigIntegerField(null=True, blank=True)
    endpoint_id = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        verdict = "allowed" if self.allowed else "refused"
        return f"{self.get_purpose_display()} {verdict}: {self.subject}"

    def provenance(self) -> dict:
        """What a run's or a release's provenance records of the decision."""
        return {
            "decided_at": self.created_at.isoformat(),
            "purpose": self.purpose,
            "by": self.actor_name,
            "host": self.host,
            "on_site": self.on_site,
            "addresses": list(self.addresses or []),
            "terms": self.terms,
            "sources": [s.get("key", s) for s in self.sources or []],
            "allowed": self.allowed,
            "reason": self.reason,
            "attestations": list(self.attestations_snapshot or []),
        }


class AuditKind(models.TextChoices):
    DOWNLOAD = "download", "Download"
    DOWNLOAD_REFUSED = "download_refused", "Download refused"
    CREDENTIAL_RECORDED = "credential_recorded", "Credential recorded"
    CREDENTIAL_APPROVED = "credential_approved", "Credential approved"
    CREDENTIAL_REVOKED = "credential_revoked", "Credential revoked"
    ATTESTATION_RECORDED = "attestation_recorded", "Attestation recorded"
    ATTESTATION_APPROVED = "attestation_approved", "Attestation approved"
    ATTESTATION_REVOKED = "attestation_revoked", "Attestation revoked"
    EGRESS_ALLOWED = "egress_allowed", "Egress to a third party allowed"
    EGRESS_REFUSED = "egress_refused", "Egress refused"


class AuditEvent(models.Model):
    """One line of the data-use audit log, shown to admins: who did what,
    when, to which release and file. Append-only: never changed or deleted
    by the platform."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=24, choices=AuditKind.choices, db_index=True)
    actor = models.ForeignKey(
        USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    release_id = models.PositiveBigIntegerField(null=True, blank=True)
    release_name = models.CharField(max_length=100, blank=True)
    file_path = models.CharField(max_length=300, blank=True)
    message = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["release_id", "at"], name="audit_release")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.get_kind_display()} {self.actor_name}"
