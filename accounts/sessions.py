"""What a session remembers about its user at sign-in."""

from __future__ import annotations

from django.utils import timezone

SESSION_RENEWED_AT = "_renewed_at"


def session_renewed_mark(sender, request, user, **kwargs) -> None:
    """On sign-in: the session starts renewed (SessionIdleTimeoutMiddleware
    renews it every REALICU_SESSION_RENEW_SECONDS), so the first requests after
    it write nothing."""
    if getattr(request, "session", None) is not None:
        request.session[SESSION_RENEWED_AT] = timezone.now().timestamp()


# The base template shows physicians their queue link from this session key,
# without a groups query on every page.
SESSION_IS_PHYSICIAN = "annotation_is_physician"


def physician_role_remember(sender, request, user, **kwargs) -> None:
    from accounts.roles import user_is_physician

    if request is not None and hasattr(request, "session"):
        request.session[SESSION_IS_PHYSICIAN] = user_is_physician(user)
