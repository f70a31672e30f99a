"""Who may use releases: researchers (by group, windows.accounts.Role) and admins."""

from __future__ import annotations

from windows.accounts import user_is_admin, user_is_researcher


def user_may_use_releases(user) -> bool:
    """Researchers and admins; a physician is refused, so that nobody labelling
    Gold windows can read a release's labels."""
    return user_is_researcher(user) or user_is_admin(user)


__all__ = ["user_is_admin", "user_is_researcher", "user_may_use_releases"]
