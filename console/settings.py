"""Django settings for Strata.

Every setting that depends on the environment is read here, and only here.

Environment (documented in the README):
  DATABASE_URL        default: SQLite file at $STRATA_DATA_DIR/strata.sqlite3
  REDIS_URL           default: the embedded Redis that `make run` starts
                      (unix socket $STRATA_DATA_DIR/redis.sock)
  SPARK_MASTER        default: local[2]
  STRATA_DATA_DIR     default: ./var  (deep storage and intermediary data below it)
  STRATA_INPUT_ROOTS  default: $STRATA_DATA_DIR/input; os.pathsep-separated list of
                      directories a `local` input source may read
  STRATA_INTERMEDIARY_EXPIRY  seconds, default 600
  STRATA_COMPACTION_PERIOD_SECONDS  default: 60; how often the beat process runs the
                      auto-compaction duty
  STRATA_TASK_SLOTS   default: 2; tasks that run at the same time (threads of the run
                      command's worker sharing one SparkSession, a scheduler pool each)
  DJANGO_SECRET_KEY   default: a random key generated once into $STRATA_DATA_DIR/secret_key
  DJANGO_DEBUG        default: 0 (tracebacks go to the log, never to the client)
  DJANGO_ALLOWED_HOSTS default: *
  STRATA_PG_PREPARE_THRESHOLD  default: 2; PostgreSQL only: uses after which the lock
                      box's statements are prepared on the server (empty: never)
  STRATA_ADVERTISED_ADDRESS  default: <hostname>:8000; the web process in Druid SQL's
                      sys.servers
  STRATA_QUERY_TIMEOUT_MS      default: 30000; a SQL query's time limit when the request
                      sets no context.timeout (over it: Druid's "Query timeout", 504)
  STRATA_QUERY_MAX_TIMEOUT_MS  default: 300000; the longest context.timeout accepted
                      (context.timeout 0 means this)
  STRATA_QUERY_MAX_ROWS        default: 100000; rows a result may hold ("Resource limit
                      exceeded", 400)
  STRATA_QUERY_MAX_BYTES       default: 268435456; bytes (as Arrow) a result may hold
  STRATA_QUERY_CONCURRENCY     default: 4; SQL queries running at once in one web process
  STRATA_QUERY_QUEUE_MS        default: 2000; how long a query waits for a free slot before
                      "Query capacity exceeded" (429)
"""

import os
import re
import socket
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
# (STRATA_DATA_DIR is derived again below, with the other Strata settings.)
_DATA_DIR_FOR_KEY = Path(os.environ.get("STRATA_DATA_DIR", BASE_DIR / "var")).resolve()


def _generated_secret_key(path: Path) -> str:
    """A random key kept in the data directory (0600), shared by web, worker and beat."""
    import secrets

    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(50))
    try:
        os.link(tmp, path)  # atomic: the first process's key wins, complete
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()


if not SECRET_KEY:
    SECRET_KEY = _generated_secret_key(_DATA_DIR_FOR_KEY / "secret_key")
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",") if h]
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

# --- Strata -----------------------------------------------------------------
STRATA_DATA_DIR = Path(os.environ.get("STRATA_DATA_DIR", BASE_DIR / "var")).resolve()
STRATA_DEEP_STORAGE = STRATA_DATA_DIR / "deep"
STRATA_INTERMEDIARY_DIR = STRATA_DATA_DIR / "intermediary"
STRATA_INPUT_ROOTS = [
    Path(p).resolve()
    for p in os.environ.get("STRATA_INPUT_ROOTS", str(STRATA_DATA_DIR / "input")).split(os.pathsep)
    if p
]
STRATA_INTERMEDIARY_EXPIRY = int(os.environ.get("STRATA_INTERMEDIARY_EXPIRY", "600"))
SPARK_MASTER = os.environ.get("SPARK_MASTER", "local[2]")
SPARK_SHUFFLE_PARTITIONS = int(os.environ.get("SPARK_SHUFFLE_PARTITIONS", "4"))
SPARK_DRIVER_MEMORY = os.environ.get("SPARK_DRIVER_MEMORY", "2g")
# Task slots (Druid's worker capacity): tasks that run at once. `make run` starts
# a worker with this many threads sharing one Spark driver; each worker registers
# its own capacity with its heartbeat, which the console and GET /api/v1/slots
# show (not this setting). See the README for the measurements.
STRATA_TASK_SLOTS = int(os.environ.get("STRATA_TASK_SLOTS", "2"))
if STRATA_TASK_SLOTS < 1:
    raise RuntimeError(f"STRATA_TASK_SLOTS must be 1 or more, not {STRATA_TASK_SLOTS}")
# How often a running task heartbeats and checks for revocation / cancel (seconds).
STRATA_HEARTBEAT_SECONDS = float(os.environ.get("STRATA_HEARTBEAT_SECONDS", "1"))
# Task isolation (issue 23, workers/slots.py): "process" runs each task in a slot
# process of its own with its own driver JVM (killed when the task must stop,
# replaced when it dies); "shared" runs the slots as threads of one SparkSession.
STRATA_TASK_ISOLATION = os.environ.get("STRATA_TASK_ISOLATION", "process")
if STRATA_TASK_ISOLATION not in ("process", "shared"):
    raise RuntimeError(
        f"STRATA_TASK_ISOLATION must be process or shared, not {STRATA_TASK_ISOLATION}"
    )
# The heap of each slot process's driver JVM: the memory one task may use.
STRATA_TASK_DRIVER_MEMORY = os.environ.get("STRATA_TASK_DRIVER_MEMORY", SPARK_DRIVER_MEMORY)
# The Spark master of each slot process's driver: on a local master the cores are
# shared out between the slots (local[2] and two slots: local[1] each), since two
# drivers each scheduling on every core only compete (see the README's Task slots).
_local_cores = re.fullmatch(r"local\[(\d+)\]", SPARK_MASTER)
STRATA_SLOT_SPARK_MASTER = os.environ.get(
    "STRATA_SLOT_SPARK_MASTER",
    f"local[{max(1, int(_local_cores[1]) // STRATA_TASK_SLOTS)}]" if _local_cores else SPARK_MASTER,
)
# Each task's log (metastore/task_logs.py) is cut past this many bytes, its
# beginning and end kept; logs are removed this ISO-8601 period after their last line.
STRATA_TASK_LOG_MAX_BYTES = int(os.environ.get("STRATA_TASK_LOG_MAX_BYTES", str(10 * 1024 * 1024)))
STRATA_TASK_LOG_RETENTION = os.environ.get("STRATA_TASK_LOG_RETENTION", "P30D")
# How long a task asked to stop may take to stop by itself before its process is killed.
STRATA_TASK_STOP_GRACE_SECONDS = float(os.environ.get("STRATA_TASK_STOP_GRACE_SECONDS", "2"))

REDIS_URL = os.environ.get("REDIS_URL") or f"unix://{STRATA_DATA_DIR / 'redis.sock'}"

# --- SQL (owner: issue 26) ------------------------------------------------------
# The web process as Druid's sys.servers names it (host:port).
STRATA_ADVERTISED_ADDRESS = os.environ.get(
    "STRATA_ADVERTISED_ADDRESS", f"{socket.gethostname()}:8000"
)
# Every SQL query's bounds (metastore/query.py): its time limit when the request
# gives none (Druid's context.timeout) and the longest a request may ask for; the
# largest result, in rows and in bytes; how many queries run at once per process,
# and how long a query waits for one of those slots before it is refused (429).
STRATA_QUERY_TIMEOUT_MS = int(os.environ.get("STRATA_QUERY_TIMEOUT_MS", "30000"))
STRATA_QUERY_MAX_TIMEOUT_MS = int(os.environ.get("STRATA_QUERY_MAX_TIMEOUT_MS", "300000"))
STRATA_QUERY_MAX_ROWS = int(os.environ.get("STRATA_QUERY_MAX_ROWS", "100000"))
STRATA_QUERY_MAX_BYTES = int(os.environ.get("STRATA_QUERY_MAX_BYTES", str(256 * 1024 * 1024)))
STRATA_QUERY_CONCURRENCY = int(os.environ.get("STRATA_QUERY_CONCURRENCY", "4"))
STRATA_QUERY_QUEUE_MS = int(os.environ.get("STRATA_QUERY_QUEUE_MS", "2000"))

# --- Django -----------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "metastore",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

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
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{STRATA_DATA_DIR / 'strata.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    STRATA_DATA_DIR.mkdir(parents=True, exist_ok=True)
    # Several processes (web, worker, beat) share the file: wait for locks and
    # take the write lock at BEGIN so select_for_update-style sections serialize.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(STRATA_DATA_DIR / "test.sqlite3")}
else:
    # The lock box's statements (metastore/lockbox_sql.py) are prepared on the
    # server after this many uses per connection; the ORM's queries never are
    # (they bind parameters on the client). Set it empty to turn preparing off,
    # e.g. behind a transaction-pooling PgBouncer older than 1.21.
    _prepare = os.environ.get("STRATA_PG_PREPARE_THRESHOLD", "2").strip()
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
        int(_prepare) if _prepare else None
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = STRATA_DATA_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "console.security.StrataTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Lists paginate by cursor, chosen per view (console/pagination.py).
    "DEFAULT_PAGINATION_CLASS": None,
    "EXCEPTION_HANDLER": "console.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Strata API",
    "DESCRIPTION": "Segments, locks, tasks and the timeline of time-partitioned data.",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    # Paths without the trailing slash (SPEC §7), the task spec (metastore/spec_schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.openapi.postprocess",
    ],
    "ENUM_NAME_OVERRIDES": {
        "TaskTypeEnum": "metastore.models.TaskType",
        "LockTypeEnum": "metastore.models.LockType",
        "TaskStatusEnum": "metastore.models.TaskStatus",
        "DruidStatusCodeEnum": ["RUNNING", "SUCCESS", "FAILED"],
    },
}

# --- Security (owner: issue 15) ----------------------------------------------------
# Request limits: bodies (413), JSON nesting; see console/security.py.
STRATA_MAX_BODY_BYTES = int(os.environ.get("STRATA_MAX_BODY_BYTES", str(10 * 1024 * 1024)))
STRATA_MAX_JSON_DEPTH = int(os.environ.get("STRATA_MAX_JSON_DEPTH", "64"))
DATA_UPLOAD_MAX_MEMORY_SIZE = STRATA_MAX_BODY_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
# A task whose heartbeat is older than this is failed by the task reaper, which
# runs every STRATA_REAPER_SECONDS (independent of STRATA_INTERMEDIARY_EXPIRY).
# The auto-compaction duty runs every STRATA_COMPACTION_PERIOD_SECONDS in the beat
# process (Druid's compaction duty period); a failed interval is retried after one
# period, doubling per consecutive failure, at most an hour.
STRATA_COMPACTION_PERIOD_SECONDS = float(os.environ.get("STRATA_COMPACTION_PERIOD_SECONDS", "60"))
STRATA_HEARTBEAT_TIMEOUT = float(os.environ.get("STRATA_HEARTBEAT_TIMEOUT", "20"))
STRATA_REAPER_SECONDS = float(os.environ.get("STRATA_REAPER_SECONDS", "5"))
# The reaper also queues again a task still PENDING this long after it was
# submitted whose message the broker does not hold (Redis was down at submit
# time, or restarted and lost its queue).
STRATA_REQUEUE_AFTER_SECONDS = float(os.environ.get("STRATA_REQUEUE_AFTER_SECONDS", "30"))
# Login throttling: failed attempts per (address, user name) within the window.
STRATA_LOGIN_MAX_FAILURES = int(os.environ.get("STRATA_LOGIN_MAX_FAILURES", "5"))
STRATA_LOGIN_LOCKOUT_SECONDS = int(os.environ.get("STRATA_LOGIN_LOCKOUT_SECONDS", "300"))
# Their counters are kept in Redis (REDIS_URL) under this key prefix, shared by
# every web process; in the process's own cache only while Redis does not answer.
STRATA_LOGIN_THROTTLE_PREFIX = os.environ.get("STRATA_LOGIN_THROTTLE_PREFIX", "strata-login")
# HTTP Basic (Druid's clients): credentials once verified are trusted this long in
# each web process without hashing the password again (0: hash every request). A
# changed password, a deactivated user or a lockout ends it at once.
STRATA_BASIC_AUTH_CACHE_SECONDS = float(os.environ.get("STRATA_BASIC_AUTH_CACHE_SECONDS", "60"))
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Headers on every response; cookies secure when the request came over HTTPS
# (directly, or through a proxy that sets X-Forwarded-Proto: https).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
if _env_bool("STRATA_BEHIND_HTTPS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# STRATA_HTTPS=1: the site is only served over HTTPS (cookies secure, HSTS, redirect).
if _env_bool("STRATA_HTTPS", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = int(os.environ.get("STRATA_HSTS_SECONDS", "31536000"))
MIDDLEWARE.insert(1, "console.security.RejectHostileRequestMiddleware")
# Outermost, so it sees the cookies the session and CSRF middleware set.
MIDDLEWARE.insert(0, "console.security.SecureCookiesOverHttpsMiddleware")
TEMPLATES[0]["OPTIONS"]["context_processors"].append("console.security.roles_context")
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = ["console.security.StrictJSONParser"]
REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"] = ["console.security.StrataRolePermission"]
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [
    "rest_framework.authentication.SessionAuthentication",
    "console.security.StrataTokenAuthentication",
]
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["rest_framework.throttling.AnonRateThrottle"]
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"anon": os.environ.get("STRATA_ANON_RATE", "60/minute")}

# --- Retention, history and kill duties (owner: issue 22) ---------------------------
# Retention rules (Druid's load/drop rules) run every STRATA_RETENTION_SECONDS.
STRATA_RETENTION_SECONDS = float(os.environ.get("STRATA_RETENTION_SECONDS", "60"))
# Time travel reaches back this far (an ISO-8601 period): overshadowed segments
# stay used while a commit this recent shows them, as_of older commits is refused.
STRATA_HISTORY_RETENTION = os.environ.get("STRATA_HISTORY_RETENTION", "P7D")
STRATA_HISTORY_SECONDS = float(os.environ.get("STRATA_HISTORY_SECONDS", "300"))
# Druid's druid.coordinator.kill.*: off by default; segments unused past the
# buffer period whose interval ended durationToRetain ago are deleted.
STRATA_KILL_ON = _env_bool("STRATA_KILL_ON", False)
STRATA_KILL_PERIOD_SECONDS = float(os.environ.get("STRATA_KILL_PERIOD_SECONDS", "86400"))
STRATA_KILL_DURATION_TO_RETAIN = os.environ.get("STRATA_KILL_DURATION_TO_RETAIN", "P90D")
STRATA_KILL_IGNORE_DURATION_TO_RETAIN = _env_bool("STRATA_KILL_IGNORE_DURATION_TO_RETAIN", False)
STRATA_KILL_BUFFER_PERIOD = os.environ.get("STRATA_KILL_BUFFER_PERIOD", "P30D")
STRATA_KILL_MAX_SEGMENTS = int(os.environ.get("STRATA_KILL_MAX_SEGMENTS", "100"))
# kill.maxInterval: the widest interval one kill task covers (P0D: no limit).
STRATA_KILL_MAX_INTERVAL = os.environ.get("STRATA_KILL_MAX_INTERVAL", "P30D")
# Druid's dynamic killDataSourceWhitelist: names, comma-separated or a JSON array;
# empty: every dataSource.
STRATA_KILL_DATASOURCES = os.environ.get("STRATA_KILL_DATASOURCES", "")
# killTaskSlotRatio / maxKillTaskSlots: the duty's kill tasks' share of the slots.
STRATA_KILL_TASK_SLOT_RATIO = float(os.environ.get("STRATA_KILL_TASK_SLOT_RATIO", "0.1"))
STRATA_KILL_MAX_TASK_SLOTS = int(os.environ.get("STRATA_KILL_MAX_TASK_SLOTS", "2147483647"))


def _check_periods() -> None:
    """Refuse to start with a period that does not parse (every time travel would fail)."""
    from metastore.duties.periods import Period, PeriodError  # pure: no Django

    for name in (
        "STRATA_HISTORY_RETENTION",
        "STRATA_KILL_DURATION_TO_RETAIN",
        "STRATA_KILL_BUFFER_PERIOD",
        "STRATA_TASK_LOG_RETENTION",
        "STRATA_KILL_MAX_INTERVAL",
    ):
        try:
            Period.parse(globals()[name])
        except PeriodError as exc:
            raise RuntimeError(f"{name}: {exc}") from None
    if STRATA_KILL_MAX_SEGMENTS < 1:
        raise RuntimeError(
            f"STRATA_KILL_MAX_SEGMENTS must be 1 or more, not {STRATA_KILL_MAX_SEGMENTS}"
        )
    if Period.parse(STRATA_KILL_MAX_INTERVAL).is_negative():
        raise RuntimeError(
            f"STRATA_KILL_MAX_INTERVAL must not be negative: {STRATA_KILL_MAX_INTERVAL}"
        )
    if not 0.0 <= STRATA_KILL_TASK_SLOT_RATIO <= 1.0 or STRATA_KILL_MAX_TASK_SLOTS < 1:
        raise RuntimeError(
            "STRATA_KILL_TASK_SLOT_RATIO must be from 0 to 1 and STRATA_KILL_MAX_TASK_SLOTS 1 or more"
        )


_check_periods()

# --- Celery -------------------------------------------------------------------
# Long-running, resource-holding jobs: acknowledge only when done, hand a job back
# if its worker dies, take one job at a time, and never let Redis redeliver a job
# that is still running (visibility timeout above the longest task).
CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("STRATA_TASK_VISIBILITY_TIMEOUT", 6 * 3600)),
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("STRATA_QUEUE", "strata")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "intermediary-janitor": {
        "task": "workers.tasks.intermediary_janitor",
        "schedule": 60.0,
    },
    "retention-duty": {
        "task": "workers.tasks.retention_duty",
        "schedule": STRATA_RETENTION_SECONDS,
    },
    "history-duty": {
        "task": "workers.tasks.history_duty",
        "schedule": STRATA_HISTORY_SECONDS,
    },
    "kill-duty": {
        "task": "workers.tasks.kill_duty",
        "schedule": STRATA_KILL_PERIOD_SECONDS,
    },
    # The task reaper (failing tasks whose worker died) is not scheduled here: it
    # must run when no worker is alive, so the beat process runs it in a thread
    # of its own (workers.reaper.Reaper, started on beat_init by workers.tasks).
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("STRATA_LOG_LEVEL", "INFO")},
    "loggers": {
        "py4j": {"level": "WARNING"},
        "django.db.backends": {"level": "INFO"},
    },
}
