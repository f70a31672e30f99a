"""Roles and the demo accounts of the embedded default."""
from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction


class Role:
    PHYSICIAN = "physician"
    ADMIN = "admin"
    RESEARCHER = "researcher"
    ALL = (PHYSICIAN, ADMIN, RESEARCHER)


# username, role, environment variable holding its password
DEMO_ACCOUNTS = [
    ("admin", Role.ADMIN, "REALICU_ADMIN_PASSWORD"),
    ("physician1", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("physician2", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("physician3", Role.PHYSICIAN, "REALICU_PHYSICIAN_PASSWORD"),
    ("researcher", Role.RESEARCHER, "REALICU_RESEARCHER_PASSWORD"),
]


def _active(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def _group_names(user) -> set[str]:
    # Cached on the user object: a request checks roles several times.
    names = getattr(user, "_role_group_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._role_group_names = names
    return names


def user_is_physician(user) -> bool:
    return _active(user) and Role.PHYSICIAN in _group_names(user)


def user_is_admin(user) -> bool:
    """An admin (adjudicator) by group; a superuser counts as one."""
    return _active(user) and (user.is_superuser or Role.ADMIN in _group_names(user))


def require_admin(user, what: str) -> None:
    """The services' guard: ``what`` completes "Only an admin can ..."."""
    if not user_is_admin(user):
        raise PermissionDenied(f"Only an admin can {what}.")


def user_is_researcher(user) -> bool:
    return _active(user) and Role.RESEARCHER in _group_names(user)


def user_may_see_clinical_data(user) -> bool:
    """Stays, events and windows in full are for the hindsight labellers
    (physicians) and admins; researchers see only what a release holds."""
    return user_is_physician(user) or user_is_admin(user) or (
        _active(user) and user.is_staff
    )


def roles_ensure() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in Role.ALL}


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
            password_check(password=password, user=User(username=username),
                           source=f"The password in {env_var}")


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
        user = User(username=username, is_staff=role == Role.ADMIN,
                    is_superuser=role == Role.ADMIN)
        password = os.environ.get(env_var)
        if password:
            password_check(password=password, user=user, source=f"The password in {env_var}")
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
    user = User(username=username, email=os.environ.get("REALICU_ADMIN_EMAIL", ""),
                is_staff=True, is_superuser=True)
    if not password:
        raise ValidationError(
            "REALICU_ADMIN_USERNAME is set but REALICU_ADMIN_PASSWORD is empty."
        )
    password_check(password=password, user=user,
                   source="The password in REALICU_ADMIN_PASSWORD")
    user.set_password(password)
    user.save()
    user.groups.add(roles_ensure()[Role.ADMIN])
    return username


SESSION_RENEWED_AT = "_renewed_at"


def session_renewed_mark(sender, request, user, **kwargs) -> None:
    """On sign-in: the session starts renewed (SessionIdleTimeoutMiddleware
    renews it once a minute), so the first requests after it write nothing."""
    import time

    if getattr(request, "session", None) is not None:
        request.session[SESSION_RENEWED_AT] = int(time.time())
