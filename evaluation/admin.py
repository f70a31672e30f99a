"""Admin for the matcher's settings: each model's tau and the abbreviations
expanded before matching. The embedding cache is not listed: it is derived data
that the matcher fills and can be dropped at any time."""

from django.contrib import admin

from evaluation.models import Abbreviation, MatcherModel


@admin.register(MatcherModel)
class MatcherModelAdmin(admin.ModelAdmin):
    list_display = ("name", "tau", "calibrated_at", "updated_at")
    search_fields = ("name",)
    readonly_fields = ("updated_at",)


@admin.register(Abbreviation)
class AbbreviationAdmin(admin.ModelAdmin):
    list_display = ("short", "expansion", "added_by", "created_at")
    search_fields = ("short", "expansion")
    list_select_related = ("added_by",)
    readonly_fields = ("added_by", "created_at")

    def save_model(self, request, obj, form, change):
        if obj.added_by_id is None:
            obj.added_by = request.user
        super().save_model(request, obj, form, change)
