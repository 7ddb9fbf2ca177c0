"""Meridian settings, read from the environment.

Two modes share this file. The *embedded* default (nothing set) runs on SQLite in WAL
mode under ``var/`` and an embedded Redis on a unix socket, so one command starts the
whole product. *Production* (``MERIDIAN_ENV=production``) expects PostgreSQL and Redis
URLs and refuses to start with any of the embedded mode's insecure defaults.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import environ
import plotly
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("MERIDIAN_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()

MERIDIAN_ENV = env.str("MERIDIAN_ENV", default="embedded")
if MERIDIAN_ENV not in {"embedded", "production"}:
    raise ImproperlyConfigured("MERIDIAN_ENV must be 'embedded' or 'production'")
PRODUCTION = MERIDIAN_ENV == "production"

EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"


def _embedded_secret_key() -> str:
    """A per-installation key kept under var/, so sessions survive restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


if PRODUCTION:
    missing = [name for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS") if not env.str(name, default="")]
    if missing:
        raise ImproperlyConfigured(f"production mode needs {', '.join(missing)} in the environment")
    SECRET_KEY = env.str("SECRET_KEY")
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure"):
        raise ImproperlyConfigured("SECRET_KEY is too weak for production: use 50+ random characters")
    DEBUG = env.bool("DEBUG", default=False)
    if DEBUG:
        raise ImproperlyConfigured("DEBUG must be off in production mode")
else:
    SECRET_KEY = env.str("SECRET_KEY", default="") or _embedded_secret_key()
    DEBUG = env.bool("DEBUG", default=False)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- database -------------------------------------------------------------------------

if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "meridian.sqlite3",
            "OPTIONS": {
                # IMMEDIATE avoids the deadlock where two readers both try to upgrade to writers.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not shared-cache memory: concurrent writers then wait (timeout) as in
            # production instead of failing at once with "database table is locked".
            "TEST": {"NAME": str(VAR_DIR / "test-meridian.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, channels ------------------------------------------------------------

REDIS_URL = env.str("REDIS_URL", default=f"unix://{EMBEDDED_REDIS_SOCKET}")


def celery_url(redis_url: str) -> str:
    """Kombu spells a unix-socket Redis ``redis+socket://``; redis-py spells it ``unix://``."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url[len("unix://"):]
    return redis_url


MERIDIAN_SHARDS = env.int("MERIDIAN_SHARDS", default=4)
if MERIDIAN_SHARDS < 1:
    raise ImproperlyConfigured("MERIDIAN_SHARDS must be at least 1")

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=celery_url(REDIS_URL))
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=celery_url(REDIS_URL))
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = ("config.celery.route_task",)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30, "prefix": "meridian-ws"},
    }
}

# --- applications -----------------------------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "fleet",
    "nodeconfig",
    "quotas",
    "federation",
    "scheduling",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "core.middleware.RequestIDMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.meridian",
            ],
        },
    }
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"

# --- i18n, static -----------------------------------------------------------------------

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js ships inside the pinned plotly wheel: served from here, never from a CDN.
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
SERVESTATIC_USE_FINDERS = True
SERVESTATIC_AUTOREFRESH = DEBUG

# --- REST API ---------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.authentication.APITokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.permissions.RolePermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_VERSIONING_CLASS": None,
    "DEFAULT_THROTTLE_RATES": {"login": "30/min"},
    "EXCEPTION_HANDLER": "core.api.exceptions.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Meridian API",
    "DESCRIPTION": "Control plane for large Kubernetes fleets.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
}

# --- Meridian ---------------------------------------------------------------------------

MERIDIAN_TOKEN_TTL_DAYS = env.int("MERIDIAN_TOKEN_TTL_DAYS", default=90)
MERIDIAN_AUDIT_RETENTION_DAYS = env.int("MERIDIAN_AUDIT_RETENTION_DAYS", default=180)
#: Full quota resync (drift repair and cash accrual); bizrq's default is five minutes.
MERIDIAN_QUOTA_RESYNC_SECONDS = env.int("MERIDIAN_QUOTA_RESYNC_SECONDS", default=300)
#: Days of water-level history the federation dashboard keeps (one point per cluster a minute).
MERIDIAN_WATER_LEVEL_RETENTION_DAYS = env.int("MERIDIAN_WATER_LEVEL_RETENTION_DAYS", default=7)
#: Seconds between full federation rescheduling passes (today's water levels, every object).
MERIDIAN_FEDERATION_RESCHEDULE_SECONDS = env.int("MERIDIAN_FEDERATION_RESCHEDULE_SECONDS", default=1800)
#: Threads (each with its own database connection) deciding quota admission reviews: one batch
#: runs at a time, the others only start next to a batch stuck on a lock (quotas/fastpath.py).
MERIDIAN_WEBHOOK_THREADS = env.int("MERIDIAN_WEBHOOK_THREADS", default=4)
MERIDIAN_JOB_TIMEOUT_SECONDS = env.int("MERIDIAN_JOB_TIMEOUT_SECONDS", default=3600)
MERIDIAN_WORKER_HEARTBEAT_SECONDS = 10

# --- security ---------------------------------------------------------------------------

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # live.js reads it to send CSRF headers on fetch()
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

CELERY_BEAT_SCHEDULE = {
    "system-status": {"task": "core.tasks.publish_system_status", "schedule": 5.0, "options": {"expires": 5}},
    "reap-jobs": {"task": "core.tasks.reap_jobs", "schedule": 300.0},
    "expire-audit-log": {"task": "core.tasks.expire_audit_log", "schedule": 86400.0},
    "fleet-resync": {"task": "fleet.resync_fleet", "schedule": float(env.int("MERIDIAN_FLEET_SYNC_SECONDS", default=15)),
                     "options": {"expires": 10}},
    "fleet-full-resync": {"task": "fleet.full_resync", "schedule": 300.0},
    "nodeconfig-rollouts": {"task": "nodeconfig.rollouts", "schedule": 2.0, "options": {"expires": 2}},
    "nodeconfig-simulated-agents": {"task": "nodeconfig.simulate_agents", "schedule": 3.0, "options": {"expires": 3}},
    "nodeconfig-expire-targets": {"task": "nodeconfig.expire_targets", "schedule": 30.0},
    "nodeconfig-full-reconcile": {"task": "nodeconfig.full_reconcile", "schedule": 600.0},
    "quotas-resync": {"task": "quotas.resync", "schedule": float(MERIDIAN_QUOTA_RESYNC_SECONDS),
                      "options": {"expires": MERIDIAN_QUOTA_RESYNC_SECONDS}},
    "federation-resync": {"task": "federation.resync", "schedule": 3.0, "options": {"expires": 3}},
    "federation-water-levels": {"task": "federation.sample_water_levels", "schedule": 60.0, "options": {"expires": 60}},
    "federation-reschedule": {"task": "federation.reschedule_all", "schedule": float(MERIDIAN_FEDERATION_RESCHEDULE_SECONDS),
                              "options": {"expires": MERIDIAN_FEDERATION_RESCHEDULE_SECONDS}},
}
