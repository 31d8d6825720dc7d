"""The PostgreSQL pool checks a connection it hands out only when it was not out a moment ago
(hosting/postgres/base.py): a connection the server closed while it sat in the pool is
replaced, and the loop's many quick returns and takes cost no round trip each."""

from contextlib import nullcontext

import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from hosting.postgres import base as pool_backend
from runs.engine.storage.db import loop_connections
from tests.engine.fault_matrix.test_database_lost import terminate_backends

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the connection pool: PostgreSQL")


def take_again() -> object:
    """Hand this thread's connection back to the pool and take one again; the connection."""
    connection.close()
    connection.ensure_connection()
    return connection.connection


def test_the_loop_is_handed_a_connection_out_a_moment_ago_unchecked_and_an_older_one_checked(monkeypatch):
    assert connection.pool is not None
    checked = []
    real = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(lambda conn: (checked.append(conn), real(conn))))
    assert [take_again() for _ in range(3)] and len(checked) == 3  # a page's thread: checked every time
    checked.clear()
    with loop_connections():  # the loop's thread
        taken = [take_again() for _ in range(12)]
    pooled = {id(conn) for conn in taken}  # the pool hands its idle connections out in turn
    assert len(pooled) < len(taken)
    # Each was checked at most once: the first time it left the pool, not every time.
    assert len(checked) <= len(pooled) and len({id(conn) for conn in checked}) == len(checked)
    checked.clear()
    for conn in taken:
        conn.agentsite_out_at = min(conn.agentsite_out_at, conn.agentsite_out_at - pool_backend.RECENT_SECONDS - 1)
    with loop_connections():
        again = take_again()  # as if every one had waited in the pool since
    assert checked == [again]


@pytest.mark.parametrize("trusted", [False, True])
def test_a_connection_closed_by_the_server_while_it_waited_in_the_pool_is_replaced(trusted):
    with loop_connections() if trusted else nullcontext():
        first = take_again()
    pid = first.info.backend_pid
    connection.close()  # back to the pool, idle
    assert terminate_backends(pid=pid) == 1
    first.agentsite_out_at -= pool_backend.RECENT_SECONDS + 1
    with loop_connections() if trusted else nullcontext():
        connection.ensure_connection()
    assert connection.connection.info.backend_pid != pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_loops_statements_are_prepared_and_a_pages_are_not():
    statement = "SELECT count(*) /* test_db_pool */ FROM runs_run WHERE id = %s"  # its own text on a shared pool

    def prepared_here() -> int:
        with connection.cursor() as cursor:
            for n in range(pool_backend.PREPARE_AFTER + 2):
                cursor.execute(statement, [n])
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%test_db_pool%"])
            return cursor.fetchone()[0]

    take_again()  # a page's thread
    assert connection.connection.prepare_threshold is None
    assert prepared_here() == 0
    with loop_connections():  # the loop's thread, on whichever pooled connection it gets
        take_again()
        assert connection.connection.prepare_threshold == pool_backend.PREPARE_AFTER
        assert prepared_here() == 1
    take_again()
    assert connection.connection.prepare_threshold is None  # a page given that connection next
