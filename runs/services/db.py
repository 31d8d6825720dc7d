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
