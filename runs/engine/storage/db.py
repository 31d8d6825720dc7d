"""Write transactions for the loop, and what a lost database connection means to it.

A connection can die under any process (a database restart, a failover, a proxy's idle
timeout, `pg_terminate_backend`). That is a transient fault, not a bug of the statement that met
it: the work is done again on a new connection (`on_fresh_connection`), and only a statement
the database refused (`connection_lost` is False) is an error.
"""
import logging
import threading
import time
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, DatabaseError, DataError, IntegrityError, connection, connections, transaction

log = logging.getLogger("runs.services.db")  # its name from before the move: operators filter on it

# SQLite allows one writer at a time, and a writer that finds the database locked sleeps in
# growing steps before it tries again. Threads of one process queue here instead, in order and
# without sleeping; other processes still wait on SQLite's busy timeout.
_sqlite_writer = threading.RLock()  # re-entered by work done on commit (the rollup counter)
# SQLSTATE classes of a connection that is gone: 08 connection exception; 57P01-57P03 the
# server shut the session down (administrator command, crash shutdown, cannot connect now).
_LOST_SQLSTATES = ("08", "57P01", "57P02", "57P03")
# How often work is tried on a new connection, and the pause before each new try (doubled).
FRESH_CONNECTION_ATTEMPTS = 3
FRESH_CONNECTION_PAUSE = 0.5


@contextmanager
def write_transaction():
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        with _sqlite_writer, transaction.atomic():
            yield
    else:
        with transaction.atomic():
            yield


@contextmanager
def loop_connections():
    """While inside, this thread drives runs: it takes and hands back its connection around every
    wait, and goes on from the rows when one turns out dead. So PostgreSQL's pool hands it a
    connection that was out a moment ago without a round trip to check it, and prepares its
    statements (hosting/postgres/base.py); on SQLite its connection is shared with the other
    driving threads while it waits (hosting/sqlite/base.py)."""
    connection.drives_runs = True
    try:
        yield
    finally:
        connection.drives_runs = False


def thread_connection():
    """This thread's default database connection. Hot paths take it once and use it: each use of
    the `connection` proxy is a thread-local lookup, about 70 an iteration when every field's
    preparation and every statement went through it."""
    return connections[DEFAULT_DB_ALIAS]


def release_db_connection() -> None:
    """With a connection pool (or SQLite's shelf of idle connections, for a driving thread), hand
    the connection back before waiting (on a model, a tool, a working slot), so the connections in
    use stay bounded by the threads working at once, not by the runs in flight."""
    conn = thread_connection()
    if conn.in_atomic_block:
        return
    if getattr(conn, "pool", None) is not None or (
        getattr(conn, "shares_idle_connections", False) and conn.drives_runs
    ):
        conn.close()


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says this thread's database connection is gone, rather than that the
    database refused a statement (a constraint, bad data, a lock timeout: those are not retried).

    Read it before dropping the connection: a connection that is still open and answering
    decides against, whatever the message says."""
    driver = connection.Database  # a few errors leave Django unwrapped (sqlite3's, when it is closed)
    if not isinstance(exc, (DatabaseError, driver.Error)):
        return False
    if isinstance(exc, (IntegrityError, DataError, driver.IntegrityError, driver.DataError)):
        return False
    cause = exc.__cause__ or exc
    if str(getattr(cause, "sqlstate", "") or "").startswith(_LOST_SQLSTATES):
        return True
    raw = connection.connection
    if raw is None:  # Django dropped it already: the rollback after the error failed too
        return True
    if connection.vendor == "sqlite":  # the file is always there: only a closed connection is lost
        return "closed database" in str(cause)
    return bool(getattr(raw, "closed", False) or getattr(raw, "broken", False))


def drop_connection() -> None:
    """Let go of this thread's connection (a pool discards a broken one); the next statement opens
    or takes a new one. Inside a transaction nothing can be dropped: its block must end first."""
    if not connection.in_atomic_block:
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - closing a dead connection can fail too; it is gone either way
            connection.connection = None


def pause_before_retry(attempt: int) -> None:
    time.sleep(FRESH_CONNECTION_PAUSE * 2**attempt)


def on_fresh_connection(work, *, what: str):
    """`work()`, done again on a new connection when its connection was lost (up to
    FRESH_CONNECTION_ATTEMPTS times). For work that is safe to repeat: a read, one statement that
    either happened or did not (a lease's claim or release), a driver that goes on from the rows."""
    for attempt in range(FRESH_CONNECTION_ATTEMPTS):
        try:
            return work()
        except Exception as exc:  # noqa: BLE001 - connection_lost decides; everything else is raised
            if not connection_lost(exc) or connection.in_atomic_block or attempt + 1 == FRESH_CONNECTION_ATTEMPTS:
                raise
            log.warning("database connection lost during %s (%s); trying again on a new one", what, exc)
            drop_connection()
            pause_before_retry(attempt)
