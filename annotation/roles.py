"""Role checks of the annotation app, by group (windows.accounts.Role), used by its
services and selectors alike."""

from __future__ import annotations

from windows.accounts import Role


def _active(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def _group_names(user) -> set[str]:
    # Cached on the user object: a request checks roles several times.
    names = getattr(user, "_annotation_group_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._annotation_group_names = names
    return names


def user_is_physician(user) -> bool:
    return _active(user) and Role.PHYSICIAN in _group_names(user)


def user_is_admin(user) -> bool:
    """An admin (adjudicator) by group; a superuser counts as one."""
    return _active(user) and (user.is_superuser or Role.ADMIN in _group_names(user))
