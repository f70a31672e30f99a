"""Security settings, read after base.py: login throttling and lockout
(django-axes), password rules, sessions with an idle timeout, expiring API
tokens, rate limits, the Content-Security-Policy (django-csp), and TLS behind a
proxy (secure cookies, HSTS, redirect to HTTPS), which production turns on from
the environment (docker-compose.yml; README "Threat model")."""

from django.core.exceptions import ImproperlyConfigured

from .base import INSTALLED_APPS, MIDDLEWARE, REST_FRAMEWORK, env

INSTALLED_APPS = [*INSTALLED_APPS, "axes"]

# django-axes counts failed sign-ins per username in the database and locks
# the username out after REALICU_LOGIN_FAILURE_LIMIT of them for the cool-off
# time; a success resets the count. Per username, not per address: behind a
# proxy every client has the proxy's address, and a guesser spread over many
# addresses is stopped all the same. An admin unlocks at once with
# `manage.py axes_reset_username <name>`.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("REALICU_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = env.float("REALICU_LOGIN_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = ["username"]
# axes.W006 asks for the address as a lockout parameter too; per address, one
# guesser behind a hospital's NAT would lock out every physician behind it, and
# the per-username count is not bypassed by rotating user agents or cookies.
SILENCED_SYSTEM_CHECKS = ["axes.W006"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Passwords are hashed with Argon2id (requirements.txt says why); the PBKDF2
# hashers stay after it, so a password stored before checks and is rehashed
# with Argon2 at its next sign-in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
]

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": (
            "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"
        )
    },
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Sessions end after REALICU_SESSION_IDLE_MINUTES without a request, at any
# setting, and when the browser closes. SessionIdleTimeoutMiddleware renews a
# session at most every REALICU_SESSION_RENEW_SECONDS (a 60th of the idle
# time, 1 s to 1 min), so a session lives the idle time plus that interval
# after its last renewal: never less than the idle time after a request, at
# most one interval more.
REALICU_SESSION_IDLE_SECONDS = 60 * env.int("REALICU_SESSION_IDLE_MINUTES", default=60)
if REALICU_SESSION_IDLE_SECONDS < 60:
    # 0 or less would end every session as it starts: nobody could sign in.
    raise ImproperlyConfigured(
        "REALICU_SESSION_IDLE_MINUTES must be at least 1 (minutes without a "
        f"request before a session ends); it is {REALICU_SESSION_IDLE_SECONDS // 60}."
    )
REALICU_SESSION_RENEW_SECONDS = max(1, min(60, REALICU_SESSION_IDLE_SECONDS // 60))
SESSION_COOKIE_AGE = REALICU_SESSION_IDLE_SECONDS + REALICU_SESSION_RENEW_SECONDS
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

# API tokens are refused this many days after they were created.
REALICU_API_TOKEN_DAYS = env.int("REALICU_API_TOKEN_DAYS", default=90)

# Where LLM backbones and online-evaluation endpoints may connect
# (oracle.backbones.endpoints; README "Threat model"): a researcher's endpoint
# must be on a public address unless it lies in one of these networks
# (comma-separated CIDRs, e.g. "10.20.0.0/16"); the platform's own services,
# refused by name and address whatever the networks allowed.
REALICU_ENDPOINT_ALLOWED_NETWORKS = env.list(
    "REALICU_ENDPOINT_ALLOWED_NETWORKS", default=[]
)
REALICU_APP_SERVICE_NAMES = env.list(
    "REALICU_APP_SERVICE_NAMES",
    default=["web", "postgres", "redis", "worker", "housekeeping", "migrate"],
)

# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (production):
# cookies only over HTTPS, HTTP redirected to HTTPS, and HSTS.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if env.bool("DJANGO_BEHIND_TLS_PROXY", default=False)
    else None
)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
    "DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True
)
# On by default, as in docker-compose.yml, so `check --deploy` is clean with
# the README's production variables (W021); sent only while HSTS is on, and
# the preload list takes registrable domains only, once submitted to it.
SECURE_HSTS_PRELOAD = env.bool("DJANGO_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp), on every response in every mode, so the
# browser tests run under it: scripts only from this origin (htmx, uPlot and
# the app's scripts are vendored; no inline script anywhere), no eval, no
# plugins, no framing. Styles allow 'unsafe-inline' for the style attributes
# that carry data widths and shades (bars, heat cells) and htmx's indicator
# style; no script can run from them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

_security = "django.middleware.security.SecurityMiddleware"
_sessions = "django.contrib.sessions.middleware.SessionMiddleware"
MIDDLEWARE = list(MIDDLEWARE)
MIDDLEWARE.insert(MIDDLEWARE.index(_security) + 1, "csp.middleware.CSPMiddleware")
# Before the session is read: a NUL byte in the address or a form field, or an
# address too long, is a 4xx (realicu_web.middleware.RequestHygieneMiddleware).
MIDDLEWARE.insert(
    MIDDLEWARE.index(_sessions), "realicu_web.middleware.RequestHygieneMiddleware"
)
MIDDLEWARE.insert(
    MIDDLEWARE.index(_sessions) + 1,
    "realicu_web.middleware.SessionIdleTimeoutMiddleware",
)
# Last, as django-axes asks: it turns a lockout into the lockout page.
MIDDLEWARE.append("axes.middleware.AxesMiddleware")

REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "exports.authentication.ReleaseTokenAuthentication",
    ],
    # JSON bodies with a depth and integer-size limit (a 400, not a 500).
    "DEFAULT_PARSER_CLASSES": [
        "realicu_web.jsonlimits.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": [],
}
