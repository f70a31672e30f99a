"""API tokens kept as a keyed hash: a key is 40 random hexadecimal characters,
shown to its owner once; the database holds its first characters (to find it)
and its HMAC-SHA256 under a key derived from SECRET_KEY (to check it, in
constant time). A database copy therefore yields no usable key; SECRET_KEY
does not either, without the key. Rotating SECRET_KEY keeps tokens working
while the old secret is in SECRET_KEY_FALLBACKS (a token found with it is
hashed again under the new one)."""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac

from exports.models import ApiToken

KEY_CHARS = 40
PREFIX_CHARS = 8
_KEY = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")
_SALT = "realicu_web.exports.api_token"


@dataclass(frozen=True)
class IssuedToken:
    """A token just made: ``key`` exists only here, to be shown once."""

    key: str
    token: ApiToken

    @property
    def expires_at(self) -> datetime:
        return token_expires_at(self.token)


def token_key_valid(key: str) -> bool:
    return bool(_KEY.fullmatch(key))


def token_digest(key: str, *, secret: str | None = None) -> str:
    """HMAC-SHA256 of ``key`` under a key derived from ``secret`` (SECRET_KEY
    when None) and a salt of its own, so no other HMAC of the site matches it."""
    return salted_hmac(_SALT, key, secret=secret, algorithm="sha256").hexdigest()


def token_expires_at(token: ApiToken) -> datetime:
    return token.created + timedelta(days=settings.REALICU_API_TOKEN_DAYS)


@transaction.atomic
def token_store(*, user) -> IssuedToken:
    """A new token for ``user``, replacing any earlier one. Who may hold one is
    the caller's rule (exports.services.token_create)."""
    key = secrets.token_hex(KEY_CHARS // 2)
    ApiToken.objects.filter(user=user).delete()
    token = ApiToken.objects.create(
        user=user, prefix=key[:PREFIX_CHARS], digest=token_digest(key)
    )
    return IssuedToken(key=key, token=token)


def token_find(key: str) -> ApiToken | None:
    """The token whose key is ``key``, or None. Rows are found by the prefix,
    then every candidate's digest is compared in constant time, under
    SECRET_KEY and each of SECRET_KEY_FALLBACKS."""
    if not token_key_valid(key):
        return None
    secrets_ = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    digests = [token_digest(key, secret=secret) for secret in secrets_]
    found = None
    candidates = ApiToken.objects.filter(prefix=key[:PREFIX_CHARS]).select_related(
        "user"
    )
    for token in candidates:
        for n, digest in enumerate(digests):
            if hmac.compare_digest(token.digest, digest) and found is None:
                found = token
                if n > 0:  # made under an old secret: hash it under the new one
                    ApiToken.objects.filter(pk=token.pk).update(digest=digests[0])
    return found
