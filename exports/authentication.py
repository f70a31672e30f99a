"""API token authentication: ``Authorization: Token <key>``, the key checked
against its keyed hash (exports.tokens), refused when malformed (before any
query) and when older than ``REALICU_API_TOKEN_DAYS``."""

from __future__ import annotations

from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from exports.tokens import token_expires_at, token_find


class ReleaseTokenAuthentication(TokenAuthentication):
    """DRF's header parsing (and its OpenAPI description, ``tokenAuth``), with
    the key looked up by its hash instead of as stored text. A key with a NUL
    byte or of the wrong shape is refused before any query; an expired token
    is a 401 that says so and where to get a new one."""

    def authenticate_credentials(self, key):
        token = token_find(key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        expires = token_expires_at(token)
        if expires <= timezone.now():
            raise AuthenticationFailed(
                f"Your API token expired on {expires:%Y-%m-%d}; create a new one "
                "on the API token page."
            )
        return token.user, token
