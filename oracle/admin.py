"""Oracle models in the Django admin. Prompt templates can be read and added (a
version a run has used is frozen: a change is a new version); runs, labels and
validation reports are history, shown read-only."""

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from oracle.models import (
    Backbone,
    OracleLabel,
    OracleRun,
    PromptTemplate,
    ValidationJob,
    ValidationReport,
)


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    list_display = ("version", "token_budget", "created_at", "created_by")
    readonly_fields = ("created_at",)

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.runs.exists():
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.runs.exists():
            return False
        return super().has_delete_permission(request, obj)


@admin.register(Backbone)
class BackboneAdmin(ReadOnlyAdmin):
    # Edited on the Oracle pages, through the service that validates them.
    list_display = (
        "name",
        "kind",
        "model",
        "base_url",
        "api_key_env",
        "concurrency",
        "requests_per_minute",
    )


@admin.register(OracleRun)
class OracleRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "state", "scope", "total_windows", "created_at")
    list_filter = ("state", "scope")


@admin.register(OracleLabel)
class OracleLabelAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "run",
        "window",
        "state",
        "status",
        "model",
        "prompt_version",
        "tokens_in",
        "tokens_out",
        "latency_ms",
    )
    list_filter = ("state", "run")
    list_select_related = ("run", "window")
    raw_id_fields = ("window",)


@admin.register(ValidationReport)
class ValidationReportAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "campaign", "matcher_model", "tau", "created_at")


@admin.register(ValidationJob)
class ValidationJobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "run",
        "campaign",
        "state",
        "report",
        "created_at",
        "finished_at",
    )
    list_filter = ("state",)
