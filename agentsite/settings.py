"""Settings, all read from the environment with safe defaults for a laptop.

SQLite and an embedded Redis by default; DATABASE_URL and REDIS_URL switch to real servers.
"""
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from hosting.databases import databases
from hosting.env import env_bool, env_choice, env_float, env_int, env_json, env_list, env_str
from hosting.secret import local_key
from toolsapp.outbound_rules import allowlist_errors, host_pattern_errors, secret_hosts_errors

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("AGENTSITE_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
# --- Security --------------------------------------------------------------------------------
# Keys are generated into the data folder (mode 0600) when none is given, so a laptop works out
# of the box; production sets them. docs/administrators.md "Keys and rotation" says what rotating each one breaks.
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or local_key(DATA_DIR / "secret_key")
# Keys the HMAC of tool arguments shown in logs, timelines and exports (never the raw arguments).
# Its own key, so rotating SECRET_KEY (sessions, password resets) keeps old runs comparable.
ARGS_HASH_KEY = env_str("ARGS_HASH_KEY") or local_key(DATA_DIR / "args_hash_key")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# DJANGO_HTTPS=1 when the site is served over HTTPS: cookies only travel over HTTPS and browsers
# are told (HSTS) to use nothing else. Off by default: a laptop serves plain http://127.0.0.1.
HTTPS = env_bool("DJANGO_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000) if HTTPS else 0
# Both also bind every subdomain (and, for preload, browsers' built-in lists): the operator's call.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = HTTPS and env_bool("DJANGO_SSL_REDIRECT", False)  # often the proxy's job
# Only when the proxy in front sets X-Forwarded-Proto itself (and strips the client's): trusting
# the header otherwise lets any client claim its plain request was HTTPS.
if env_bool("DJANGO_PROXY_SETS_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "audit",
    "projects",
    "accounts",
    "toolsapp",
    "runs",
    "memory",
    "evals",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "runs.web.request_limits.RequestLimitsMiddleware",  # before the CSRF check, which reads a form first
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.context.AuditActorMiddleware",  # who changes what, for the audit log
    "projects.routes.ProjectScopeMiddleware",  # a thing of a project the person does not see: 404
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "runs.web.middleware.DatabaseConnectionLostMiddleware",  # last: it sees a view's exception first
]

ROOT_URLCONF = "agentsite.urls"
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
                "runs.web.context_processors.pending_approvals",
            ],
        },
    },
]
WSGI_APPLICATION = "agentsite.wsgi.application"
ASGI_APPLICATION = "agentsite.asgi.application"

DATABASES = databases(DATA_DIR)  # hosting/databases.py: SQLite by default, DATABASE_URL, a read replica
DATABASE_ROUTERS = ["hosting.replica.ReplicaRouter"]
# A replica further behind than this is not read; it is asked again after DATABASE_REPLICA_CHECK_SECONDS.
DATABASE_REPLICA_MAX_LAG_SECONDS = env_float("DATABASE_REPLICA_MAX_LAG_SECONDS", 10.0)
DATABASE_REPLICA_CHECK_SECONDS = env_float("DATABASE_REPLICA_CHECK_SECONDS", 5.0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Authentication ----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Sign-in (login page and POST /api/v1/token/) is refused for the rest of a window once a
# username, or a client address, has this many failed attempts in it (accounts/signin_throttle.py).
SIGNIN_WINDOW_SECONDS = env_int("SIGNIN_WINDOW_SECONDS", 15 * 60)
SIGNIN_FAILURES_PER_USERNAME = env_int("SIGNIN_FAILURES_PER_USERNAME", 5)
# Higher than per username: one office behind one address should not lock itself out.
SIGNIN_FAILURES_PER_IP = env_int("SIGNIN_FAILURES_PER_IP", 20)
# API tokens expire this many days after they are made (0: never, if the operator wants that).
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 30)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# --- Single sign-on (OpenID Connect) ---------------------------------------------------------
# Off unless OIDC_RP_CLIENT_ID is set. accounts/sso_config.py reads every OIDC_* variable and
# LOCAL_SIGNIN (on by default; off: no password sign-in anywhere) and stops the start, naming
# what is missing, when they are half set. It sets SSO_ENABLED, LOCAL_SIGNIN, and with single
# sign-on AUTHENTICATION_BACKENDS and the OIDC_* settings mozilla-django-oidc reads.
# docs/administrators.md "Single sign-on (OpenID Connect)".
from accounts.sso_config import SsoConfigError, sso_settings  # noqa: E402

try:
    globals().update(sso_settings(os.environ))
except SsoConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# --- end of single sign-on ---------------------------------------------------------------------
# Roles per project first (projects/backends.py: signs nobody in; reads site roles too), then sign-in.
AUTHENTICATION_BACKENDS = ["projects.backends.ProjectRoleBackend",
                           *globals().get("AUTHENTICATION_BACKENDS", ["django.contrib.auth.backends.ModelBackend"])]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"  # filled by ./start (collectstatic)
# What collectstatic writes there is public: readable, never writable by others (whatever the umask).
FILE_UPLOAD_PERMISSIONS = 0o644
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o755
WHITENOISE_USE_FINDERS = True  # serve static/ directly: no collectstatic step to forget

# --- Redis, Celery, Channels -------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
# Shared by every web process: sign-in failure counts must add up across all of them.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                "KEY_PREFIX": "agentsite-cache"},
}
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = False  # see runs/tasks.py: durability comes from leases and the sweep

CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker takes a run only when one of its threads is free: with early acknowledgement a busy
# worker would otherwise keep taking runs into its own queue while another worker sits idle
# (measured: a few runs of a burst of 200 started 8 s late, behind runs of the busy worker).
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 900)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 960)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# How often beat's sweep looks for runs no live worker drives (and webhooks whose task was lost).
# With RUN_LEASE_SECONDS it bounds how long a run whose worker died waits: lease + interval.
SWEEP_INTERVAL_SECONDS = env_float("SWEEP_INTERVAL_SECONDS", 5.0)
# Ended runs are added to the metrics page's daily rollups this long after they end, in batches
# (runs/observability/metrics/counter.py); until then the page reads them from their own rows.
# 0: at once, by the process that ended them, right after the ending commits.
ROLLUP_COUNT_DELAY_SECONDS = env_float("ROLLUP_COUNT_DELAY_SECONDS", 1.0)
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "runs.tasks.sweep_runs", "schedule": SWEEP_INTERVAL_SECONDS},
    "prune-runs": {"task": "runs.tasks.prune_runs", "schedule": 6 * 3600.0},
    # Days not yet in the metrics rollups (after an upgrade) are built a few at a time.
    "build-rollups": {"task": "runs.tasks.build_rollups", "schedule": 300.0},
    "budget-alerts": {
        "task": "runs.tasks.check_budget_alerts", "schedule": env_float("BUDGET_ALERT_INTERVAL_SECONDS", 60.0),
    },
}
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # channels-redis waits 5 s for a message; redis-py's own 5 s read timeout would fire
        # first and kill every idle websocket consumer.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1000, "expiry": 60},
    }
}

# --- Models ------------------------------------------------------------------------------
# With no LLM_API_KEY the offline demo model (a scripted server, not a language model) is used.
LLM_BASE_URL = env_str("LLM_BASE_URL")
LLM_API_KEY = env_str("LLM_API_KEY")
# LLM_API_KEY is sent only to the host of LLM_BASE_URL (api.openai.com when it is empty), to a
# --base-url typed at the host's shell, and to these hosts ("api.example.com", "*.example.org").
# An agent whose endpoint is elsewhere is sent no key.
LLM_API_KEY_HOSTS = env_list("LLM_API_KEY_HOSTS", [])
LLM_MODELS = env_list("LLM_MODELS", [])
LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", 120.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2)
# Step replays one person may have in flight at once (runs/lifecycle/replay.py: they spend tokens).
REPLAYS_AT_ONCE = env_int("REPLAYS_AT_ONCE", 2)
# Cap on each answer when the agent sets none: a local server would otherwise generate up to
# its whole context window. 0 sends no cap.
LLM_MAX_OUTPUT_TOKENS = env_int("LLM_MAX_OUTPUT_TOKENS", 4096)
# Price per million tokens, {"model": [input, output, cached input, reasoning output]}: the last
# two are optional (cached input at the input rate, reasoning at the output rate when absent).
# OpenRouter's usage.cost wins when present.
LLM_PRICES = env_json("LLM_PRICES", {"demo": [1.0, 2.0, 0.5, 2.0]})
# Context window in tokens of the models the runs use ({"model": tokens}; a name matches without
# its ":suffix"), and of any model not listed. A run's context budget is the smallest window of its
# models less the answer's cap and a safety margin, unless its agent sets a budget of its own.
LLM_CONTEXT_LENGTHS = env_json("LLM_CONTEXT_LENGTHS", {
    "gpt-4o": 128_000, "gpt-4o-mini": 128_000, "gpt-4.1": 1_047_576, "gpt-4.1-mini": 1_047_576,
    "o3": 200_000, "o4-mini": 200_000, "demo": 32_768,
})
LLM_CONTEXT_TOKENS = env_int("LLM_CONTEXT_TOKENS", 32_768)
# An agent's long-term memory (the save_memory and search_memory tools): facts one agent may keep
# per customer (a save beyond is refused), and facts one search returns.
MEMORY_MAX_FACTS = env_int("MEMORY_MAX_FACTS", 500)
MEMORY_SEARCH_LIMIT = env_int("MEMORY_SEARCH_LIMIT", 5)
# The judge of experiments' rubrics (evals/judge.py): a model name, and its endpoint when it is not
# LLM_BASE_URL's (LLM_API_KEY goes to it only as to any endpoint: see LLM_API_KEY_HOSTS). Empty: no
# judge, and a case with a rubric fails its judge's check saying so.
EVAL_JUDGE_MODEL = env_str("EVAL_JUDGE_MODEL")
EVAL_JUDGE_BASE_URL = env_str("EVAL_JUDGE_BASE_URL")
# Bytes read from a model server for one answer (after decompression); a larger answer is that
# model's error, so one server cannot make a worker hold an unbounded body.
LLM_MAX_RESPONSE_BYTES = env_int("LLM_MAX_RESPONSE_BYTES", 8 * 1024 * 1024)
DEMO_MODEL_URL = env_str("DEMO_MODEL_URL")  # a running demo model; else one starts in-process
DEMO_MODEL_LATENCY = env_float("DEMO_MODEL_LATENCY", 0.0)
# "realistic": the demo's example tasks answer in 0.4-2.5 s, as a hosted model would (./start's
# default, so a newcomer sees the live page work); "instant": at once (tests, benchmarks).
DEMO_MODEL_PACE = env_choice("DEMO_MODEL_PACE", ("instant", "realistic"), "instant")

# --- The loop ------------------------------------------------------------------------------
TOOL_RESULT_MAX_CHARS = env_int("TOOL_RESULT_MAX_CHARS", 16000)
TOOL_RESULT_PREVIEW_CHARS = env_int("TOOL_RESULT_PREVIEW_CHARS", 2000)
TOOL_PARALLEL_WORKERS = env_int("TOOL_PARALLEL_WORKERS", 8)
# A handler past its timeout cannot be stopped; its thread is replaced and it counts as hung
# until it returns. A tool with this many hung calls in one process has its new calls refused
# (an error the model reads) until one of them returns (see runs/engine/tools/threads.py).
TOOL_MAX_HUNG_CALLS = env_int("TOOL_MAX_HUNG_CALLS", 4)
# Extra modules that register Python tool handlers and verifiers (comma separated), imported at
# start after those of the installed packages' `agentsite.tools` entry points (toolsapp/plugins.py).
# TOOL_MODULES is the older name of the variable, still read.
AGENTSITE_TOOL_MODULES = env_list("AGENTSITE_TOOL_MODULES", []) + env_list("TOOL_MODULES", [])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Celery's per-task "received"/"succeeded" lines and beat's "sending due task" would log three
    # lines every 5 s for the sweep alone; failures still log at ERROR, and runs log their own lines.
    "loggers": {
        name: {"level": env_str("LIBRARY_LOG_LEVEL", "WARNING")}
        for name in ("httpx", "httpx2", "httpcore", "openai", "celery.app.trace", "celery.worker.strategy", "celery.beat")
    },
}
# A worker holds a lease on each run it drives; a lease that ran out is free to take. Short, so a
# run whose worker died is picked up again within lease + SWEEP_INTERVAL_SECONDS (25 s by
# default). A slow model or tool does not look like a dead worker: while a driver waits, its
# process renews the lease every third of it, up to the end of that wait's own timeouts
# (runs/engine/leases.py).
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", 20)
# How many runs one worker process lets work at the same moment; the others wait on their
# model or tool, or for a slot (see runs/engine/throttle.py). Runs in flight are bounded by
# the worker's threads, not by this.
RUN_WORKING_SLOTS = env_int("RUN_WORKING_SLOTS", 4)
# A run taken over from a dead worker this many times is ended as failed (worker_lost).
RUN_MAX_TAKEOVERS = env_int("RUN_MAX_TAKEOVERS", 5)
# A queued run no worker took this long after its last dispatch is sent again (Redis lost it?).
RUN_REQUEUE_AFTER_SECONDS = env_int("RUN_REQUEUE_AFTER_SECONDS", 20)
RUN_RETENTION_DAYS = env_int("RUN_RETENTION_DAYS", 90)  # 0 keeps runs forever
DEFAULT_CUSTOMER = env_str("DEFAULT_CUSTOMER", "acme")
APPROVAL_TIMEOUT_SECONDS = env_int("APPROVAL_TIMEOUT_SECONDS", 0)  # 0: approvals never expire
# A run's live page catching up over its websocket: events sent per resume (the page asks again
# for the rest), and resumes one connection may ask for in 10 seconds.
RUN_TIMELINE_RESUME_EVENTS = env_int("RUN_TIMELINE_RESUME_EVENTS", 2000)
RUN_TIMELINE_RESUMES_PER_WINDOW = env_int("RUN_TIMELINE_RESUMES_PER_WINDOW", 10)

# --- Tools from other servers ----------------------------------------------------------------
# HTTP tools and webhooks refuse loopback, private, link-local and metadata addresses unless
# named here: hosts ("tools.internal"), host:port ("127.0.0.1:9000") or networks ("10.1.0.0/16").
OUTBOUND_ALLOWLIST = env_list("OUTBOUND_ALLOWLIST", [])
# Which hosts may receive each HTTP tool secret, as JSON:
# {"TOOL_SECRET_CRM": ["crm.example.com", "*.example.org"]}. A secret not listed goes nowhere.
TOOL_SECRET_HOSTS = env_json("TOOL_SECRET_HOSTS", {})
for _name, _problems in (
    ("OUTBOUND_ALLOWLIST", allowlist_errors(OUTBOUND_ALLOWLIST)),
    ("TOOL_SECRET_HOSTS", secret_hosts_errors(TOOL_SECRET_HOSTS)),
    ("LLM_API_KEY_HOSTS", host_pattern_errors(LLM_API_KEY_HOSTS)),
):
    if _problems:
        raise ImproperlyConfigured(f"{_name} is malformed: {'; '.join(_problems)}")
TOOL_HTTP_MAX_RESPONSE_BYTES = env_int("TOOL_HTTP_MAX_RESPONSE_BYTES", 1024 * 1024)
TOOL_HTTP_MAX_REDIRECTS = env_int("TOOL_HTTP_MAX_REDIRECTS", 3)
# MCP servers started as a stdio command get only these environment variables (plus the
# server's own); secrets reach them from the environment, never from the database.
MCP_STDIO_ENV_PASSTHROUGH = env_list("MCP_STDIO_ENV_PASSTHROUGH", ["PATH", "HOME", "LANG"])
# A stdio MCP server runs its command on the web server and every worker. Only a superuser may
# register any command; others (with the tools permission) only these executables, exact paths or
# names as typed as the command's first word ("/opt/mcp/bin/crm-server", "uvx"). A process starts
# only a command listed here or one whose server a superuser saved with exactly that command.
MCP_STDIO_COMMANDS = env_list("MCP_STDIO_COMMANDS", [])
MCP_DISCOVERY_TIMEOUT_SECONDS = env_float("MCP_DISCOVERY_TIMEOUT_SECONDS", 30.0)
# Bytes of one MCP tool result (as JSON); a larger one is the call's error, as for HTTP tools.
MCP_MAX_RESULT_BYTES = env_int("MCP_MAX_RESULT_BYTES", 1024 * 1024)

# --- Notifications -----------------------------------------------------------------------
# Outgoing POSTs for new pending approvals and budget alerts (comma separated URLs), signed when
# WEBHOOK_SECRET is set: X-Agentsite-Signature "t=<unix time>,v1=<HMAC-SHA256 of 't.body'>".
WEBHOOK_URLS = env_list("WEBHOOK_URLS", [])
WEBHOOK_SECRET = env_str("WEBHOOK_SECRET")
WEBHOOK_TIMEOUT_SECONDS = env_float("WEBHOOK_TIMEOUT_SECONDS", 5.0)
# Each delivery is a row (WebhookDelivery) written with the event that causes it. A failed one is
# tried again with backoff up to this many attempts in all; one whose task was lost (Redis went
# away) is sent again by the sweep once it is this overdue.
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 6)
WEBHOOK_RESEND_AFTER_SECONDS = env_int("WEBHOOK_RESEND_AFTER_SECONDS", 60)
# Links in notifications. `manage.py up` sets it from its --host/--port when unset; a worker started
# otherwise without it warns at start (agentsite/celery.py), since its links would open 127.0.0.1:8000.
SITE_URL_IS_SET = bool(env_str("SITE_URL"))
SITE_URL = env_str("SITE_URL") or "http://127.0.0.1:8000"

# --- Traces (OpenTelemetry) ---------------------------------------------------------------
# Runs exported as traces over OTLP/HTTP (runs/observability/tracing/exporter.py) to the SDK's endpoint
# variables; empty: no tracing, the SDK never loaded. The SDK reads its other OTEL_* itself (docs/integrators.md "Traces").
_otlp_base = env_str("OTEL_EXPORTER_OTLP_ENDPOINT")
TRACES_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
    f"{_otlp_base.removesuffix('/')}/v1/traces" if _otlp_base else ""
)

# --- Prometheus ----------------------------------------------------------------------------
# /metrics answers whoever passes every check that is set: a bearer token (METRICS_TOKEN) and/or
# an address in METRICS_ALLOWED_NETWORKS (CIDRs, e.g. "10.0.0.0/8,127.0.0.1/32"; the address is
# read behind TRUSTED_PROXY_COUNT proxies). With neither set /metrics is a 404.
import ipaddress  # noqa: E402  (only this block needs it)

METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", [])
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {exc}") from exc

# --- E-mail and escalation ------------------------------------------------------------------
# An approval waiting past its threshold (the agent's escalate_after_seconds, or its rule's) is
# escalated once by the sweep: a webhook ("approval.escalated") and an e-mail to the agent's
# escalation_emails, else to APPROVAL_ESCALATION_EMAILS (comma separated). With no EMAIL_HOST
# the e-mails are written to the console instead of sent.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS, usually port 587
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # TLS from the start, usually port 465
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be set")
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0)  # seconds an SMTP connection may block the sweep
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agentsite@localhost")
APPROVAL_ESCALATION_EMAILS = env_list("APPROVAL_ESCALATION_EMAILS", [])
# Twins: how long a call that ran still counts; the rule backtest: how many days of decisions (docs/operators.md).
TWIN_WINDOW_HOURS, BACKTEST_DAYS = env_int("TWIN_WINDOW_HOURS", 24), env_int("BACKTEST_DAYS", 30)
# --- REST API ----------------------------------------------------------------------------
# The largest body Django reads (default 2.5 MB): a dataset's 10 MB of JSONL; past it, the limit in
# words (runs/web/request_limits.py). Files uploaded to a page do not count.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024)
# The API reads a token first (an anonymous call gets 401, "WWW-Authenticate: Token"), then the session.
API_AUTHENTICATION = ["accounts.auth.ApiTokenAuthentication", "rest_framework.authentication.SessionAuthentication"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": API_AUTHENTICATION,
    "EXCEPTION_HANDLER": "runs.web.api.errors.exception_handler",  # every error JSON with a "detail" sentence
    # How many proxies in front append to X-Forwarded-For; 0 uses the connection's address.
    # Sign-in throttling counts failures per client address by this rule.
    "NUM_PROXIES": env_int("TRUSTED_PROXY_COUNT", 0) or None,
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's three parsers, with JSON nested deeper than 64 levels a 400 instead of a 500.
    "DEFAULT_PARSER_CLASSES": [
        "apikit.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # "?format=" with a format nobody renders is ignored (DRF answers it with a 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apikit.negotiation.UnknownFormatIgnored",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Agentsite API",
    "DESCRIPTION": "Runs, approvals, agents, tools and metrics: everything the dashboard does.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_AUTHENTICATION": API_AUTHENTICATION[::-1],  # /api/schema/ (public) reads the session first, as it always did
}


# The audit log (audit/): the models whose every change is recorded, with who, when and from where.
# "secret": fields shown only as masked (and whether they changed); "url": kept as scheme and host
# (URLs carry tokens); "ignore": fields that change on their own (timestamps, counters); "many":
# many-to-many fields whose additions and removals are recorded (a person's roles, an agent's tools).
AUDITED_MODELS = {
    "runs.Agent": {"kind": "agent", "secret": ["provider_options"], "url": ["base_url"], "ignore": ["updated_at"],
                   "many": ["tools"]},
    "runs.ApprovalRule": {"kind": "approval rule", "ignore": ["updated_at"], "many": ["quorum_groups"]},
    "toolsapp.Tool": {"kind": "tool", "ignore": ["updated_at"]},
    "toolsapp.McpServer": {"kind": "MCP server", "url": ["url"],
                           "ignore": ["updated_at", "last_discovered_at", "last_error"]},
    "runs.Webhook": {"kind": "webhook", "url": ["url"]},
    "accounts.ApiToken": {"kind": "api token", "secret": ["key_hash"], "ignore": ["last_used_at"]},
    "auth.User": {"kind": "person", "secret": ["password"], "ignore": ["last_login"],
                  "many": ["groups", "user_permissions"]},
    "auth.Group": {"kind": "group", "many": ["permissions"]},
    "accounts.ChatIdentity": {"kind": "chat identity"},
    "runs.Budget": {"kind": "budget", "ignore": ["updated_at"]},
    "runs.BudgetRaise": {"kind": "budget raise", "ignore": ["created_at"]},
    "projects.Project": {"kind": "project"}, "projects.Membership": {"kind": "project role"},
}


# Decisions from chat (runs/supervision/chat/, docs/administrators.md "Decisions from chat: setting it up"): a bot token and a channel,
# or only an incoming webhook; clicks signed with the signing secret, at most SLACK_MAX_AGE_SECONDS apart.
SLACK_API_URL = (env_str("SLACK_API_URL") or "https://slack.com/api").rstrip("/")
SLACK_BOT_TOKEN = env_str("SLACK_BOT_TOKEN")
SLACK_CHANNEL = env_str("SLACK_CHANNEL")
SLACK_WEBHOOK_URL = env_str("SLACK_WEBHOOK_URL")
SLACK_SIGNING_SECRET = env_str("SLACK_SIGNING_SECRET")
SLACK_MAX_AGE_SECONDS = env_int("SLACK_MAX_AGE_SECONDS", 300)
