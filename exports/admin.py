"""Django admin views of releases and submissions: read-only, since a release
never changes once built and scores come from the scoring job; and of API
tokens, by their prefix only (the key is kept nowhere), which an admin may
revoke (delete)."""

from django.contrib import admin

from accounts.admin import UnchangeableAdmin
from exports.models import ApiToken, Release, ReleaseFile, Submission
from exports.tokens import token_expires_at


class ReleaseFileInline(admin.TabularInline):
    model = ReleaseFile
    extra = 0
    can_delete = False
    readonly_fields = ("path", "size_bytes", "sha256")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Release)
class ReleaseAdmin(UnchangeableAdmin):
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
class SubmissionAdmin(UnchangeableAdmin):
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


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """The prefix, owner and dates; never the digest, which is useless without
    SECRET_KEY but is no business of the page either. Tokens are made on the
    API token page only, where their owner sees the key once."""

    list_display = ("shown_prefix", "user", "created", "expires")
    fields = ("shown_prefix", "user", "created", "expires")
    readonly_fields = fields
    search_fields = ("user__username", "prefix")
    ordering = ("-created",)

    @admin.display(description="token")
    def shown_prefix(self, token: ApiToken) -> str:
        return f"{token.prefix}…"

    @admin.display(description="expires")
    def expires(self, token: ApiToken):
        return token_expires_at(token)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
