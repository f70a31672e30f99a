"""Settings for RealICU Web, all from the environment (django-environ).

With nothing configured the platform runs embedded: SQLite in WAL mode under
``var/`` and a Celery broker on the filesystem, so that ``make run`` needs no
server. Production sets ``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL``
(Redis).
"""

import os
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(environ.Env().str("REALICU_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    # Embedded mode: a key made once per installation and kept under var/.
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = env.list(
    "DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"]
)
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    # No rest_framework.authtoken: it stores keys as they are, and its admin
    # listed them; API tokens are exports.models.ApiToken, kept hashed.
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    # The platform's own commands (serve: the supervisor of web and worker).
    "realicu_web",
    "accounts",
    "jobs",
    "windows",
    "datause",
    "evaluation",
    "annotation",
    "oracle",
    "exports",
    "agents",
    "surveillance",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Pages and JSON compressed on the wire (issue 20); Django's GZipMiddleware
    # pads each response with random bytes against BREACH. WhiteNoise above
    # serves static files itself, already compressed.
    "django.middleware.gzip.GZipMiddleware",
    "realicu_web.middleware.ForgedSessionCookieMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "realicu_web.urls"
WSGI_APPLICATION = "realicu_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": env.db(
        "DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'realicu.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the worker writes; IMMEDIATE takes the
    # write lock at BEGIN so concurrent writers queue instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    )
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
else:
    DATABASES["default"].setdefault(
        "CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60)
    )
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Password validators, login lockout, sessions, cookies, HSTS and the CSP:
# security.py.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("REALICU_STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Static files go out compressed (issue 29): collectstatic (run by bootstrap,
# and by the image's build) writes hashed names with gzip copies beside them,
# which WhiteNoise serves with far-future caching. Before any collectstatic
# (the test suite) names fall back to the plain ones and the finders serve the
# files, uncompressed.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "realicu_web.staticstorage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# The cache carries live job progress between worker and web processes: files
# under var/ when embedded, Redis (CACHE_URL=redis://...) in production.
CACHES = {"default": env.cache("CACHE_URL", default=f"filecache://{VAR_DIR / 'cache'}")}

# Celery: embedded default is kombu's filesystem transport (no server needed).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
CELERY_BROKER_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport with atomic publish and claim, so that no
    # message is read half-written or lost with a killed worker (issue 29).
    CELERY_BROKER_TRANSPORT = "realicu_web.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "staging_folder": str(CELERY_BROKER_DIR / "staging"),
        "claimed_folder": str(CELERY_BROKER_DIR / "claimed"),
        "bad_folder": str(CELERY_BROKER_DIR / "bad"),
        "store_processed": False,
        # How long a worker sleeps after finding no message it may take (the
        # queue empty, or as many taken as it has free slots): kombu's 1 s,
        # within Celery's 2 s drain, handed out about one message a second.
        # A poll lists one folder, so ten a second cost next to nothing.
        "polling_interval": env.float("REALICU_BROKER_POLLING_SECONDS", default=0.1),
    }
else:
    # A message a worker took and never acknowledged (the worker was killed) is
    # given to another worker after this long. Job tasks are short (Oracle
    # chunks) or hold a lease on their job row, so a long one redelivered while
    # it still runs finds its job taken and exits (jobs.leases). Timeouts keep
    # a web request from hanging on a broker that is away: the outbox keeps the
    # message instead.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("REALICU_BROKER_VISIBILITY_TIMEOUT", default=300),
        "socket_connect_timeout": 3,
        "socket_timeout": 10,
    }
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
# Job state (progress, counts, errors) lives in the database rows of each job,
# so no result backend is needed.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# After a broker outage (issue 29). A task that was running when the connection
# dropped is left to finish: Redis still takes its acknowledgement once back,
# and a copy given out after the visibility timeout finds its job finished or
# leased (jobs.leases) and does nothing. Cancelling it instead (Celery 6's
# default) would throw away a release build's work at every broker blip.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# No prefetch reduction after a reconnection: Celery lowers the prefetch to the
# pool's free processes and raises it only as tasks received after the
# reconnection are acknowledged, so one such task that cannot start (written
# behind the long task, realicu_web.worker_watchdog) held the only worker at
# one message, consuming nothing for 18 min. Without it a worker may take one
# message more than it can start while a task of before the outage still runs.
CELERY_WORKER_ENABLE_PREFETCH_COUNT_REDUCTION = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A worker loads the embedding model as it starts (realicu_web.celery), so the
# first agreement task does not; off for workers that never match texts, and
# for manage.py serve's worker (it loads the model when a task needs it).
REALICU_MATCHER_WARM_UP = env.bool("REALICU_MATCHER_WARM_UP", default=True)
# A threads or solo pool worker that holds the embedding model and has had no
# task for this long ends with realicu_web.celery.RECYCLE_EXIT_CODE, giving the
# model's memory back, when warm-up is off (0: never). Only for a worker that
# something starts again: manage.py serve's worker (300 there).
REALICU_WORKER_MODEL_IDLE_SECONDS = env.float(
    "REALICU_WORKER_MODEL_IDLE_SECONDS", default=0.0
)
# Housekeeping (jobs.housekeeping: reaper and outbox) as a thread of the worker
# (manage.py serve's worker sets it); production runs `manage.py housekeeping`.
REALICU_WORKER_HOUSEKEEPING_THREAD = env.bool(
    "REALICU_WORKER_HOUSEKEEPING_THREAD", default=False
)
# manage.py serve kills and restarts its worker when the worker's consumer loop
# has not passed for this long (jobs.liveness; a pass comes every 2 s at most).
REALICU_WORKER_HANG_SECONDS = env.float("REALICU_WORKER_HANG_SECONDS", default=60.0)
# A worker that holds a task this long without starting it while pool processes
# are free logs it and hands it back to the broker (realicu_web.worker_watchdog;
# 0: no watchdog).
REALICU_WORKER_STUCK_SECONDS = env.float("REALICU_WORKER_STUCK_SECONDS", default=60.0)
# Windows whose agreement is due that an agreement task computes besides its own
# (annotation.services.agreement.AGREEMENT_CATCH_UP): the filesystem broker
# hands a worker about two messages every 2 s, so one task catches up with the
# rest; a server broker delivers each window's task at once, so there it would
# only repeat other workers' work.
REALICU_AGREEMENT_CATCH_UP = env.int(
    "REALICU_AGREEMENT_CATCH_UP",
    default=200 if CELERY_BROKER_URL.startswith("filesystem://") else 0,
)
# Jobs (jobs.leases, jobs.reaper; README "Jobs"): a worker writes a heartbeat on
# its job row every HEARTBEAT seconds; a running job silent for STALE seconds
# lost its worker and is re-queued by the reaper, which runs every REAP seconds
# in the housekeeping loop (and for one job whenever its page loads); a queued
# job is sent again after REDISPATCH seconds without a worker taking it. A lost
# job is therefore re-queued within STALE + REAP seconds (90 s by default).
REALICU_JOB_HEARTBEAT_SECONDS = env.float("REALICU_JOB_HEARTBEAT_SECONDS", default=5.0)
REALICU_JOB_STALE_SECONDS = env.float("REALICU_JOB_STALE_SECONDS", default=60.0)
REALICU_JOB_REAP_SECONDS = env.float("REALICU_JOB_REAP_SECONDS", default=30.0)
REALICU_JOB_REDISPATCH_SECONDS = env.float(
    "REALICU_JOB_REDISPATCH_SECONDS", default=300.0
)

# Where importers may read server-side folders started from the page.
REALICU_IMPORT_ROOTS = env.list(
    "REALICU_IMPORT_ROOTS", default=[str(BASE_DIR / "var" / "imports")]
)
# Stays imported per batch: a CLIF import runs all its batches in one
# transaction; a MIMIC-IV import commits each batch (README "Importing data").
REALICU_IMPORT_BATCH_STAYS = env.int("REALICU_IMPORT_BATCH_STAYS", default=200)
# A MIMIC-IV import started from the page fans its batches out on the workers:
# auto (on with PostgreSQL, off with SQLite's one writer), on, off
# (windows.import_batches).
REALICU_IMPORT_FANOUT = env.str("REALICU_IMPORT_FANOUT", default="auto")
# Oracle runs: chunk tasks of a run at work at once (each gets this share of the
# backbone's concurrency and requests per minute; match it to the worker
# processes), windows per chunk, and how long a chunk's claim on its windows
# outlives a worker that stopped renewing it.
REALICU_ORACLE_LANES = env.int("REALICU_ORACLE_LANES", default=2)
REALICU_ORACLE_CHUNK_SIZE = env.int("REALICU_ORACLE_CHUNK_SIZE", default=50)
REALICU_ORACLE_CLAIM_LEASE_SECONDS = env.int(
    "REALICU_ORACLE_CLAIM_LEASE_SECONDS", default=120
)
# LLM backbones. The environment variables a backbone may name as its API key:
# names with one of these prefixes, or listed by name; any other variable of the
# workers (DJANGO_SECRET_KEY, DATABASE_URL, ...) is refused, so an admin cannot
# send it to an endpoint as a Bearer token.
REALICU_LLM_KEY_ENV_PREFIXES = env.list(
    "REALICU_LLM_KEY_ENV_PREFIXES", default=["REALICU_LLM_"]
)
REALICU_LLM_KEY_ENV_NAMES = env.list(
    "REALICU_LLM_KEY_ENV_NAMES", default=["OPENAI_API_KEY"]
)
# Hostnames refused as backbone or agent URLs besides link-local addresses
# (cloud metadata services), and this app's own addresses (host or host:port).
REALICU_LLM_BLOCKED_HOSTS = env.list("REALICU_LLM_BLOCKED_HOSTS", default=[])
REALICU_APP_ADDRESSES = env.list(
    "REALICU_APP_ADDRESSES", default=[os.environ.get("REALICU_BIND", "127.0.0.1:8000")]
)
# A backbone whose server does not report its context window (and whose admin
# left it empty) is assumed to have this many tokens; the reply budget
# (max_tokens) when the admin left it empty; tokens kept free between prompt and
# reply for the chat template's framing.
REALICU_LLM_DEFAULT_CONTEXT_TOKENS = env.int(
    "REALICU_LLM_DEFAULT_CONTEXT_TOKENS", default=4096
)
REALICU_LLM_DEFAULT_COMPLETION_TOKENS = env.int(
    "REALICU_LLM_DEFAULT_COMPLETION_TOKENS", default=768
)
REALICU_LLM_PROMPT_MARGIN_TOKENS = env.int(
    "REALICU_LLM_PROMPT_MARGIN_TOKENS", default=64
)
# The longest an Oracle request may wait for its reply: its timeout grows past
# the backbone's with the server's measured speed and each time it timed out
# (oracle.backbones.completion.request_timeout), never past this.
REALICU_LLM_TIMEOUT_MAX_SECONDS = env.float(
    "REALICU_LLM_TIMEOUT_MAX_SECONDS", default=1800.0
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "exports.authentication.ReleaseTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Service errors (django ValidationError / PermissionDenied) become 400 / 403.
    "EXCEPTION_HANDLER": "exports.api_errors.api_exception_handler",
    # Per token (one token per user): the researcher API's scopes.
    "DEFAULT_THROTTLE_RATES": {
        "releases": env.str("REALICU_API_RATE", default="600/min"),
        "release_downloads": env.str("REALICU_API_DOWNLOAD_RATE", default="300/min"),
        "submissions": env.str("REALICU_API_SUBMIT_RATE", default="30/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "RealICU Web researcher API",
    "DESCRIPTION": (
        "Versioned RealICU-Gold and RealICU-Scale releases, their files and window "
        "records, and the scoring of model predictions (spec sections 6 and 8). "
        "Authenticate with 'Authorization: Token <key>'."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Three models have a "state"; named here, the schema has no State8e3Enum
    # (drf_spectacular.W001, which `check --deploy --fail-level WARNING` fails on).
    "ENUM_NAME_OVERRIDES": {"OracleRunStateEnum": "oracle.models.RunState"},
    # <id:...> in a URL (accounts.ids.IdConverter): an integer of the
    # database's range, so generated clients and schemathesis send ids in range.
    "PATH_CONVERTER_OVERRIDES": {
        "id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    },
    # The docs page (/api/docs/) is Swagger UI served from drf-spectacular-sidecar's
    # static files: no CDN, so it works offline. No validator badge: it would
    # send the schema's address to an outside validator.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}
# Releases: one read-only folder per version; submissions: uploaded predictions.
REALICU_RELEASES_DIR = Path(
    env.str("REALICU_RELEASES_DIR", default=str(VAR_DIR / "releases"))
)
REALICU_SUBMISSIONS_DIR = Path(
    env.str("REALICU_SUBMISSIONS_DIR", default=str(VAR_DIR / "submissions"))
)
# Object storage (issue 36): with REALICU_S3_BUCKET set, release files (with
# their manifest and data card), submissions and their plots live in that
# bucket of an S3-compatible store (AWS S3, MinIO, Ceph RGW) through
# django-storages' S3 backend, so web and workers on different machines share
# them; the folders above then hold only a worker's unfinished build. Unset
# (the embedded default), they stay in those local folders.
REALICU_S3_BUCKET = env.str("REALICU_S3_BUCKET", default="")
if REALICU_S3_BUCKET:
    STORAGES["realicu"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": REALICU_S3_BUCKET,
            "endpoint_url": env.str("REALICU_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("REALICU_S3_REGION", default="") or None,
            "access_key": env.str("REALICU_S3_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("REALICU_S3_SECRET_ACCESS_KEY", default="") or None,
            "location": env.str("REALICU_S3_PREFIX", default=""),
            # Write-once keys are enforced by realicu_web.storage.store_put_new;
            # the backend must not rename a name that is taken.
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": True,
            "signature_version": "s3v4",
            "addressing_style": env.str("REALICU_S3_ADDRESSING", default="path"),
        },
    }
# Downloads of a release file from the object store: after the sha256 check,
# a redirect to a presigned address valid this many seconds (true), or the
# file streamed through the web server (false, the default).
REALICU_OBJECT_STORAGE_REDIRECT = env.bool(
    "REALICU_OBJECT_STORAGE_REDIRECT", default=False
)
REALICU_OBJECT_STORAGE_URL_SECONDS = env.int(
    "REALICU_OBJECT_STORAGE_URL_SECONDS", default=300
)
REALICU_SUBMISSION_MAX_BYTES = env.int(
    "REALICU_SUBMISSION_MAX_BYTES", default=200 * 1024 * 1024
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}
