"""Django's SQLite backend, with the connections of the threads that drive runs shared while
they wait (ENGINE "hosting.sqlite", set by settings.py for every SQLite database).

A worker holds hundreds of runs in flight, one thread each, and a Django connection belongs to
its thread: on SQLite each one is a connection of its own with its schema, its statement cache
and its page cache, about half a megabyte, so 500 runs in flight held 500 of them (a worker
process grew to about 500 MB). Opening one again for every wait would cost more than the
iteration (2.4 ms: the file, the PRAGMAs, Django's SQL functions). So a thread that drives runs
(`drives_runs`, set by runs/engine/storage/db.py) hands its connection to this process's shelf of idle
ones when it waits on a model or a tool (`close()`, as with a pool), and takes one from the
shelf when it needs one again: the connections stay about as many as the threads working at
once. A connection goes on the shelf only outside a transaction, and at most IDLE_MAX wait there.
Every other thread (a page, the API) opens and closes its own, as Django does.
"""
import sqlite3
import threading

from django.db.backends.sqlite3 import base

IDLE_MAX = 32
_shelf: dict[str, list] = {}  # database file -> idle sqlite3 connections
_shelf_lock = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    drives_runs = False  # set on this thread's connection while it drives runs
    shares_idle_connections = True  # runs/engine/storage/db.release_db_connection hands it back while waiting

    def get_new_connection(self, conn_params):
        if self.drives_runs:
            with _shelf_lock:
                idle = _shelf.get(str(self.settings_dict["NAME"]))
                while idle:
                    raw = idle.pop()
                    if _usable(raw):  # already set up: functions, PRAGMAs, init command
                        return raw
        return super().get_new_connection(conn_params)

    def _close(self):
        raw, name = self.connection, self.settings_dict["NAME"]
        if raw is not None and self.drives_runs and _usable(raw) and not raw.in_transaction:
            with _shelf_lock:
                idle = _shelf.setdefault(str(name), [])
                if len(idle) < IDLE_MAX:
                    idle.append(raw)
                    return
        super()._close()


def _usable(raw) -> bool:
    """Whether an sqlite3 connection is still open (something may have closed it under Django)."""
    try:
        raw.in_transaction  # noqa: B018 (reading it raises on a closed connection)
    except sqlite3.ProgrammingError:
        return False
    return True


def shelved(database: str) -> int:
    """How many idle connections to `database` wait on this process's shelf."""
    with _shelf_lock:
        return len(_shelf.get(str(database), []))
