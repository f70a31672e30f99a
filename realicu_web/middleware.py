"""Request hygiene before Django's own middleware runs."""

from __future__ import annotations

import re

from django.conf import settings

from accounts.sessions import SESSION_RENEWED_AT

# Django's session keys are 32 characters of [a-z0-9] (SessionBase.VALID_KEY_CHARS).
_SESSION_KEY = re.compile(r"[a-z0-9]{8,64}")


class ForgedSessionCookieMiddleware:
    """Drop a session cookie that no session key could ever be, before the
    session store looks it up: a NUL byte in it made PostgreSQL refuse the query
    (a 500 on every page). The request goes on as anonymous."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = settings.SESSION_COOKIE_NAME
        value = request.COOKIES.get(name)
        if value is not None and not _SESSION_KEY.fullmatch(value):
            del request.COOKIES[name]
        return self.get_response(request)


class SessionIdleTimeoutMiddleware:
    """Sessions expire ``SESSION_COOKIE_AGE`` seconds after the last request
    (the idle timeout): an active session's expiry is renewed, but at most once
    a minute, so not every request writes the session."""

    RENEW_AFTER_SECONDS = 60  # sign-in marks a session renewed too (accounts.sessions)

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        import time

        session = getattr(request, "session", None)
        if session is not None and session.session_key:
            now = int(time.time())
            last = session.get(SESSION_RENEWED_AT, 0)
            if not isinstance(last, int) or now - last >= self.RENEW_AFTER_SECONDS:
                session[SESSION_RENEWED_AT] = now
        return self.get_response(request)
