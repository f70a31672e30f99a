"""Security hardening (issue 14): sign-in lockout, password rules wherever a
password is set, the production bootstrap without demo accounts, the session
idle timeout (at any setting, issue 31: a controlled clock at 1 minute), the
Content-Security-Policy, and `check --deploy` clean with the production
environment of docker-compose.yml and with the README's production variables
at their defaults."""

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
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
    assert settings.REALICU_SESSION_IDLE_SECONDS == 3600
    assert settings.REALICU_SESSION_RENEW_SECONDS == 60
    assert settings.SESSION_COOKIE_AGE == 3660
    assert settings.SESSION_EXPIRE_AT_BROWSER_CLOSE
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


class Clock:
    """``timezone.now()`` for the session store and the idle-timeout
    middleware, moved by hand."""

    def __init__(self, monkeypatch):
        self.start = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
        self.seconds = 0.0
        monkeypatch.setattr("django.utils.timezone.now", self.now)

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)


@pytest.fixture
def one_minute(settings, monkeypatch) -> Clock:
    """REALICU_SESSION_IDLE_MINUTES=1, as settings/security.py derives it
    (checked by test_the_session_settings_follow_the_idle_minutes)."""
    settings.REALICU_SESSION_IDLE_SECONDS = 60
    settings.REALICU_SESSION_RENEW_SECONDS = 1
    settings.SESSION_COOKIE_AGE = 61
    return Clock(monkeypatch)


def _page_at(client, clock: Clock, seconds: float) -> bool:
    """Whether the user is still signed in at ``seconds`` after sign-in."""
    clock.seconds = seconds
    response = client.get("/releases/token/")
    assert response.status_code in (200, 302)
    if response.status_code == 302:
        assert "/accounts/login/" in response["Location"]
    return response.status_code == 200


def test_at_one_minute_an_active_user_is_never_signed_out(client, one_minute):
    """Requests up to a minute apart, for five minutes: some a second or less
    after the one before (the session is not written again then), each
    followed by a gap of the full minute. Once-a-minute renewal with the idle
    time as the expiry signed this user out at 75 s."""
    from accounts.roles import Role

    client.force_login(make_user(role=Role.RESEARCHER))
    times = [30, 59.5, 60.4, 120.3, 180.2, 180.9, 240.85, 241.5, 301.5]
    gaps = [b - a for a, b in zip([0, *times], times)]
    assert max(gaps) <= 60
    assert [_page_at(client, one_minute, t) for t in times] == [True] * len(times)


def test_at_one_minute_an_idle_user_is_signed_out_after_the_minute(client, one_minute):
    """Signed in at the minute after the last request, out one renewal
    interval (1 s) after it at the latest."""
    from accounts.roles import Role

    user = make_user(role=Role.RESEARCHER)
    client.force_login(user)
    assert _page_at(client, one_minute, 59.99)
    assert not _page_at(client, one_minute, 59.99 + 61.01)
    client.force_login(user)  # at 121 s
    assert _page_at(client, one_minute, 121.5)  # not renewed: within its second
    assert _page_at(client, one_minute, 121.5 + 60)
    assert not _page_at(client, one_minute, 121.5 + 60 + 61.01)


# REALICU_SESSION_IDLE_MINUTES -> (idle, renewal interval, SESSION_COOKIE_AGE),
# in seconds, as settings/security.py derives them.
IDLE_SETTINGS = {
    "1": (60, 1, 61),
    "2": (120, 2, 122),
    "15": (900, 15, 915),
    "60": (3600, 60, 3660),
    "90": (5400, 60, 5460),
    "1440": (86400, 60, 86460),
}


@pytest.mark.parametrize("minutes", IDLE_SETTINGS)
def test_at_any_setting_an_active_user_stays_and_an_idle_one_leaves(
    client, settings, monkeypatch, minutes
):
    """The idle timeout at each setting: requests a little under one renewal
    interval apart (the session is not written again then), each followed by
    a gap of the full idle time, never sign the user out; after the last
    request, the user is signed in at the idle time and out one interval
    after it."""
    from accounts.roles import Role

    idle, renew, age = IDLE_SETTINGS[minutes]
    settings.REALICU_SESSION_IDLE_SECONDS = idle
    settings.REALICU_SESSION_RENEW_SECONDS = renew
    settings.SESSION_COOKIE_AGE = age
    clock = Clock(monkeypatch)
    client.force_login(make_user(role=Role.RESEARCHER))
    times, t = [], 0.0
    for _ in range(4):
        t += renew * 0.99
        times.append(t)
        t += idle
        times.append(t)
    assert [_page_at(client, clock, t) for t in times] == [True] * len(times)
    last = times[-1] + idle
    assert _page_at(client, clock, last)
    assert not _page_at(client, clock, last + idle + renew + 0.01)


@pytest.mark.parametrize("minutes", ["0", "-5"])
def test_an_idle_time_under_a_minute_is_refused_at_start(tmp_path, minutes):
    env = {
        **os.environ,
        "REALICU_SESSION_IDLE_MINUTES": minutes,
        "REALICU_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "REALICU_SESSION_IDLE_MINUTES must be at least 1" in result.stderr


@pytest.mark.parametrize("minutes", IDLE_SETTINGS)
def test_the_session_settings_follow_the_idle_minutes(tmp_path, minutes):
    idle, renew, age = IDLE_SETTINGS[minutes]
    code = (
        "from django.conf import settings as s; "
        "print(s.REALICU_SESSION_IDLE_SECONDS, s.REALICU_SESSION_RENEW_SECONDS, "
        "s.SESSION_COOKIE_AGE)"
    )
    env = {
        **os.environ,
        "REALICU_SESSION_IDLE_MINUTES": minutes,
        "REALICU_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.split() == [str(idle), str(renew), str(age)], result.stderr


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


def _check_deploy(tmp_path, environment: dict[str, str]):
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "REALICU_", "DATABASE_", "CACHE_", "CELERY_"))
    }
    env.update(environment)
    env["REALICU_VAR_DIR"] = str(tmp_path)  # /data is the container's volume
    env["REALICU_IMPORT_ROOTS"] = str(tmp_path / "imports")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_deploy_is_clean_with_the_readme_production_variables(tmp_path):
    """The README's "Production" table: the variables it says to set behind
    HTTPS, and nothing else, so every other one (HSTS preload and subdomains
    included) at its default."""
    result = _check_deploy(
        tmp_path,
        {
            "DJANGO_SECRET_KEY": "k" * 10 + "production-like-secret-" + "x9Q" * 12,
            "DJANGO_ALLOWED_HOSTS": "icu.example.org",
            "DJANGO_SECURE_COOKIES": "true",
            "DJANGO_BEHIND_TLS_PROXY": "true",
            "DJANGO_SECURE_SSL_REDIRECT": "true",
            "DJANGO_HSTS_SECONDS": "31536000",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    environment = _compose_environment()
    assert environment["DJANGO_SECURE_SSL_REDIRECT"] == "true"
    started = time.monotonic()
    result = _check_deploy(tmp_path, environment)
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
    assert loads_bounded(f'{{"id": {2**63 - 1}}}') == {"id": 2**63 - 1}
    assert loads_bounded(f"[{-(2**63)}, 1.5e308]") == [-(2**63), 1.5e308]
    with pytest.raises(JsonLimitError, match="nested deeper than 64 levels"):
        loads_bounded("[" * 65 + "]" * 65)
    with pytest.raises(JsonLimitError, match="an integer of 20 digits"):
        loads_bounded("-" + "9" * 20)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" + "9" * 19 + "]", "the integer 9999999999999999999 is beyond the 64-bit"),
        (f"[{2**63}]", "beyond the 64-bit range"),
        (f"[{-(2**63) - 1}]", "beyond the 64-bit range"),
        ("[1e400]", "the number 1e400 is beyond the range of a double"),
        ("[-1e400]", "beyond the range of a double"),
        ("[NaN]", "NaN is not a number JSON allows"),
        ('{"x": Infinity}', "Infinity is not a number JSON allows"),
        ('{"text": "a\\u0000b"}', "a NUL character"),
        ('{"a\\u0000": 1}', "a NUL character"),
        ('[["deep", ["\\u0000"]]]', "a NUL character"),
    ],
)
def test_bounded_json_refuses_what_no_database_column_takes(text, message):
    from realicu_web.jsonlimits import JsonLimitError, loads_bounded

    with pytest.raises(JsonLimitError, match=message):
        loads_bounded(text)
    assert loads_bounded('["\\\\u0000"]') == ["\\u0000"]  # an escaped backslash
