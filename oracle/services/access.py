"""Who may write Oracle settings, runs and validations: the admin check every
Oracle service makes first."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from annotation.roles import user_is_admin


def _require_admin(user, what: str) -> None:
    if not user_is_admin(user):
        raise PermissionDenied(f"Only an admin can {what}.")
