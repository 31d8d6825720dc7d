"""On SQLite the threads that drive runs share their connections while they wait
(hosting/sqlite/base.py): a worker with hundreds of runs in flight holds about as many
connections as threads working at once, not one per run."""

import threading

import pytest
from django.db import connection

from hosting.sqlite import base as sqlite_backend
from runs.engine.storage.db import loop_connections, release_db_connection
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the shelf of idle connections: SQLite")


def database() -> str:
    return str(connection.settings_dict["NAME"])


def test_a_driving_thread_hands_its_connection_to_the_shelf_and_takes_one_back():
    with loop_connections():
        connection.ensure_connection()
        raw = connection.connection
        before = sqlite_backend.shelved(database())
        release_db_connection()  # it waits on a model
        assert connection.connection is None and sqlite_backend.shelved(database()) == before + 1
        assert Run.objects.count() == 0  # it needs one again: the shelf's, set up already
        assert connection.connection is raw and sqlite_backend.shelved(database()) == before


def test_a_page_thread_keeps_and_closes_its_own():
    before = sqlite_backend.shelved(database())
    connection.ensure_connection()
    release_db_connection()
    assert connection.connection is not None  # not released: only the loop waits this way
    connection.close()
    assert sqlite_backend.shelved(database()) == before


def test_many_runs_waiting_at_once_hold_as_many_connections_as_threads_working():
    """Forty threads that each read, wait (as on a model) and read again, a few at a time:
    the connections opened are those of the threads working at once, plus the shelf."""
    opened, lock, working = [], threading.Lock(), threading.Semaphore(4)
    original = sqlite_backend.base.DatabaseWrapper.get_new_connection

    def counted(self, conn_params):
        with lock:
            opened.append(1)
        return original(self, conn_params)

    sqlite_backend.base.DatabaseWrapper.get_new_connection = counted
    errors = []

    def run_like():
        try:
            with loop_connections():
                for _ in range(3):
                    with working:
                        Run.objects.count()
                        release_db_connection()
                    threading.Event().wait(0.01)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    try:
        threads = [threading.Thread(target=run_like) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        sqlite_backend.base.DatabaseWrapper.get_new_connection = original
    assert not errors
    assert len(opened) <= 4 + 2, f"{len(opened)} connections opened for 40 runs, 4 working at once"


def test_a_connection_closed_under_the_driver_is_dropped_not_shelved_or_handed_out():
    """Something closed the sqlite3 connection (a fault, a test's cut): releasing it does not
    raise, it never reaches the shelf, and a closed one already there is skipped."""
    with loop_connections():
        connection.ensure_connection()
        connection.connection.close()
        before = sqlite_backend.shelved(database())
        release_db_connection()  # would raise "Cannot operate on a closed database"
        assert connection.connection is None and sqlite_backend.shelved(database()) == before

        connection.ensure_connection()
        dead = connection.connection
        release_db_connection()
        dead.close()  # it dies on the shelf
        assert Run.objects.count() == 0, "a new connection answers"
        assert connection.connection is not dead
        release_db_connection()
