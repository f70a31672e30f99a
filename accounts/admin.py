"""Admin classes the apps' Django admins share: history that is shown, never
added or edited there (it changes through the services, which log each step)."""

from django.contrib import admin


class UnchangeableAdmin(admin.ModelAdmin):
    """Rows shown and deletable, never added or changed here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(UnchangeableAdmin):
    """Rows shown only: not added, changed or deleted here."""

    def has_delete_permission(self, request, obj=None):
        return False
