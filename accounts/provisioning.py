"""Accounts the platform creates: the demo accounts of the embedded default and
the production admin from the environment, with the password rules applied."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.roles import Role, roles_ensure

# username, role, environment variable holding its password
DEMO_ACCOUNTS = [
    ("admin", Role.ADMIN, "REALICU_ADMIN_PASSWORD"),
    ("physician1", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("physician2", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("physician3", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("researcher", Role.RESEARCHER, "REALICU_RESEARCHER_PASSWORD"),
]


def password_check(*, password: str, user, source: str) -> None:
    """The password validators (settings.AUTH_PASSWORD_VALIDATORS) for a
    password set outside a form; ``source`` names where it came from."""
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise ValidationError(
            f"{source} is refused for {user.username!r}: " + " ".join(exc.messages)
        ) from exc


def demo_passwords_check() -> None:
    """Refuse the demo passwords the environment sets before anything is done
    (the first bootstrap imports the demo for minutes before the accounts)."""
    User = get_user_model()
    for username, _role, env_var in DEMO_ACCOUNTS:
        password = os.environ.get(env_var)
        if password:
            password_check(
                password=password,
                user=User(username=username),
                source=f"The password in {env_var}",
            )


@transaction.atomic
def demo_accounts_ensure() -> list[tuple[str, str, str]]:
    """Create the demo accounts that do not exist yet. Returns (username, role,
    password) for each account created now; a password comes from the environment
    or is generated, and is shown only this once. A password from the
    environment that the validators refuse creates no account at all."""
    groups = roles_ensure()
    User = get_user_model()
    created = []
    for username, role, env_var in DEMO_ACCOUNTS:
        if User.objects.filter(username=username).exists():
            continue
        user = User(
            username=username,
            is_staff=role == Role.ADMIN,
            is_superuser=role == Role.ADMIN,
        )
        password = os.environ.get(env_var)
        if password:
            password_check(
                password=password, user=user, source=f"The password in {env_var}"
            )
        else:
            password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.save()
        user.groups.add(groups[role])
        created.append((username, role, password))
    return created


@transaction.atomic
def admin_from_environment_ensure() -> str | None:
    """The production admin: REALICU_ADMIN_USERNAME with REALICU_ADMIN_PASSWORD
    (checked by the password validators), created if that user does not exist;
    an existing user is left as it is. Returns the username created, or None."""
    username = os.environ.get("REALICU_ADMIN_USERNAME", "").strip()
    if not username:
        return None
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        return None
    password = os.environ.get("REALICU_ADMIN_PASSWORD", "")
    user = User(
        username=username,
        email=os.environ.get("REALICU_ADMIN_EMAIL", ""),
        is_staff=True,
        is_superuser=True,
    )
    if not password:
        raise ValidationError(
            "REALICU_ADMIN_USERNAME is set but REALICU_ADMIN_PASSWORD is empty."
        )
    password_check(
        password=password, user=user, source="The password in REALICU_ADMIN_PASSWORD"
    )
    user.set_password(password)
    user.save()
    user.groups.add(roles_ensure()[Role.ADMIN])
    return username
