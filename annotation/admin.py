"""Admin for campaigns: mainly to edit which action categories count as critical.
Assignments and labels are read-only here; they change through the services."""

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from annotation.blindness import labels_shown_to_admin
from annotation.models import Assignment, Campaign, Label, LabelRevision


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "annotators_per_window", "created_by", "created_at")
    fields = ("name", "annotators_per_window", "critical_action_categories")
    readonly_fields = ("annotators_per_window",)

    def has_add_permission(self, request):
        # Campaigns are created with their assignments by annotation.services.
        return False


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "campaign", "window", "annotator", "state", "active")
    list_filter = ("campaign", "state", "active")
    list_select_related = ("campaign", "window", "annotator")
    raw_id_fields = ("window", "reassigned_from")


class LabelsShownAdmin(ReadOnlyAdmin):
    """Rows of the labels the admin may see: an admin who also rates reads no
    co-rater's label (annotation.blindness), nor its revisions. ``label_lookup``
    is the lookup from a row to its label."""

    label_lookup = "pk"

    def get_queryset(self, request):
        shown = {f"{self.label_lookup}__in": labels_shown_to_admin(request.user)}
        return super().get_queryset(request).filter(**shown)


@admin.register(Label)
class LabelAdmin(LabelsShownAdmin):
    list_display = ("id", "assignment", "status", "version", "submitted_at")
    list_select_related = ("assignment__annotator", "assignment__window")


@admin.register(LabelRevision)
class LabelRevisionAdmin(LabelsShownAdmin):
    label_lookup = "label_id"
    list_display = ("id", "label", "version", "kind", "author", "saved_at")
    list_select_related = ("label", "author")
