"""Request hygiene before Django's own middleware runs, and the sessions' idle
timeout."""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone

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


# Longest URL path and query string answered; a longer one is a 414. Release
# files have short paths; a path of thousands of characters would otherwise
# reach the file system (ENAMETOOLONG, a 500).
MAX_PATH_CHARS = 2048
MAX_QUERY_CHARS = 8192


def _has_nul(query_dict) -> bool:
    """A NUL character in a name or a value of a QueryDict (query or form)."""
    for name, values in query_dict.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return True
    return False


class RequestHygieneMiddleware:
    """A NUL character in the path, the query string, or a posted form field's
    name or value is a 400 before any view runs: PostgreSQL refuses NUL in text,
    so a query with it was a 500 (``/api/v1/releases/1/files/manifest.json%00``).
    A path or query string beyond the bounds above is a 414. The bodies of the
    researcher API (``/api/``) are left to DRF, whose parsers read them
    (JSON through realicu_web.jsonlimits, which refuses NUL too)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if len(request.path) > MAX_PATH_CHARS or (
            len(request.META.get("QUERY_STRING", "")) > MAX_QUERY_CHARS
        ):
            return HttpResponse(
                "The address is too long.", status=414, content_type="text/plain"
            )
        if "\x00" in request.path or _has_nul(request.GET):
            return _nul_refused()
        if (
            request.method == "POST"
            and not request.path.startswith("/api/")
            and request.content_type
            in ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            # Django's views read the form anyway (CSRF first); parsing it
            # here changes nothing for them.
            if _has_nul(request.POST) or any(
                "\x00" in upload.name for upload in request.FILES.values()
            ):
                return _nul_refused()
        return self.get_response(request)


def _nul_refused() -> HttpResponse:
    return HttpResponse(
        "The request holds a NUL character (%00), which no field accepts.",
        status=400,
        content_type="text/plain",
    )


class SessionIdleTimeoutMiddleware:
    """A session ends ``REALICU_SESSION_IDLE_SECONDS`` after its last request,
    at any setting, without writing the session on every request.

    A request renews the session (writes it, which sets its expiry to now +
    ``SESSION_COOKIE_AGE``) when ``REALICU_SESSION_RENEW_SECONDS`` have passed
    since the last renewal, and ``SESSION_COOKIE_AGE`` is the idle time plus
    that interval (settings/security.py). Every request thus leaves its
    session renewed at most one interval before it, so alive until at least
    the idle time after it: an active user, whose requests are never further
    apart than the idle time, is never signed out; an idle one is signed out
    between the idle time and one interval (a 60th of it, 1 s to 1 min) after
    the last request. (Renewing once a minute with the idle time as the expiry
    signed out an active user at 75 s with a 1-minute setting.) Times are
    ``timezone.now()``, the session store's clock."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        if session is not None and session.session_key:
            now = timezone.now().timestamp()
            last = session.get(SESSION_RENEWED_AT)
            if (
                not isinstance(last, (int, float))
                or isinstance(last, bool)
                or now - last >= settings.REALICU_SESSION_RENEW_SECONDS
                or last > now  # a clock set back: renew rather than trust it
            ):
                session[SESSION_RENEWED_AT] = now
        return self.get_response(request)
