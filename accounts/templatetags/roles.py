"""Role filters for templates (accounts.roles), so menus show each role only
the pages it may open."""

from django import template

from accounts.roles import user_is_admin, user_may_see_clinical_data

register = template.Library()


@register.filter
def may_see_clinical_data(user) -> bool:
    return user_may_see_clinical_data(user)


@register.filter
def is_admin(user) -> bool:
    return user_is_admin(user)
