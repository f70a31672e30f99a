"""Data use in the Django admin: credentials and attestations to read (they
are recorded, approved and revoked on the Data use page, which logs each
step); the egress decisions and the audit log read-only."""

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from datause.models import Attestation, AuditEvent, Credential, EgressDecision


@admin.register(Credential)
class CredentialAdmin(ReadOnlyAdmin):
    list_display = (
        "user",
        "source",
        "physionet_username",
        "agreement_version",
        "signed_on",
        "expires_on",
        "approved_by",
        "revoked_at",
    )
    list_filter = ("source",)
    search_fields = ("user__username", "physionet_username")
    list_select_related = ("user", "source", "approved_by")


@admin.register(Attestation)
class AttestationAdmin(ReadOnlyAdmin):
    list_display = (
        "host",
        "source",
        "purpose",
        "service",
        "attested_by_name",
        "attested_at",
        "approved_by",
        "revoked_at",
    )
    list_filter = ("purpose", "source")
    search_fields = ("host", "service", "attested_by_name")
    list_select_related = ("source", "approved_by")


@admin.register(EgressDecision)
class EgressDecisionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "purpose", "subject", "host", "on_site", "allowed")
    list_filter = ("purpose", "allowed", "on_site", "terms")
    search_fields = ("subject", "host", "actor_name")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "kind", "actor_name", "release_name", "file_path")
    list_filter = ("kind",)
    search_fields = ("actor_name", "release_name", "file_path", "message")
    date_hierarchy = "at"
