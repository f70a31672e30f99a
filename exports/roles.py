"""Who may use releases: researchers and admins (roles: accounts.roles), and
not while they rate open windows (annotation.blindness); the pages' decorator."""

from __future__ import annotations

from accounts.access import role_required
from accounts.roles import user_is_admin, user_is_researcher
from annotation.blindness import blind_assignments


def user_may_use_releases(user) -> bool:
    """Researchers and admins; a physician is refused, so that nobody labelling
    Gold windows can read a release's labels. A researcher or admin who also
    rates windows is refused while any of them is open (annotation.blindness):
    a Gold release may hold a co-rater's items on it."""
    if not (user_is_researcher(user) or user_is_admin(user)):
        return False
    return not blind_assignments(user).exists()


release_user_required = role_required(
    user_may_use_releases,
    message=(
        "Releases are for researchers and admins, and not while you rate windows "
        "that are still open (a release may hold a co-rater's labels)."
    ),
)
