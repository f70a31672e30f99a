"""API tokens stored as a keyed hash (issue 31, item 2): no issued key can be
read back from any table of the database (sessions decoded too), the key
authenticates an API call, an expired or revoked token is refused, the admin
site shows a token's prefix only (and DRF's token admin is gone), DRF tokens
of before are hashed by the migration and keep working, and a token made
under a SECRET_KEY being rotated out still works through
SECRET_KEY_FALLBACKS."""

import importlib
import re
from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.roles import Role
from exports.models import ApiToken
from exports.tokens import token_digest, token_find, token_store
from tests.factories import make_user

pytestmark = pytest.mark.django_db

NEW_KEY = re.compile(r'id="new-token"[^>]*>([0-9a-f]{40})<')


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _key_made_on_the_page(client: Client) -> str:
    response = client.post("/releases/token/create/")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    return NEW_KEY.search(response.content.decode())[1]


def _every_stored_text() -> list[tuple[str, str]]:
    """(table, value) for every value of every column of every table, as text;
    a session's data decoded as well."""
    found = []
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {quote(table)}")
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, memoryview):
                        value = value.tobytes()
                    if isinstance(value, bytes):
                        value = value.decode("latin-1")
                    found.append((table, str(value)))
    for session in Session.objects.all():
        found.append(
            ("session data", repr(SessionStore().decode(session.session_data)))
        )
    return found


def test_no_issued_key_can_be_read_from_the_database(tiny_release, researcher):
    client = Client()
    client.force_login(researcher)
    key = _key_made_on_the_page(client)
    # The token page again, and an API call, as a researcher would.
    assert client.get("/releases/token/").status_code == 200
    assert _api(key).get("/api/v1/releases/").status_code == 200
    secret_part = key[8:]  # the first 8 characters are the stored prefix
    leaks = [(t, v[:80]) for t, v in _every_stored_text() if secret_part in v]
    assert leaks == []
    token = ApiToken.objects.get(user=researcher)
    assert token.prefix == key[:8] and token.digest == token_digest(key)
    assert "authtoken_token" not in connection.introspection.table_names()


def test_the_key_authenticates_and_a_wrong_one_does_not(tiny_release, researcher):
    key = token_store(user=researcher).key
    assert _api(key).get("/api/v1/releases/").status_code == 200
    # Same prefix, another key: found by the prefix, refused by the digest.
    wrong = key[:8] + ("0" if key[8] != "0" else "1") + key[9:]
    response = _api(wrong).get("/api/v1/releases/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."
    for malformed in (key.upper(), key + "0", key[:-1], key[:39] + "\x00", ""):
        assert token_find(malformed) is None


def test_an_expired_or_revoked_token_is_refused(tiny_release, researcher, settings):
    client = Client()
    client.force_login(researcher)
    key = _key_made_on_the_page(client)
    api = _api(key)
    assert api.get("/api/v1/releases/").status_code == 200
    ApiToken.objects.filter(user=researcher).update(
        created=timezone.now() - timedelta(days=settings.REALICU_API_TOKEN_DAYS)
    )
    expired = api.get("/api/v1/releases/")
    assert expired.status_code == 401
    assert "Your API token expired on" in expired.json()["detail"]
    ApiToken.objects.filter(user=researcher).update(created=timezone.now())
    assert api.get("/api/v1/releases/").status_code == 200
    assert client.post("/releases/token/revoke/").status_code == 302
    revoked = api.get("/api/v1/releases/")
    assert revoked.status_code == 401
    assert revoked.json()["detail"] == "Invalid token."
    # A new token replaces the old key at once.
    newer = _key_made_on_the_page(client)
    assert _api(newer).get("/api/v1/releases/").status_code == 200
    assert ApiToken.objects.filter(user=researcher).count() == 1


def test_an_inactive_users_token_is_refused(tiny_release, researcher):
    key = token_store(user=researcher).key
    type(researcher).objects.filter(pk=researcher.pk).update(is_active=False)
    response = _api(key).get("/api/v1/releases/")
    assert response.status_code == 401


def test_the_admin_site_shows_the_prefix_only(researcher):
    superuser = make_user(staff=True, is_superuser=True, role=Role.ADMIN)
    researcher_key = token_store(user=researcher).key
    admin_key = token_store(user=superuser).key
    site = Client()
    site.force_login(superuser)
    listing = site.get("/admin/exports/apitoken/")
    assert listing.status_code == 200
    token = ApiToken.objects.get(user=researcher)
    pages = [
        listing.content.decode(),
        site.get(f"/admin/exports/apitoken/{token.pk}/change/").content.decode(),
    ]
    for page in pages:
        assert f"{researcher_key[:8]}…" in page
        for key in (researcher_key, admin_key):
            assert key[8:16] not in page  # nothing of a key past its prefix
        assert token.digest not in page
    assert site.get("/admin/exports/apitoken/add/").status_code == 403
    # DRF's token admin, which listed every full key, is gone.
    assert site.get("/admin/authtoken/tokenproxy/").status_code == 404
    # An admin may revoke a token there.
    deleted = site.post(
        f"/admin/exports/apitoken/{token.pk}/delete/", {"post": "yes"}, follow=True
    )
    assert deleted.status_code == 200
    assert not ApiToken.objects.filter(user=researcher).exists()
    assert _api(researcher_key).get("/api/v1/releases/").status_code == 401


def test_drf_tokens_of_before_are_hashed_by_the_migration_and_still_work(
    tiny_release, researcher, physician
):
    """The data migration on a database with DRF's authtoken table: each key
    is hashed with its owner and creation time kept, and the table (the key
    column) dropped with its migration records."""
    migration = importlib.import_module("exports.migrations.0005_api_token_hashed")
    key, old = "0123456789abcdef0123456789abcdef01234567", "f" * 40
    created = timezone.now() - timedelta(days=3)
    long_ago = timezone.now() - timedelta(days=365)
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {quote('authtoken_token')} ({quote('key')} varchar(40) "
            f"PRIMARY KEY, {quote('created')} timestamp with time zone NOT NULL, "
            f"{quote('user_id')} integer NOT NULL)"
            if connection.vendor == "postgresql"
            else f"CREATE TABLE {quote('authtoken_token')} ({quote('key')} "
            f"varchar(40) PRIMARY KEY, {quote('created')} datetime NOT NULL, "
            f"{quote('user_id')} integer NOT NULL)"
        )
        table = quote("authtoken_token")
        for row in ((key, created, researcher.pk), (old, long_ago, physician.pk)):
            cursor.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", list(row))
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, %s)",
            ["authtoken", "0001_initial", timezone.now()],
        )
    from django.apps import apps

    class Editor:
        """What the migration uses of RunPython's schema editor (SQLite's own
        cannot open inside the test's transaction)."""

        def __init__(self):
            self.connection = connection

        def execute(self, sql, params=()):
            with connection.cursor() as cursor:
                cursor.execute(sql, params)

    migration.drf_tokens_hash(apps, Editor())
    assert "authtoken_token" not in connection.introspection.table_names()
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM django_migrations WHERE app = 'authtoken'")
        assert cursor.fetchone()[0] == 0
    token = ApiToken.objects.get(user=researcher)
    assert token.prefix == key[:8] and token.digest == token_digest(key)
    assert abs(token.created - created) < timedelta(seconds=1)
    assert _api(key).get("/api/v1/releases/").status_code == 200
    expired = _api(old).get("/api/v1/releases/")  # a year old: still refused
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    leaks = [t for t, v in _every_stored_text() if key[8:] in v or old[8:] in v]
    assert leaks == []


def test_a_token_survives_a_secret_key_rotation_through_the_fallbacks(
    tiny_release, researcher, settings
):
    key = token_store(user=researcher).key
    old_secret = settings.SECRET_KEY
    settings.SECRET_KEY = "a new secret key of the site, long enough " * 2
    assert _api(key).get("/api/v1/releases/").status_code == 401
    settings.SECRET_KEY_FALLBACKS = [old_secret]
    assert _api(key).get("/api/v1/releases/").status_code == 200
    # Hashed again under the new secret: works once the fallback is gone.
    assert ApiToken.objects.get(user=researcher).digest == token_digest(key)
    settings.SECRET_KEY_FALLBACKS = []
    assert _api(key).get("/api/v1/releases/").status_code == 200
