"""Write transactions for the loop."""
import threading
from contextlib import contextmanager

from django.db import connection, transaction

# SQLite allows one writer at a time, and a writer that finds the database locked sleeps in
# growing steps before it tries again. Threads of one process queue here instead, in order and
# without sleeping; other processes still wait on SQLite's busy timeout.
_sqlite_writer = threading.Lock()


@contextmanager
def write_transaction():
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        with _sqlite_writer, transaction.atomic():
            yield
    else:
        with transaction.atomic():
            yield


def release_db_connection() -> None:
    """With a connection pool, hand the connection back before waiting (on a model, a tool, a
    working slot), so the connections in use stay bounded by the pool, not by the runs in flight."""
    if getattr(connection, "pool", None) is not None and not connection.in_atomic_block:
        connection.close()
