"""Settings for the study platform, driven entirely by environment variables.

Without any variable the platform runs embedded: SQLite, Celery over kombu's filesystem transport and
private local storage, all under ``var/``. ``DATABASE_URL``, ``REDIS_URL`` and ``STORAGE_BACKEND=s3``
switch to PostgreSQL, Redis and S3; ``DJANGO_ENV=production`` demands real secrets and hardens cookies.
Each app reads its own knobs from one dict (``GRADING``, ``RATING``, ``EXPERTS``, ``UPLOADS``) through an accessor.
"""

from __future__ import annotations

import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from experts import conf as experts_conf
from experts import task_names as experts_task_names
from grading import conf as grading_conf
from grading import task_names as grading_task_names
from rating import conf as rating_conf
from rating import task_names as rating_task_names
from studies import conf as studies_conf
from studies import task_names as studies_task_names
from studyapp import broker_transport

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DJANGO_ENV = os.environ.get("DJANGO_ENV", "development").strip().lower()
PRODUCTION = DJANGO_ENV == "production"
TESTING = "pytest" in sys.modules or os.environ.get("DJANGO_TESTING") == "1"


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    """Return the secret key; outside production one is generated once into var/ and reused."""
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_ENV=production.")
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Off unless a developer asks for it: Django's technical 404 and 500 pages list every URL pattern, settings and
# tracebacks to whoever opens an unknown address, and `make run` is what a coordinator tries first.
DEBUG = _env_bool("DJANGO_DEBUG", default=False)

ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS")
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must be set when DJANGO_ENV=production.")
if not ALLOWED_HOSTS:
    ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # The project's apps, bottom layer first (pyproject's "app-layers" contract keeps the imports one way).
    "studies.apps.StudiesConfig",
    "rating.apps.RatingConfig",
    "grading.apps.GradingConfig",
    "surveys.apps.SurveysConfig",
    "pairing.apps.PairingConfig",
    "experts.apps.ExpertsConfig",
    "journey.apps.JourneyConfig",
    "console.apps.ConsoleConfig",
    "axes",
    "csp",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer probes before host checks and the HTTPS redirect (studyapp/health.py).
    "studyapp.health.HealthCheckMiddleware",
    "studyapp.metrics.MetricsMiddleware",  # request latency for /metrics
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before sessions and the database: a request that queued too long is answered "busy" at no cost.
    "studyapp.overload.OverloadMiddleware",
    "studies.null_characters.NullCharacterMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, so it turns a locked-out sign-in from any view (site, admin, API token) into one 429 answer.
    "axes.middleware.AxesMiddleware",
]
# A request the proxy stamped (X-Request-Start) more than this many seconds ago is answered 503 "busy,
# retrying" at once instead of being served late (studyapp/overload.py); 0 never sheds. Short, because the
# participant stares at a blank page for this long before the "busy" page tells them what is happening.
OVERLOAD_QUEUE_SECONDS = float(os.environ.get("OVERLOAD_QUEUE_SECONDS", "3"))
# The survey page sends the answers changed in this window together (and whatever is pending when the page is
# left or submitted): one request per few answers instead of one per click, the largest share of a launch's
# requests. An answer reaches the server at most this many seconds after it was given.
SURVEY_AUTOSAVE_SECONDS = float(os.environ.get("SURVEY_AUTOSAVE_SECONDS", "4"))
# Load benches read each answer's server CPU and query count from a Server-Timing header (off by default).
SERVER_TIMING = _env_bool("SERVER_TIMING")
if SERVER_TIMING:
    MIDDLEWARE.insert(0, "studyapp.server_timing.ServerTimingMiddleware")

ROOT_URLCONF = "studyapp.urls"
WSGI_APPLICATION = "studyapp.wsgi.application"

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
                "studies.context_processors.navigation",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")),
            # A file (not memory) so a real Celery worker process can share the test database.
            "TEST": {"NAME": str(VAR_DIR / "test-db.sqlite3")},
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                # WAL lets the worker process read while the web process writes; NORMAL sync is safe under WAL.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DATABASES["default"].setdefault("ATOMIC_REQUESTS", False)
# The development server runs each request in a new thread that ends with it, so a connection kept open for
# reuse would never be reused or closed; under runserver every request closes its connection.
if sys.argv[1:2] == ["runserver"]:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache / Redis ----------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
# Every request-path call to Redis (cache, throttles, broker publish) waits at most this long for a reply, so a
# hung Redis (accepting, answering nothing) cannot hold a page: see docs/grading-reliability.md. The Celery
# worker's own long-lived broker connection keeps longer timeouts (studyapp/celery.py).
REDIS_REQUEST_TIMEOUT_SECONDS = float(os.environ.get("REDIS_REQUEST_TIMEOUT_SECONDS", "0.25"))
if REDIS_URL:
    from studyapp.redis_breaker import FailFastConnection

    # Nothing the pages need lives only in the cache (sessions and sign-in failures are in the database), so
    # an unreachable Redis degrades to cache misses with a logged error instead of failing every request. After
    # one unanswered call the connection fails fast for a few seconds (studyapp/redis_breaker.py), so a page
    # pays one timeout, not one per cache call.
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": REDIS_REQUEST_TIMEOUT_SECONDS,
                        "SOCKET_TIMEOUT": REDIS_REQUEST_TIMEOUT_SECONDS,
                        "CONNECTION_POOL_KWARGS": {"connection_class": FailFastConnection}},
        }
    }
    DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True
    DJANGO_REDIS_LOGGER = "studyapp.cache"
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# The staff overview's and leaderboard's figures are recomputed at most this often (console/dashboard/cached.py);
# 0 computes them on every page (the tests, which change data between two pages).
DASHBOARD_CACHE_SECONDS = int(os.environ.get("DASHBOARD_CACHE_SECONDS", "0" if TESTING else "10"))

# --- Auth ----------------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# Proxies in front of the site that append the client's address to X-Forwarded-For (0: none, the header is
# ignored). Sign-in lockouts, the invitation-link throttle and the API throttles all key on this address.
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))
# One lockout for every way to sign in (site, admin, API token): failures per (username, client address) in
# the database; at the limit even the right password is refused until the window has passed.
AUTHENTICATION_BACKENDS = ["studies.lockout.LockoutBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_LOCKOUT_ATTEMPTS", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "studies.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "studies.lockout.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# Requests to invitation links (/join/…) per client address; each may create an account.
JOIN_THROTTLE_RATE = os.environ.get("JOIN_THROTTLE_RATE", "30/min")
# A signed personal invitation is the recruit's credential (password optional); it expires this many days
# after it was issued.
PERSONAL_LINK_MAX_AGE_DAYS = int(os.environ.get("PERSONAL_LINK_MAX_AGE_DAYS", "90"))
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static and private files -------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = VAR_DIR / "media"
# Uploaded files are never served by URL: no route maps this prefix; permission-checked views stream them.
MEDIA_URL = "/_private-media-not-served/"

STORAGE_BACKEND = os.environ.get("STORAGE_BACKEND", "local").strip().lower()
if STORAGE_BACKEND == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ.get("AWS_STORAGE_BUCKET_NAME", ""),
            "region_name": os.environ.get("AWS_S3_REGION_NAME") or None,
            "endpoint_url": os.environ.get("AWS_S3_ENDPOINT_URL") or None,
            "access_key": os.environ.get("AWS_ACCESS_KEY_ID") or None,
            "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
            "location": os.environ.get("AWS_LOCATION", "media"),
        },
    }
    if not _default_storage["OPTIONS"]["bucket_name"]:
        raise ImproperlyConfigured("STORAGE_BACKEND=s3 needs AWS_STORAGE_BUCKET_NAME.")
elif STORAGE_BACKEND == "local":
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT), "base_url": None, "file_permissions_mode": 0o600},
    }
else:
    raise ImproperlyConfigured(f"STORAGE_BACKEND must be 'local' or 's3', not {STORAGE_BACKEND!r}.")
STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        # Hashed names in production only: outside it the files are served as they are in the source folders
        # (what debug mode used to give every development run, now that it is off unless asked for).
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION and not TESTING
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        ),
        # Public files, read by a proxy that runs as another user (deploy/nginx.conf): world-readable, unlike
        # uploads (FILE_UPLOAD_PERMISSIONS, which would otherwise apply to collectstatic too).
        "OPTIONS": {"file_permissions_mode": 0o644, "directory_permissions_mode": 0o755},
    },
}
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = not PRODUCTION
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 2**20  # bigger uploads stream to a temporary file, never into memory
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 2**20
FILE_UPLOAD_TEMP_DIR = None
FILE_UPLOAD_PERMISSIONS = 0o600  # uploads only: the static files storage sets its own modes

UPLOADS: dict[str, Any] = {  # only what the environment sets; studies/conf.py holds every default
    "MAX_FILE_BYTES": int(os.environ.get("UPLOAD_MAX_FILE_BYTES", studies_conf.UPLOAD_DEFAULTS["MAX_FILE_BYTES"])),
    "MAX_EPISODE_BYTES": int(
        os.environ.get("UPLOAD_MAX_EPISODE_BYTES", studies_conf.UPLOAD_DEFAULTS["MAX_EPISODE_BYTES"])),
    "MAX_FILES_PER_EPISODE": int(
        os.environ.get("UPLOAD_MAX_FILES_PER_EPISODE", studies_conf.UPLOAD_DEFAULTS["MAX_FILES_PER_EPISODE"])),
}

# --- Celery -----------------------------------------------------------------------------------------------
# Test runs get their own queue folder so they never consume messages left by `make run`.
CELERY_QUEUE_DIR = VAR_DIR / ("celery-test" if TESTING else "celery")
# The broker: CELERY_BROKER_URL (amqp://… for RabbitMQ, redis://…), else Redis at REDIS_URL, else the embedded
# filesystem transport. Whatever it is, the database stays the source of truth (docs/grading-reliability.md).
BROKER_URL_SETTING = os.environ.get("CELERY_BROKER_URL", "").strip()
if BROKER_URL_SETTING or REDIS_URL:
    CELERY_BROKER_URL = BROKER_URL_SETTING or REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL or None
    # Redis redelivers an unacknowledged message only after the visibility timeout: it must outlast the hard
    # time limit and the longest retry countdown (grading.tasks caps it at 30 min), or work runs twice.
    # Short socket timeouts keep a request from hanging on a dead or hung broker (the publish is logged and
    # dropped; the reconciliation sweep sends it later). ``fail_fast``: after one unanswered call the publish
    # connections fail at once for a few seconds, like the cache's (studyapp/redis_breaker.py), so kombu's
    # reconnection attempt and a request's later publishes do not wait again: one timeout per request, not one
    # per attempt. The worker process raises the timeouts again and turns fail_fast off for its own consumer
    # connection (studyapp/celery.py).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600,
                                       "socket_connect_timeout": REDIS_REQUEST_TIMEOUT_SECONDS,
                                       "socket_timeout": REDIS_REQUEST_TIMEOUT_SECONDS, "max_retries": 1,
                                       "fail_fast": True}
    if CELERY_BROKER_URL.startswith("amqp"):
        CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 1}
    elif broker_transport.surviving_transport(CELERY_BROKER_URL):
        # redis:// and rediss:// (TLS): kombu's Redis transport with a restore path that survives a broker
        # restart (studyapp.redis_transport), and for rediss:// its TLS options (studyapp.broker_transport).
        CELERY_BROKER_TRANSPORT = broker_transport.surviving_transport(CELERY_BROKER_URL)
        if broker_transport.broker_tls(CELERY_BROKER_URL):
            CELERY_BROKER_USE_SSL = broker_transport.broker_tls(CELERY_BROKER_URL)
    CELERY_BROKER_CONNECTION_TIMEOUT = 2
    CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5,
                                        "interval_max": 0.5}
    # No request reads a task result (senders pass ignore_result); the few callers that do (tests, benches)
    # must not hang either: the Redis result backend connects with a short timeout and retries once.
    CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = REDIS_REQUEST_TIMEOUT_SECONDS
    CELERY_REDIS_SOCKET_TIMEOUT = REDIS_REQUEST_TIMEOUT_SECONDS
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"retry_policy": {"max_retries": 1, "interval_start": 0,
                                                                "interval_step": 0.5, "interval_max": 0.5}}
else:
    for _sub in ("queue", "processed", "results", "control"):
        (CELERY_QUEUE_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_QUEUE_DIR / "queue"),
        "data_folder_out": str(CELERY_QUEUE_DIR / "queue"),
        "processed_folder": str(CELERY_QUEUE_DIR / "processed"),
        "control_folder": str(CELERY_QUEUE_DIR / "control"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = f"file://{CELERY_QUEUE_DIR / 'results'}"
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "grading.tasks.*": {"queue": "grading"},
    # Parsing an uploaded log takes a second and needs no LLM: it never waits behind a judge call.
    grading_task_names.PARSE_LOG: {"queue": "default"},
    # The expert routing sweep ran as grading.tasks.route_expert_reviews and stays on the grading queue.
    experts_task_names.ROUTE_EXPERT_REVIEWS: {"queue": "grading"},
    # The judges' comparison-mode rankings are LLM calls: they run beside the other judge calls.
    experts_task_names.JUDGE_COMPARISON_SET: {"queue": "grading"},
    "rating.tasks.*": {"queue": "rating"},
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# One attempt of any task is bounded by these; grading tasks state their own, shorter budget (GRADING).
CELERY_TASK_TIME_LIMIT = 30 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 25 * 60
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Periodic jobs; beat runs with the worker in `make run`.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "rating-refresh-sweep": {
        "task": rating_task_names.REFRESH_ALL_POSTERIORS,
        "schedule": float(os.environ.get("GRADING_SWEEP_SECONDS", "60")),
    },
    # Reconciliation: finish whatever a lost message, a dead worker or a broker outage left undone
    # (grades whose lease lapsed, unsent grading messages, observations and log codings a grade owes).
    "grading-reconcile-sweep": {
        "task": grading_task_names.RECONCILE,
        "schedule": float(os.environ.get("GRADING_SWEEP_SECONDS", "60")),
        # A sweep queued while no worker ran is dropped once the next is due: a backlog never runs back to back.
        "options": {"expires": float(os.environ.get("GRADING_SWEEP_SECONDS", "60"))},
    },
    "expert-routing-sweep": {
        "task": experts_task_names.ROUTE_EXPERT_REVIEWS,
        "schedule": 10 * 60.0,
    },
    # Expert gates whose evaluation or re-grades a lost message left undone (experts/services/gate.py).
    "expert-gate-sweep": {
        "task": experts_task_names.RECONCILE_EXPERT_GATES,
        "schedule": 10 * 60.0,
    },
    # Judge rankings of comparison sets whose claim lapsed (experts/services/judge_comparisons.py).
    "judge-comparisons-sweep": {
        "task": experts_task_names.RECONCILE_JUDGE_COMPARISONS,
        "schedule": 10 * 60.0,
    },
    # Open tasks whose worker went silent for the study's limit are released for others.
    "abandoned-episodes-sweep": {
        "task": studies_task_names.EXPIRE_ABANDONED_EPISODES,
        "schedule": 15 * 60.0,
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_QUEUES = ("default", "grading", "rating")

# --- App knobs --------------------------------------------------------------------------------------------
# Only what the environment sets; every default lives once in the app's conf.py, whose accessor reads these.
_GRADING_DEFAULTS = grading_conf.DEFAULTS
GRADING: dict[str, Any] = {
    "DEFAULT_JUDGES": [
        {"provider": "openai", "model": os.environ.get("GRADING_OPENAI_MODEL", grading_conf.DEFAULT_MODELS["openai"])},
        {"provider": "anthropic",
         "model": os.environ.get("GRADING_ANTHROPIC_MODEL", grading_conf.DEFAULT_MODELS["anthropic"])},
    ],
    "RUBRIC_GENERATOR": {
        "provider": os.environ.get("GRADING_RUBRIC_PROVIDER", _GRADING_DEFAULTS["RUBRIC_GENERATOR"]["provider"]),
        "model": os.environ.get("GRADING_RUBRIC_MODEL", _GRADING_DEFAULTS["RUBRIC_GENERATOR"]["model"]),
    },
    # "provider:model,provider:model" -- the two ToM judges (different families); unset: the default judges.
    "TOM_CODERS": [dict(zip(("provider", "model"), item.split(":", 1), strict=False))
                   for item in _env_list("GRADING_TOM_CODERS")] or None,
    "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or None,
    "OPENAI_BASE_URL": os.environ.get("OPENAI_BASE_URL") or None,
    "ANTHROPIC_API_KEY": os.environ.get("ANTHROPIC_API_KEY") or None,
    "ANTHROPIC_BASE_URL": os.environ.get("ANTHROPIC_BASE_URL") or None,
    "TIMEOUT_SECONDS": float(os.environ.get("GRADING_TIMEOUT_SECONDS", _GRADING_DEFAULTS["TIMEOUT_SECONDS"])),
    "MAX_RETRIES": int(os.environ.get("GRADING_MAX_RETRIES", _GRADING_DEFAULTS["MAX_RETRIES"])),
    "RETRY_BASE_DELAY": float(os.environ.get("GRADING_RETRY_BASE_DELAY", _GRADING_DEFAULTS["RETRY_BASE_DELAY"])),
    "PROVIDER_RATE_LIMITS": {
        "openai": int(os.environ.get("GRADING_OPENAI_RATE_LIMIT", _GRADING_DEFAULTS["PROVIDER_RATE_LIMITS"]["openai"])),
        "anthropic": int(
            os.environ.get("GRADING_ANTHROPIC_RATE_LIMIT", _GRADING_DEFAULTS["PROVIDER_RATE_LIMITS"]["anthropic"])),
    },
    "PROVIDER_RATE_WINDOW_SECONDS": float(
        os.environ.get("GRADING_RATE_WINDOW_SECONDS", _GRADING_DEFAULTS["PROVIDER_RATE_WINDOW_SECONDS"])),
    "DISAGREEMENT_THRESHOLD": float(
        os.environ.get("GRADING_DISAGREEMENT_THRESHOLD", _GRADING_DEFAULTS["DISAGREEMENT_THRESHOLD"])),
    "EXTRACT_MAX_CHARS": int(os.environ.get("GRADING_EXTRACT_MAX_CHARS", _GRADING_DEFAULTS["EXTRACT_MAX_CHARS"])),
    "LEASE_SECONDS": float(os.environ.get("GRADING_LEASE_SECONDS", _GRADING_DEFAULTS["LEASE_SECONDS"])),
    "ATTEMPT_SECONDS": float(os.environ.get("GRADING_ATTEMPT_SECONDS", _GRADING_DEFAULTS["ATTEMPT_SECONDS"])),
    "TASK_RETRIES": int(os.environ.get("GRADING_TASK_RETRIES", _GRADING_DEFAULTS["TASK_RETRIES"])),
    "TASK_RETRY_DELAY": float(os.environ.get("GRADING_TASK_RETRY_DELAY", _GRADING_DEFAULTS["TASK_RETRY_DELAY"])),
    "REQUEUE_AFTER_SECONDS": float(
        os.environ.get("GRADING_REQUEUE_AFTER_SECONDS", _GRADING_DEFAULTS["REQUEUE_AFTER_SECONDS"])),
    "FOLLOW_UP_GRACE_SECONDS": float(
        os.environ.get("GRADING_FOLLOW_UP_GRACE_SECONDS", _GRADING_DEFAULTS["FOLLOW_UP_GRACE_SECONDS"])),
    "PROVIDER_OUTAGE_ROUNDS": int(
        os.environ.get("GRADING_PROVIDER_OUTAGE_ROUNDS", _GRADING_DEFAULTS["PROVIDER_OUTAGE_ROUNDS"])),
}
RATING: dict[str, Any] = {
    "REFRESH_DEBOUNCE_SECONDS": float(
        os.environ.get("RATING_REFRESH_DEBOUNCE_SECONDS", rating_conf.DEFAULTS["REFRESH_DEBOUNCE_SECONDS"])),
    "BOOTSTRAP_ROUNDS": int(os.environ.get("RATING_BOOTSTRAP_ROUNDS", rating_conf.DEFAULTS["BOOTSTRAP_ROUNDS"])),
    "LIVE_UPDATES": _env_bool("RATING_LIVE_UPDATES", default=rating_conf.DEFAULTS["LIVE_UPDATES"]),
    "LIVE_DEBOUNCE_SECONDS": float(
        os.environ.get("RATING_LIVE_DEBOUNCE_SECONDS", rating_conf.DEFAULTS["LIVE_DEBOUNCE_SECONDS"])),
    "REML_INTERVAL_SECONDS": float(
        os.environ.get("RATING_REML_INTERVAL_SECONDS", rating_conf.DEFAULTS["REML_INTERVAL_SECONDS"])),
    "LIVE_DRIFT_ALPHA": float(os.environ.get("RATING_LIVE_DRIFT_ALPHA", rating_conf.DEFAULTS["LIVE_DRIFT_ALPHA"])),
    "LIVE_MAX_PARTICIPANTS": int(
        os.environ.get("RATING_LIVE_MAX_PARTICIPANTS", rating_conf.DEFAULTS["LIVE_MAX_PARTICIPANTS"])),
    "LIVE_MIN_OBSERVATIONS": int(
        os.environ.get("RATING_LIVE_MIN_OBSERVATIONS", rating_conf.DEFAULTS["LIVE_MIN_OBSERVATIONS"])),
    "KEEP_PARTICIPANT_REFITS": int(
        os.environ.get("RATING_KEEP_PARTICIPANT_REFITS", rating_conf.DEFAULTS["KEEP_PARTICIPANT_REFITS"])),
    "RETENTION_GRACE_SECONDS": float(
        os.environ.get("RATING_RETENTION_GRACE_SECONDS", rating_conf.DEFAULTS["RETENTION_GRACE_SECONDS"])),
    "RETENTION_PER_SWEEP": int(
        os.environ.get("RATING_RETENTION_PER_SWEEP", rating_conf.DEFAULTS["RETENTION_PER_SWEEP"])),
}
EXPERTS: dict[str, Any] = {
    "INVITE_DAYS": int(os.environ.get("EXPERT_INVITE_DAYS", experts_conf.DEFAULTS["INVITE_DAYS"])),
    "ADJUDICATION_SCORE_GAP": float(
        os.environ.get("EXPERT_ADJUDICATION_SCORE_GAP", experts_conf.DEFAULTS["ADJUDICATION_SCORE_GAP"])),
}

# --- Email ----------------------------------------------------------------------------------------------
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "study-team@localhost")

# --- REST API ------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    # Forms and uploads are parsed by parsers that refuse NUL characters (console/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "console.api.parsers.NulRefusingFormParser",
        "console.api.parsers.NulRefusingMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["console.api.filters.RoleFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "console.api.schema.ApiAutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"anon": "60/min", "user": "1200/min"},
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CollabSkill study platform API",
    "DESCRIPTION": "Studies, tasks, episodes, grading, ratings and exports for human-agent collaboration studies.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The statuses a worker sees of their own episode (grading states read "submitted").
    "ENUM_NAME_OVERRIDES": {"EpisodeStatusEnum": "studies.models.Episode.Status",
                            "WorkerEpisodeStatusEnum": "studies.models.Episode.WORKER_STATUSES",
                            "ExpertGradeStatusEnum": "experts.models.ExpertGrade.Status"},
}

# --- Security ---------------------------------------------------------------------------------------------
# Django's database sessions, read with a precompiled statement (studyapp/sessions.py): the same table and format.
SESSION_ENGINE = "studyapp.sessions"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = _env_bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    DEBUG = False

# Content-Security-Policy on every HTML page (django-csp): scripts and styles only from this site, no inline
# code, no plugins, no framing. A page that must inline something gives it the response's nonce
# ({{ request.csp_nonce }}). CSP_REPORT_ONLY=1 sends it as Content-Security-Policy-Report-Only while a
# deployment tries it out.
_CSP = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
if _env_bool("CSP_REPORT_ONLY"):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _CSP
else:
    CONTENT_SECURITY_POLICY = _CSP

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- Operations -------------------------------------------------------------------------------------------
# Error reporting: only when SENTRY_DSN is set (sentry-sdk with its Django and Celery integrations). No
# personal data is sent: no body, header, cookie, local variable, user, IP or host name, and e-mail and network
# addresses are rewritten in what remains (studyapp.error_reporting); SENTRY_TRACES_SAMPLE_RATE turns on tracing.
SENTRY_DSN = os.environ.get("SENTRY_DSN", "").strip()
if SENTRY_DSN:
    import sentry_sdk

    from studyapp import error_reporting

    sentry_sdk.init(dsn=SENTRY_DSN, environment=os.environ.get("SENTRY_ENVIRONMENT", DJANGO_ENV),
                    traces_sample_rate=float(os.environ.get("SENTRY_TRACES_SAMPLE_RATE", "0")),
                    **error_reporting.init_options())
