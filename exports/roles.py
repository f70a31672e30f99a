"""Who may use releases: researchers (by group, windows.accounts.Role) and admins."""

from __future__ import annotations

from annotation.blindness import blind_assignments
from windows.accounts import user_is_admin, user_is_researcher


def user_may_use_releases(user) -> bool:
    """Researchers and admins; a physician is refused, so that nobody labelling
    Gold windows can read a release's labels. A researcher or admin who also
    rates windows is refused while any of them is open (annotation.blindness):
    a Gold release may hold a co-rater's items on it."""
    if not (user_is_researcher(user) or user_is_admin(user)):
        return False
    return not blind_assignments(user).exists()


__all__ = ["user_is_admin", "user_is_researcher", "user_may_use_releases"]
