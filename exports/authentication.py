"""API token authentication: DRF's tokens, refused when malformed (before any
query) and when older than ``REALICU_API_TOKEN_DAYS``."""

from __future__ import annotations

import re
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

# rest_framework.authtoken keys: 40 hexadecimal characters.
_TOKEN_KEY = re.compile(r"[0-9a-f]{40}")


def token_expires_at(token):
    return token.created + timedelta(days=settings.REALICU_API_TOKEN_DAYS)


class ReleaseTokenAuthentication(TokenAuthentication):
    """A key with a NUL byte would otherwise be a database error (500); an
    expired token is a 401 that says so and where to get a new one."""

    def authenticate_credentials(self, key):
        if not _TOKEN_KEY.fullmatch(key):
            raise AuthenticationFailed("Invalid token.")
        user, token = super().authenticate_credentials(key)
        expires = token_expires_at(token)
        if expires <= timezone.now():
            raise AuthenticationFailed(
                f"Your API token expired on {expires:%Y-%m-%d}; create a new one "
                "on the API token page."
            )
        return user, token
