"""DATABASES from the environment: SQLite in var/ by default, DATABASE_URL for another database
(PostgreSQL at scale), DATABASE_REPLICA_URL for a PostgreSQL read replica (hosting/replica.py)."""
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_float, env_int, env_str

# SQLite: WAL lets the web process read while a worker writes; IMMEDIATE transactions take the
# write lock up front so two writers queue on the busy timeout instead of failing with
# "database is locked" on lock upgrade. Every SQLite database gets them, the default file or one
# named by DATABASE_URL (an option the URL sets itself, such as ?timeout=5, is kept).
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def databases(data_dir: Path) -> dict:
    url = env_str("DATABASE_URL")
    if url:
        default = dj_database_url.parse(url, conn_health_checks=True)
    else:
        default = {"ENGINE": "django.db.backends.sqlite3", "NAME": env_str("SQLITE_PATH", str(data_dir / "db.sqlite3"))}
    found = {"default": default}
    if default["ENGINE"].endswith("postgresql"):
        _postgres(default, pool=True)
        # Each test session gets its own database, so two test runs on one machine do not collide.
        default["TEST"] = {"NAME": f"{default['NAME']}_test_{os.getpid()}"}
    elif default["ENGINE"].endswith("sqlite3"):
        default["OPTIONS"] = {**SQLITE_OPTIONS, **default.get("OPTIONS", {})}
        # The threads that drive runs share their connections while they wait (hosting/sqlite/base.py).
        default["ENGINE"] = "hosting.sqlite"
        # On disk, never in memory: tool handlers run in threads and tests start real worker
        # processes, and all of them must open the same database.
        default["TEST"] = {"NAME": env_str("TEST_SQLITE_PATH", str(data_dir / f"test-{os.getpid()}.sqlite3"))}
    else:
        default["TEST"] = {"NAME": f"{default['NAME']}_test_{os.getpid()}"}
    replica_url = env_str("DATABASE_REPLICA_URL")
    if replica_url:
        replica = dj_database_url.parse(replica_url)
        if not (replica["ENGINE"].endswith("postgresql") and default["ENGINE"] == "hosting.postgres"):
            raise ImproperlyConfigured("DATABASE_REPLICA_URL is a PostgreSQL replica of a PostgreSQL DATABASE_URL")
        _postgres(replica, pool=False)
        # A replica that does not answer must not hold a page: the page goes to the primary.
        replica["OPTIONS"]["connect_timeout"] = max(1, round(env_float("DATABASE_REPLICA_CONNECT_TIMEOUT", 2.0)))
        replica["TEST"] = {"MIRROR": "default"}  # the test suite's own database; tests of a real replica set their own
        found["replica"] = replica
    return found


def _postgres(database: dict, *, pool: bool) -> None:
    # The loop's statements go through hosting/postgres/base.py: a health check of the pool for a
    # pool that hands out hundreds of connections a second, and statements prepared per connection.
    database["ENGINE"] = "hosting.postgres"
    options = database.setdefault("OPTIONS", {})
    # Parameters sent apart from the statement (psycopg's server-side binding), so the loop's
    # statements can be prepared once per connection: DB_PREPARED_STATEMENTS=off for PgBouncer in
    # transaction mode older than 1.21.
    options["server_side_binding"] = True
    database["PREPARED_STATEMENTS"] = env_bool("DB_PREPARED_STATEMENTS", True)
    if pool:
        # A pool bounds the connections however many runs a worker holds in flight: the loop
        # hands its connection back while it waits on a model.
        options["pool"] = {
            "min_size": env_int("DB_POOL_MIN", 1),
            "max_size": env_int("DB_POOL_MAX", 20),
            "timeout": env_int("DB_POOL_TIMEOUT", 60),
        }
