"""Passwords are hashed with Argon2id (realicu_web.settings.security); a
password stored with PBKDF2 before still signs in and is rehashed with Argon2
at that sign-in; a wrong one changes nothing. The suite's other tests hash with
MD5 for speed (tests/conftest.py), so these set the production hashers back."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from realicu_web.settings import security
from tests.factories import make_user

PASSWORD = "correct horse battery"

pytestmark = pytest.mark.django_db


@pytest.fixture
def production_hashers(settings):
    settings.PASSWORD_HASHERS = security.PASSWORD_HASHERS


def _stored(username: str) -> str:
    return get_user_model().objects.get(username=username).password


def test_a_new_password_is_stored_as_argon2id(production_hashers):
    user = make_user(username="dr-new", password=PASSWORD)
    assert _stored(user.username).startswith("argon2$argon2id$")
    assert user.check_password(PASSWORD)
    assert not user.check_password(PASSWORD + "!")


def test_a_pbkdf2_password_signs_in_and_is_rehashed_with_argon2(
    client, production_hashers
):
    user = make_user(username="dr-old", password=PASSWORD)
    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    user.save(update_fields=["password"])
    before = _stored("dr-old")
    assert before.startswith("pbkdf2_sha256$")

    client.post("/accounts/login/", {"username": "dr-old", "password": "wrong one!"})
    assert "_auth_user_id" not in client.session
    assert _stored("dr-old") == before

    client.post("/accounts/login/", {"username": "dr-old", "password": PASSWORD})
    assert client.session["_auth_user_id"] == str(user.pk)
    after = _stored("dr-old")
    assert after.startswith("argon2$argon2id$")
    client.logout()
    client.post("/accounts/login/", {"username": "dr-old", "password": PASSWORD})
    assert client.session["_auth_user_id"] == str(user.pk)
