"""Django's PostgreSQL backend with a pool health check made for a pool that hands out hundreds
of connections a second (ENGINE "hosting.postgres", set by settings.py for a DATABASE_URL of
PostgreSQL).

Django's check (CONN_HEALTH_CHECKS with a pool) sends an empty query every time a connection
leaves the pool. A worker's loop takes a connection and gives it back around every wait on a
model or a tool, several times per iteration, so that was a round trip to the server (and its
CPU on both sides) for every one of them. So a thread that goes on from the rows when a
connection turns out dead (the agent loop: runs/engine/storage/db.py) sets `drives_runs` on
its connection, and is given a connection handed out in the last RECENT_SECONDS unchecked: it was
in use, or idle for less than that, a moment ago. One that waited longer in the pool (where a
server restart, a failover or a proxy's idle timeout may have closed it) is checked as before,
and replaced when it fails. Every other thread (a page, the API) is given checked connections
only, as with Django's check.

The loop's thread also has its statements prepared on the connection after a few runs of each
(psycopg's prepare_threshold; settings' PREPARED_STATEMENTS, DB_PREPARED_STATEMENTS=off turns it
off): the few statements an iteration sends are parsed and planned once per connection instead of
every time, which halved PostgreSQL's CPU per iteration (bench/concurrent_runs.py). Pages' queries
are not prepared: a generic plan could suit one filter of the history and not another.
"""
import threading
import time

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

RECENT_SECONDS = 2.0
PREPARE_AFTER = 5  # executions of a statement on a connection before it is prepared
_taking = threading.local()  # the pool checks a connection in the thread that asks for it


def check_unless_recent(conn) -> None:
    """The pool's `check`: raise when a connection does not answer; for a thread that trusts
    recent connections, only when it has not been out lately."""
    now = time.monotonic()
    recent = now - getattr(conn, "agentsite_out_at", float("-inf")) <= RECENT_SECONDS
    if not (recent and getattr(_taking, "trust_recent", False)):
        ConnectionPool.check_connection(conn)
    conn.agentsite_out_at = now  # a psycopg connection takes attributes of its own


class DatabaseWrapper(base.DatabaseWrapper):
    # Set (on this thread's connection) by code that survives a dead connection on its own.
    drives_runs = False

    def get_new_connection(self, conn_params):
        _taking.trust_recent = self.drives_runs
        try:
            conn = super().get_new_connection(conn_params)  # the pool's getconn and its check
        finally:
            _taking.trust_recent = False
        prepared = self.drives_runs and self.settings_dict.get("PREPARED_STATEMENTS")
        conn.prepare_threshold = PREPARE_AFTER if prepared else None  # a pooled one served others before
        return conn

    @property
    def pool(self):
        # Django builds the pool (its options, its `configure`) and passes its own check; ours
        # replaces it when the pool is first made, before it opens or hands out a connection.
        made = self.alias in self._connection_pools
        pool = super().pool
        if pool is not None and not made and self.settings_dict["CONN_HEALTH_CHECKS"]:
            pool._check = check_unless_recent  # psycopg_pool keeps the `check` argument here
        return pool
