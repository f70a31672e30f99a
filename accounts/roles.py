"""Roles, by group: physicians label windows, admins adjudicate and run jobs,
researchers use releases. The one place that says who holds which role; the
access policy built on it is ``accounts.access``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError


class Role:
    PHYSICIAN = "physician"
    ADMIN = "admin"
    RESEARCHER = "researcher"
    ALL = (PHYSICIAN, ADMIN, RESEARCHER)


def _active(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def _group_names(user) -> set[str]:
    # Cached on the user object: a request checks roles several times.
    names = getattr(user, "_role_group_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._role_group_names = names
    return names


def user_is_physician(user) -> bool:
    return _active(user) and Role.PHYSICIAN in _group_names(user)


def user_is_admin(user) -> bool:
    """An admin (adjudicator) by group; a superuser counts as one."""
    return _active(user) and (user.is_superuser or Role.ADMIN in _group_names(user))


def require_admin(user, what: str) -> None:
    """The services' guard: ``what`` completes "Only an admin can ..."."""
    if not user_is_admin(user):
        raise PermissionDenied(f"Only an admin can {what}.")


def physicians_only(users: Iterable, *, refusal: Callable[[str, bool], str]) -> list:
    """``users`` once each, in primary-key order; a ValidationError when any is
    not an active physician, worded by ``refusal(names, one)``: the refused
    usernames, and whether there is just one of them (for the verb)."""
    users = list({u.pk: u for u in users}.values())
    refused = [u for u in users if not user_is_physician(u)]
    if refused:
        names = ", ".join(u.get_username() for u in refused)
        raise ValidationError(refusal(names, len(refused) == 1))
    return sorted(users, key=lambda u: u.pk)


def user_is_researcher(user) -> bool:
    return _active(user) and Role.RESEARCHER in _group_names(user)


def user_may_see_clinical_data(user) -> bool:
    """Stays, events and windows in full are for the hindsight labellers
    (physicians) and admins; researchers see only what a release holds."""
    return (
        user_is_physician(user)
        or user_is_admin(user)
        or (_active(user) and user.is_staff)
    )


def roles_ensure() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in Role.ALL}
