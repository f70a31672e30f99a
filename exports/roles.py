"""Who may use releases: researchers (by group, windows.accounts.Role) and admins."""

from __future__ import annotations

from annotation.roles import user_is_admin
from windows.accounts import Role


def user_is_researcher(user) -> bool:
    if not (user is not None and user.is_authenticated and user.is_active):
        return False
    names = getattr(user, "_exports_group_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._exports_group_names = names
    return Role.RESEARCHER in names


def user_may_use_releases(user) -> bool:
    """Researchers and admins; a physician is refused, so that nobody labelling
    Gold windows can read a release's labels."""
    return user_is_researcher(user) or user_is_admin(user)


__all__ = ["user_is_admin", "user_is_researcher", "user_may_use_releases"]
