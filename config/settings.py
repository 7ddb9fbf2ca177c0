"""Meridian settings, read from the environment.

Two modes share this file. The *embedded* default (nothing set) runs on SQLite in WAL
mode under ``var/`` and an embedded Redis on a unix socket, so one command starts the
whole product. *Production* (``MERIDIAN_ENV=production``) expects PostgreSQL and Redis
URLs and refuses to start with any of the embedded mode's insecure defaults.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from datetime import timedelta
from pathlib import Path

import environ
import plotly
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from core.redis import celery_urls, channel_layer_host

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("MERIDIAN_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()

MERIDIAN_ENV = env.str("MERIDIAN_ENV", default="embedded")
if MERIDIAN_ENV not in {"embedded", "production"}:
    raise ImproperlyConfigured("MERIDIAN_ENV must be 'embedded' or 'production'")
PRODUCTION = MERIDIAN_ENV == "production"

EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"


def _embedded_secret_key(var_dir: Path) -> str:
    """A per-installation key kept under var/, so sessions survive restarts.

    Made whole, once, whatever starts at the same moment (two web processes, a worker, beat):
    written to a file of its own, then linked in place, which fails if another process got
    there first. Written in place, a process that read the file between another's create and
    write got an empty key (a 500, "The SECRET_KEY setting must not be empty", on its first
    request), and two that both found none each wrote one (keys that disagree)."""
    path = var_dir / "secret_key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        fd, draft = tempfile.mkstemp(dir=var_dir, prefix=".secret_key.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_urlsafe(50))
            with contextlib.suppress(FileExistsError):  # another process's key is the key
                os.link(draft, path)
        finally:
            os.unlink(draft)
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
    SECRET_KEY = env.str("SECRET_KEY", default="") or _embedded_secret_key(VAR_DIR)
    DEBUG = env.bool("DEBUG", default=False)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- database -------------------------------------------------------------------------

#: PostgreSQL connections per process come from a bounded pool (Django's psycopg pool): a
#: burst of requests waits for a free connection instead of opening one per request thread
#: and exhausting the server's ``max_connections``. Every process (each uvicorn worker, each
#: Celery pool process) has its own pool: size the sum of ``MERIDIAN_DB_POOL_MAX`` over the
#: processes below the server's limit. A request that cannot get a connection within
#: ``MERIDIAN_DB_POOL_TIMEOUT`` seconds answers 503. ``DATABASE_POOL=0`` turns the pool off
#: (then ``DATABASE_CONN_MAX_AGE`` applies, default 0: one connection per request).
MERIDIAN_DB_POOL_MIN = env.int("MERIDIAN_DB_POOL_MIN", default=2)
MERIDIAN_DB_POOL_MAX = env.int("MERIDIAN_DB_POOL_MAX", default=12)
MERIDIAN_DB_POOL_TIMEOUT = env.float("MERIDIAN_DB_POOL_TIMEOUT", default=10.0)

#: How Meridian runs SQLite, the embedded file or one a ``sqlite:///`` URL names.
SQLITE_OPTIONS = {
    # IMMEDIATE avoids the deadlock where two readers both try to upgrade to writers.
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    if DATABASES["default"]["ENGINE"].endswith("postgresql") and env.bool("DATABASE_POOL", default=True):
        DATABASES["default"]["ENGINE"] = "core.postgresql"  # the pool behind a circuit breaker (fails fast while down)
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps connections; Django returns them after each request
        # Health checks: a pooled connection is checked when handed out, so the first requests
        # after a database restart get a fresh connection instead of a dead one.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": MERIDIAN_DB_POOL_MIN, "max_size": MERIDIAN_DB_POOL_MAX, "timeout": MERIDIAN_DB_POOL_TIMEOUT,
            "max_idle": 300}
    else:
        DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=0))
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "meridian.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
            # A file, not shared-cache memory: concurrent writers then wait (timeout) as in
            # production instead of failing at once with "database table is locked".
            "TEST": {"NAME": str(VAR_DIR / "test-meridian.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, channels ------------------------------------------------------------

#: A ``redis://``, ``unix://`` or ``sentinel://`` URL (``core.redis``: broker, result backend,
#: channel layer and Meridian's own keys all follow a Sentinel failover).
REDIS_URL = env.str("REDIS_URL", default=f"unix://{EMBEDDED_REDIS_SOCKET}")
try:
    _CELERY_REDIS_URL, _CELERY_TRANSPORT = celery_urls(REDIS_URL)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from exc


MERIDIAN_SHARDS = env.int("MERIDIAN_SHARDS", default=4)
if MERIDIAN_SHARDS < 1:
    raise ImproperlyConfigured("MERIDIAN_SHARDS must be at least 1")

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=_CELERY_REDIS_URL)
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=_CELERY_REDIS_URL)
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = dict(_CELERY_TRANSPORT)
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True  # the Job row is the result (core.jobs)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = ("config.celery.route_task",)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker outlives any Redis outage and reconnects
#: A message unacknowledged this long (its worker died) is delivered again. The reaper
#: (``core.jobs.reap``) resends a dead worker's job within a minute anyway; this is the
#: broker's own backstop, sized above the longest task (a full resync at fleet scale).
MERIDIAN_TASK_VISIBILITY_SECONDS = env.int("MERIDIAN_TASK_VISIBILITY_SECONDS", default=600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": MERIDIAN_TASK_VISIBILITY_SECONDS,
    "socket_timeout": 10, "socket_connect_timeout": 5, "retry_on_timeout": True,
    "health_check_interval": 10, **_CELERY_TRANSPORT,
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TIMEZONE = "UTC"
#: In memory (no schedule file), and a send that fails during an outage is tried again (core.beat).
CELERY_BEAT_SCHEDULER = "core.beat:Scheduler"

#: The websocket fan-out: channels_redis' pub/sub layer. An event is published once per topic
#: and each web process hands it to its own subscribed sockets (the list-based layer pushed a copy
#: per socket through Redis and popped them one round trip at a time: at 1,000 sockets an event
#: reached the last browser ~1 s late; bench/bench_live.py). Health checks notice a Redis that went
#: away; the receiver reconnects and subscribes again by itself.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [channel_layer_host(REDIS_URL, socket_timeout=30, socket_connect_timeout=5,
                                         health_check_interval=15, retry_on_timeout=True)],
            "prefix": "meridian-ws",
        },
    }
}

# --- applications -----------------------------------------------------------------------

INSTALLED_APPS = [
    "core.apps.ReadOnlyAdminConfig",  # django.contrib.admin, read-only; not mounted in production
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",
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
    "core.metrics.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "core.middleware.StaticFilesMiddleware",
    "core.middleware.RequestIDMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.middleware.OIDCSessionMiddleware",
    "core.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
]

#: Login protection shared by every process (django-axes, its store in the database): a
#: username tried from one address is locked for ``AXES_COOLOFF_TIME`` after
#: ``MERIDIAN_LOGIN_FAILURES`` failures — browser login, admin and the API token endpoint
#: alike. Locking the pair (not the address alone) keeps other users behind one NAT working.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "core.backends.MeridianBackend"]
AXES_FAILURE_LIMIT = env.int("MERIDIAN_LOGIN_FAILURES", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("MERIDIAN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "core.views.login_locked_out"
AXES_IPWARE_PROXY_COUNT = env.int("MERIDIAN_PROXY_COUNT", default=0)
AXES_VERBOSE = False

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
#: Where ``collectstatic`` writes (production serves from here; the embedded mode serves from
#: the app directories directly). Nothing is created at import time.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "static")))
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
        "core.authentication.ProviderTokenAuthentication",
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
    "REDOC_DIST": "/api/redoc",  # the sidecar's bundle, served without its CDN logo (core.views.redoc_bundle)
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.schema.add_error_responses",
                             "core.schema.add_dry_run_parameter"],
    # Two models have an "action" field with different choices: name each enum after its model.
    "ENUM_NAME_OVERRIDES": {"ObjectChangeActionEnum": "core.models.ObjectChange.Action",
                            "RevisionActionEnum": "core.models.Revision.Action"},
}

# --- Meridian ---------------------------------------------------------------------------

MERIDIAN_TOKEN_TTL_DAYS = env.int("MERIDIAN_TOKEN_TTL_DAYS", default=90)
MERIDIAN_AUDIT_RETENTION_DAYS = env.int("MERIDIAN_AUDIT_RETENTION_DAYS", default=180)
#: Full quota resync (drift repair and cash accrual); bizrq's default is five minutes.
MERIDIAN_QUOTA_RESYNC_SECONDS = env.int("MERIDIAN_QUOTA_RESYNC_SECONDS", default=300)
#: Days of raw water-level samples (one point per cluster a minute); hourly and daily averages
#: are kept for 35 and 400 days (federation/water.py).
MERIDIAN_WATER_LEVEL_RETENTION_DAYS = env.int("MERIDIAN_WATER_LEVEL_RETENTION_DAYS", default=1)
#: Seconds between full federation rescheduling passes (today's water levels, every object).
MERIDIAN_FEDERATION_RESCHEDULE_SECONDS = env.int("MERIDIAN_FEDERATION_RESCHEDULE_SECONDS", default=1800)
#: Threads (each with its own database connection) deciding quota admission reviews: one batch
#: runs at a time, the others only start next to a batch stuck on a lock (quotas/fastpath.py).
MERIDIAN_WEBHOOK_THREADS = env.int("MERIDIAN_WEBHOOK_THREADS", default=4)
#: Seconds between full CPU co-location reconciles (annotations ↔ allocations, every cluster
#: with CPU topologies); a sync that changed nodes or workloads reconciles its cluster too, at
#: least MERIDIAN_CPU_RECONCILE_SPACING_SECONDS after the cluster's last reconcile started.
MERIDIAN_CPU_RECONCILE_SECONDS = env.int("MERIDIAN_CPU_RECONCILE_SECONDS", default=60)
MERIDIAN_CPU_RECONCILE_SPACING_SECONDS = env.int("MERIDIAN_CPU_RECONCILE_SPACING_SECONDS", default=30)
#: Hours a finished run of the system's own periodic work keeps its Job row (user-requested
#: jobs and failures are kept as long as the audit log).
MERIDIAN_SYSTEM_JOB_RETENTION_HOURS = env.int("MERIDIAN_SYSTEM_JOB_RETENTION_HOURS", default=1)
#: Hours a pod that finished (gone from its cluster) keeps its row; quota cash budgets keep
#: what they have not accrued yet longer (``fleet.signals.finished_pods_needed``).
MERIDIAN_FINISHED_POD_RETENTION_HOURS = env.int("MERIDIAN_FINISHED_POD_RETENTION_HOURS", default=24)
#: A worker refreshes its heartbeat this often; it lapses after ``core.worker_signals.HEARTBEAT_TTL``
#: (12 s), after which the reaper settles the jobs it held (a worker killed mid-task).
MERIDIAN_WORKER_HEARTBEAT_SECONDS = 3
#: Real clusters are watched between syncs (``fleet.informer.Watcher``): one worker process
#: holds each cluster's watches open and writes a change a moment after the API server sends
#: it, renewing each watch every ``MERIDIAN_CLUSTER_WATCH_SECONDS``. Off: each periodic sync
#: watches for a second.
MERIDIAN_CLUSTER_WATCH = env.bool("MERIDIAN_CLUSTER_WATCH", default=True)
MERIDIAN_CLUSTER_WATCH_SECONDS = env.int("MERIDIAN_CLUSTER_WATCH_SECONDS", default=60)
#: Meridian schedules the pods of watched clusters whose ``spec.schedulerName`` is this
#: (``scheduling.podscheduler``, beside each cluster's watcher); off: no pod is scheduled here.
MERIDIAN_POD_SCHEDULER = env.bool("MERIDIAN_POD_SCHEDULER", default=True)
MERIDIAN_SCHEDULER_NAME = env.str("MERIDIAN_SCHEDULER_NAME", default="meridian")
#: Binds (and their Events and CPU allocations) in flight at once per scheduled cluster.
MERIDIAN_SCHEDULER_BIND_THREADS = env.int("MERIDIAN_SCHEDULER_BIND_THREADS", default=8)

# --- single sign-on (OpenID Connect) --------------------------------------------------------

#: Off unless ``MERIDIAN_OIDC_ISSUER`` and ``MERIDIAN_OIDC_CLIENT_ID`` are set (``core.oidc``,
#: ``core.sso``): browsers sign in through the provider (authorization code + PKCE), the API
#: takes its access tokens (``Authorization: Bearer``) for ``MERIDIAN_OIDC_AUDIENCE``.
MERIDIAN_OIDC_ISSUER = env.str("MERIDIAN_OIDC_ISSUER", default="")
MERIDIAN_OIDC_CLIENT_ID = env.str("MERIDIAN_OIDC_CLIENT_ID", default="")
MERIDIAN_OIDC_CLIENT_SECRET = env.str("MERIDIAN_OIDC_CLIENT_SECRET", default="")
MERIDIAN_OIDC_SCOPES = env.str("MERIDIAN_OIDC_SCOPES", default="openid email profile")
MERIDIAN_OIDC_USERNAME_CLAIM = env.str("MERIDIAN_OIDC_USERNAME_CLAIM", default="preferred_username")
MERIDIAN_OIDC_GROUPS_CLAIM = env.str("MERIDIAN_OIDC_GROUPS_CLAIM", default="groups")
#: Provider group → a role (``"operator"``) or scoped bindings
#: (``{"role": "operator", "clusters": [...], "cluster_selector": "team=a", "quota_groups": [...],
#: "namespaces": [...]}``), or a list of those; applied at every sign-in. Empty: roles are
#: managed in Meridian only.
try:
    MERIDIAN_OIDC_GROUP_ROLES = env.json("MERIDIAN_OIDC_GROUP_ROLES", default={})
except ValueError as exc:
    raise ImproperlyConfigured(f"MERIDIAN_OIDC_GROUP_ROLES is not JSON: {exc}") from exc
#: The ``aud`` values of access tokens Meridian accepts (the provider's name for Meridian's API).
#: Empty: no provider access token is accepted on the API.
MERIDIAN_OIDC_AUDIENCE = env.list("MERIDIAN_OIDC_AUDIENCE", default=[])
#: Seconds between re-checks of a signed-in session with the provider (refresh token).
MERIDIAN_OIDC_RECHECK_SECONDS = env.int("MERIDIAN_OIDC_RECHECK_SECONDS", default=300)
#: A session signed in through the provider lasts at most this long.
MERIDIAN_OIDC_SESSION_SECONDS = env.int("MERIDIAN_OIDC_SESSION_SECONDS", default=8 * 3600)
#: Seconds the provider's signing keys are cached (a token naming an unknown key refetches them).
MERIDIAN_OIDC_JWKS_SECONDS = env.int("MERIDIAN_OIDC_JWKS_SECONDS", default=3600)
MERIDIAN_OIDC_BUTTON = env.str("MERIDIAN_OIDC_BUTTON", default="Sign in with single sign-on")
#: Local passwords (the login form, the admin, ``POST /api/v1/auth/token/``); off: single sign-on only.
MERIDIAN_LOCAL_LOGIN = env.bool("MERIDIAN_LOCAL_LOGIN", default=True)
if not MERIDIAN_LOCAL_LOGIN and not (MERIDIAN_OIDC_ISSUER and MERIDIAN_OIDC_CLIENT_ID):
    raise ImproperlyConfigured("MERIDIAN_LOCAL_LOGIN=false needs single sign-on (MERIDIAN_OIDC_ISSUER, MERIDIAN_OIDC_CLIENT_ID)")
if PRODUCTION and MERIDIAN_OIDC_ISSUER and not MERIDIAN_OIDC_ISSUER.startswith("https://"):
    raise ImproperlyConfigured("MERIDIAN_OIDC_ISSUER must be an https:// URL in production")

# --- security ---------------------------------------------------------------------------

#: Content-Security-Policy on every page: scripts only from Meridian itself (no inline code,
#: no CDN), websockets to this host; styles allow inline attributes (progress bars, Plotly).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'", "ws:", "wss:"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
#: Kubeconfigs and other secrets are encrypted at rest (``core.fields.EncryptedTextField``)
#: with keys derived from these (the first encrypts, all decrypt: rotate by prepending a new
#: key). Default: derived from SECRET_KEY.
MERIDIAN_ENCRYPTION_KEYS = env.list("MERIDIAN_ENCRYPTION_KEYS", default=[])
#: Meridian's URL as member clusters' API servers reach it (webhook configurations point here).
MERIDIAN_PUBLIC_URL = env.str("MERIDIAN_PUBLIC_URL", default="")
#: The namespace Meridian runs in on member clusters (its webhooks never gate it).
MERIDIAN_NAMESPACE = env.str("MERIDIAN_NAMESPACE", default="meridian")

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # live.js reads it to send CSRF headers on fetch()
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    #: Load balancers probe over plain HTTP: the health endpoints are never redirected.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

#: ``json``: one object per line with the request id and task (``core.logs``), what a log
#: pipeline reads; ``plain``: a readable line for a terminal. JSON by default in production.
LOG_FORMAT = env.str("LOG_FORMAT", default="json" if PRODUCTION else "plain")
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured("LOG_FORMAT must be 'json' or 'plain'")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}, "json": {"()": "core.logs.JsonFormatter"}},
    "filters": {"outage": {"()": "core.logs.OutageInOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"},
                "channels_redis.pubsub": {"filters": ["outage"]}},
}

CELERY_BEAT_SCHEDULE = {
    "system-status": {"task": "core.publish_system_status", "schedule": 5.0, "options": {"expires": 5}},
    "publish-live": {"task": "core.publish_live", "schedule": 1.0, "options": {"expires": 2}},
    "expire-jobs": {"task": "core.expire_jobs", "schedule": 3600.0},
    "expire-audit-log": {"task": "core.expire_audit_log", "schedule": 86400.0},
    "expire-pods": {"task": "fleet.expire_pods", "schedule": 3600.0},
    "fleet-resync": {"task": "fleet.resync_fleet", "schedule": float(env.int("MERIDIAN_FLEET_SYNC_SECONDS", default=15)),
                     "options": {"expires": 10}},
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
    "scheduling-cpu-reconcile": {"task": "scheduling.cpu_reconcile_all", "schedule": float(MERIDIAN_CPU_RECONCILE_SECONDS),
                                 "options": {"expires": MERIDIAN_CPU_RECONCILE_SECONDS}},
}
