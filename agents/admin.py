"""Agents in the Django admin: researchers' online-evaluation endpoints, shown
read-only (an endpoint is registered and checked on the agents' pages, through
agents.services.endpoint_register; its URL's address check is also the
model's, oracle.backbones.endpoints, so any form that saves one runs it)."""

from django.contrib import admin

from accounts.admin import UnchangeableAdmin
from agents.models import OnlineEndpoint


@admin.register(OnlineEndpoint)
class OnlineEndpointAdmin(UnchangeableAdmin):
    list_display = (
        "name",
        "url",
        "context_mode",
        "release",
        "created_by",
        "created_at",
    )
    list_select_related = ("release", "created_by")
