"""Reads that may be slightly stale (the history, the metrics page, exports, /metrics) from a
PostgreSQL read replica, when DATABASE_REPLICA_URL names one; everything else on the primary.

The router sends a read to the replica only inside `replica_reads()`, which the views of those
pages enter (`reads_from_replica`): whatever a decision, a lease or a lever depends on is read
outside it, on the primary, and every write and every `select_for_update()` goes to the primary
wherever it happens. Who is signed in, and their permissions, are read from the primary before a
page enters it.

A replica is read only while it answers and is at most DATABASE_REPLICA_MAX_LAG_SECONDS behind
(asked again every DATABASE_REPLICA_CHECK_SECONDS); otherwise, and for the rest of that period
after a page's query on it failed (that page is then read again from the primary), pages read the
primary. Without DATABASE_REPLICA_URL nothing here does anything.
"""
import contextvars
import functools
import logging
import threading
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError, connections

log = logging.getLogger("agentsite.replica")  # the name operators filter logs by

REPLICA = "replica"
_reading = contextvars.ContextVar("replica_reads", default=False)
_state = {"usable": False, "checked_at": float("-inf"), "lag": None}
_checking = threading.Lock()

# How far behind the replica is, in seconds: 0 while it has replayed everything it received.
LAG_SQL = (
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 "
    "WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0 "
    "ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 1e9) END"
)


def configured() -> bool:
    return REPLICA in settings.DATABASES


@contextmanager
def replica_reads():
    """Reads inside may go to the replica (when there is one, and it is usable)."""
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


def usable() -> bool:
    """Whether the replica answers and is recent enough, as last checked (checked again when due)."""
    if not configured():
        return False
    now = time.monotonic()
    if now - _state["checked_at"] >= settings.DATABASE_REPLICA_CHECK_SECONDS and _checking.acquire(blocking=False):
        try:
            _state["usable"], _state["lag"] = _check()
            _state["checked_at"] = time.monotonic()
        finally:
            _checking.release()
    return _state["usable"]


def _check() -> tuple[bool, float | None]:
    replica = connections[REPLICA]
    try:
        with replica.cursor() as cursor:
            cursor.execute(LAG_SQL)
            lag = float(cursor.fetchone()[0])
    except DatabaseError as exc:
        log.warning("the read replica does not answer; pages read the primary: %s", str(exc).strip()[:200])
        replica.close()
        return False, None
    finally:
        if replica.connection is not None and not replica.in_atomic_block:
            replica.close()  # this thread's; a page opens its own
    if lag > settings.DATABASE_REPLICA_MAX_LAG_SECONDS:
        log.warning("the read replica is %.1f s behind; pages read the primary", lag)
        return False, lag
    return True, lag


def mark_unusable() -> None:
    """A query on the replica failed: pages read the primary until the next check."""
    _state["usable"], _state["checked_at"] = False, time.monotonic()


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        if _reading.get() and usable():
            return REPLICA
        return None  # the primary

    def db_for_write(self, model, **hints):
        return None

    def allow_relation(self, obj1, obj2, **hints):
        return True  # the same rows, wherever they were read

    def allow_migrate(self, db, app_label, **hints):
        return db != REPLICA


def reads_from_replica(view):
    """A page view whose reads may go to the replica; read again from the primary when the
    replica fails under it. A streamed body is read outside the view: see `replica_streamed`."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not configured():
            return view(request, *args, **kwargs)
        user = getattr(request, "user", None)
        if user is not None:
            user.is_authenticated  # noqa: B018 - who asks (and may they) is read from the primary
        try:
            with replica_reads():
                return view(request, *args, **kwargs)
        except DatabaseError as exc:
            if not _failed_on_replica():
                raise
            log.warning("a page's read on the replica failed; reading the primary: %s", str(exc).strip()[:200])
            mark_unusable()
            return view(request, *args, **kwargs)

    return wrapped


def replica_streamed(chunks):
    """A streamed response's body, each chunk read inside `replica_reads()` (the body is read
    after the view returned). Once it has started it cannot start again: a replica that fails
    mid-way ends the download with an error, as a primary that fails would."""
    chunks = iter(chunks)
    while True:
        with replica_reads():
            try:
                chunk = next(chunks)
            except StopIteration:
                return
        yield chunk


def _failed_on_replica() -> bool:
    """Whether the replica's connection in this thread is the one that broke (or never opened)."""
    replica = connections[REPLICA]
    raw = replica.connection
    return raw is None or bool(getattr(raw, "closed", False) or getattr(raw, "broken", False)) or replica.errors_occurred
