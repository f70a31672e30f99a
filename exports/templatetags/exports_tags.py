"""Template filters of the exports app."""

from django import template

from exports.roles import user_may_use_releases

register = template.Library()


@register.filter
def may_use_releases(user) -> bool:
    return user_may_use_releases(user)
