"""Django admin views of releases and submissions: read-only, since a release
never changes once built and scores come from the scoring job."""

from django.contrib import admin

from exports.models import Release, ReleaseFile, Submission


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReleaseFileInline(admin.TabularInline):
    model = ReleaseFile
    extra = 0
    can_delete = False
    readonly_fields = ("path", "size_bytes", "sha256")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = (
        "__str__",
        "state",
        "window_count",
        "matcher_model",
        "tau",
        "created_at",
    )
    list_filter = ("kind", "state")
    inlines = [ReleaseFileInline]


@admin.register(Submission)
class SubmissionAdmin(ReadOnlyAdmin):
    list_display = (
        "pk",
        "release",
        "model_name",
        "submitted_by",
        "state",
        "public",
        "k",
    )
    list_filter = ("state", "public")
