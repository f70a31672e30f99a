"""Role checks of the annotation app, by group (windows.accounts.Role), used by its
services and selectors alike."""

from __future__ import annotations

from windows.accounts import user_is_admin, user_is_physician

__all__ = ["user_is_admin", "user_is_physician"]
