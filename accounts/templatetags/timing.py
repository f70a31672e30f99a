"""How long ago a moment was, to the second where seconds matter: a worker
"last heard 43 s ago" is not the "0 minutes" of Django's ``timesince``."""

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


def ago_text(moment: datetime | None, now: datetime | None = None) -> str:
    if moment is None:
        return ""
    seconds = max(0, int(((now or timezone.now()) - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h {minutes % 60} min"
    return f"{hours // 24} d"


@register.filter
def ago(moment: datetime | None) -> str:
    return ago_text(moment)
