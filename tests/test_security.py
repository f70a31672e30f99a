"""Security hardening (issue 14): sign-in lockout, password rules wherever a
password is set, the production bootstrap without demo accounts, the session
idle timeout, the Content-Security-Policy, and `check --deploy` clean with the
production environment of docker-compose.yml."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories import make_user

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


# Sign-in lockout ------------------------------------------------------------


def test_forty_wrong_passwords_then_the_right_one_does_not_sign_in(client):
    user = make_user(username="dr-lock", password=PASSWORD)
    codes = [
        client.post(
            "/accounts/login/", {"username": "dr-lock", "password": f"guess {n}"}
        ).status_code
        for n in range(40)
    ]
    assert codes[:9] == [200] * 9  # the form again, with its error
    assert set(codes[9:]) == {429}
    response = client.post(
        "/accounts/login/", {"username": "dr-lock", "password": PASSWORD}
    )
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many wrong passwords for this account" in page
    assert "ask an admin to unlock" in page
    assert not _signed_in(client)
    # Another account is not locked by it.
    make_user(username="dr-other", password=PASSWORD)
    other = client.post(
        "/accounts/login/", {"username": "dr-other", "password": PASSWORD}
    )
    assert other.status_code == 302 and _signed_in(client)
    assert user.pk != int(client.session["_auth_user_id"])


def test_a_wrong_password_before_the_limit_says_so_and_a_success_resets_the_count(
    client,
):
    make_user(username="dr-typo", password=PASSWORD)
    for _ in range(5):
        wrong = client.post(
            "/accounts/login/", {"username": "dr-typo", "password": "nope"}
        )
        assert wrong.status_code == 200
        assert "Please enter a correct username and password" in wrong.content.decode()
    right = client.post(
        "/accounts/login/", {"username": "dr-typo", "password": PASSWORD}
    )
    assert right.status_code == 302 and _signed_in(client)
    client.logout()
    for _ in range(5):  # five more are again below the limit
        client.post("/accounts/login/", {"username": "dr-typo", "password": "nope"})
    right = client.post(
        "/accounts/login/", {"username": "dr-typo", "password": PASSWORD}
    )
    assert right.status_code == 302


# Passwords --------------------------------------------------------------------


@pytest.mark.parametrize(
    "password, message",
    [
        ("a", "This password is too short. It must contain at least 10 characters."),
        ("93847561029", "This password is entirely numeric."),
        ("password123", "This password is too common."),
    ],
)
def test_bootstrap_refuses_a_weak_demo_password_before_doing_anything(
    monkeypatch, password, message
):
    monkeypatch.setenv("REALICU_ADMIN_PASSWORD", password)
    with pytest.raises(CommandError) as info:
        call_command("bootstrap")
    assert "The password in REALICU_ADMIN_PASSWORD is refused for 'admin'" in str(
        info.value
    )
    assert message in str(info.value)
    assert not get_user_model().objects.exists()


def test_production_bootstrap_creates_no_demo_account_and_prints_no_password(
    monkeypatch, capsys
):
    monkeypatch.delenv("REALICU_ADMIN_USERNAME", raising=False)
    call_command("bootstrap", "--skip-demo")
    out = capsys.readouterr().out
    assert not get_user_model().objects.exists()
    assert "createsuperuser" in out and "Demo accounts created" not in out


def test_production_bootstrap_creates_the_admin_from_the_environment(
    monkeypatch, capsys
):
    monkeypatch.setenv("REALICU_ADMIN_USERNAME", "chief")
    monkeypatch.setenv("REALICU_ADMIN_PASSWORD", "ward rounds at dawn 7")
    call_command("bootstrap", "--skip-demo")
    out = capsys.readouterr().out
    (admin,) = get_user_model().objects.all()
    assert admin.username == "chief" and admin.is_superuser
    assert admin.check_password("ward rounds at dawn 7")
    assert "ward rounds" not in out


@pytest.mark.parametrize("password", ["a", "93847561029"])
def test_production_bootstrap_refuses_a_weak_admin_password(monkeypatch, password):
    monkeypatch.setenv("REALICU_ADMIN_USERNAME", "chief")
    monkeypatch.setenv("REALICU_ADMIN_PASSWORD", password)
    with pytest.raises(
        CommandError, match="REALICU_ADMIN_PASSWORD is refused for 'chief'"
    ):
        call_command("bootstrap", "--skip-demo")
    assert not get_user_model().objects.exists()


def test_admin_site_refuses_a_weak_password_for_a_new_user(client):
    admin = make_user(username="site-admin", staff=True, is_superuser=True)
    client.force_login(admin)
    response = client.post(
        "/admin/auth/user/add/",
        {
            "username": "newdoc",
            "password1": "93847561029",
            "password2": "93847561029",
            "usable_password": "true",
        },
    )
    assert response.status_code == 200
    assert "This password is entirely numeric." in response.content.decode()
    assert not get_user_model().objects.filter(username="newdoc").exists()


def test_changepassword_command_refuses_a_weak_password(monkeypatch):
    make_user(username="dr-change", password=PASSWORD)
    answers = iter(["a", "a"] * 3)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(CommandError, match="Aborting password change"):
        call_command("changepassword", "dr-change")
    assert get_user_model().objects.get(username="dr-change").check_password(PASSWORD)


# Sessions and headers -------------------------------------------------------------


def test_a_session_ends_after_the_idle_timeout(client, settings):
    user = make_user(password=PASSWORD)
    client.force_login(user)
    assert client.get("/").status_code == 302
    assert (
        settings.SESSION_COOKIE_AGE == 3600 and settings.SESSION_EXPIRE_AT_BROWSER_CLOSE
    )
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    Session.objects.update(expire_date=timezone.now())  # an hour without a request
    response = client.get("/releases/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_active_session_is_renewed_at_most_once_a_minute(client):
    from django.contrib.sessions.models import Session

    client.force_login(make_user(password=PASSWORD))
    client.get("/accounts/login/")
    first = Session.objects.get().expire_date
    client.get("/accounts/login/")
    assert Session.objects.get().expire_date == first  # within the minute


def test_pages_carry_the_content_security_policy(client):
    response = client.get("/accounts/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-eval'" not in policy
    assert "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert response["X-Frame-Options"] == "DENY"


def test_templates_have_no_inline_script():
    """The CSP allows scripts from this origin only: an inline script or an
    on* handler attribute in a template would not run."""
    offenders = []
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text()
        for match in re.finditer(r"<script\b[^>]*>", text):
            if "src=" not in match.group(0):
                offenders.append(f"{path.name}: {match.group(0)}")
        if re.search(r"\son[a-z]+\s*=", text) or "javascript:" in text:
            offenders.append(f"{path.name}: handler attribute or javascript: URL")
    assert offenders == []


# Production settings -----------------------------------------------------------


def _compose_environment() -> dict[str, str]:
    """The web service's environment in docker-compose.yml, with the values an
    operator must supply filled in and the compose defaults applied."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    supplied = {
        "DJANGO_SECRET_KEY": "k" * 10 + "production-like-secret-" + "x9Q" * 12,
        "DJANGO_ALLOWED_HOSTS": "icu.example.org",
        "POSTGRES_PASSWORD": "not-used-by-check",
    }

    def value(raw) -> str:
        def substitute(match):
            name, default = match.group(1), match.group(3) or ""
            return supplied.get(name, default if match.group(2) == ":-" else "")

        return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", substitute, str(raw))

    return {k: value(v) for k, v in compose["services"]["web"]["environment"].items()}


def test_production_compose_runs_no_demo_bootstrap():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    migrate = compose["services"]["migrate"]
    assert migrate["command"][-2:] == ["bootstrap", "--skip-demo"]
    for name in ("web", "worker", "housekeeping"):
        assert "REALICU_ADMIN_PASSWORD" not in compose["services"][name]["environment"]


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "REALICU_", "DATABASE_", "CACHE_", "CELERY_"))
    }
    env.update(_compose_environment())
    env["REALICU_VAR_DIR"] = str(tmp_path)  # /data is the container's volume
    env["REALICU_IMPORT_ROOTS"] = str(tmp_path / "imports")
    assert env["DJANGO_SECURE_SSL_REDIRECT"] == "true"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout
    assert time.monotonic() - started < 300


# JSON limits -----------------------------------------------------------------------


def test_bounded_json_counts_only_real_nesting_and_long_integers():
    from realicu_web.jsonlimits import JsonLimitError, loads_bounded

    assert loads_bounded("[" * 64 + "]" * 64)
    assert loads_bounded('{"text": "' + "[" * 500 + '\\" {"}') == {
        "text": "[" * 500 + '" {'
    }
    assert loads_bounded('{"id": ' + "9" * 19 + "}") == {"id": int("9" * 19)}
    with pytest.raises(JsonLimitError, match="nested deeper than 64 levels"):
        loads_bounded("[" * 65 + "]" * 65)
    with pytest.raises(JsonLimitError, match="an integer of 20 digits"):
        loads_bounded("-" + "9" * 20)
