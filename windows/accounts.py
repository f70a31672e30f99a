"""Roles and the demo accounts of the embedded default."""
from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
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


def roles_ensure() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in Role.ALL}


@transaction.atomic
def demo_accounts_ensure() -> list[tuple[str, str, str]]:
    """Create the demo accounts that do not exist yet. Returns (username, role,
    password) for each account created now; a password comes from the environment
    or is generated, and is shown only this once."""
    groups = roles_ensure()
    User = get_user_model()
    created = []
    for username, role, env_var in DEMO_ACCOUNTS:
        if User.objects.filter(username=username).exists():
            continue
        password = os.environ.get(env_var) or secrets.token_urlsafe(12)
        user = User(username=username, is_staff=role == Role.ADMIN,
                    is_superuser=role == Role.ADMIN)
        user.set_password(password)
        user.save()
        user.groups.add(groups[role])
        created.append((username, role, password))
    return created
