"""The test database is emptied with DELETE instead of TRUNCATE on PostgreSQL, tests only.

A transactional test (every test that drives the loop through `demo_data`, starts a worker, or
opens a browser) ends with Django's flush: on PostgreSQL one TRUNCATE of all ~70 tables, which
gives each table new files and took 0.6-1.2 s a test, about a third of the PostgreSQL pass. The
tables are nearly empty between tests, so a DELETE of each, in flush's one transaction, empties
them in a few milliseconds; Django's foreign keys on PostgreSQL are DEFERRABLE INITIALLY
DEFERRED, so the order does not matter. Sequences are not reset either way (reset_sequences
asks for TRUNCATE's path, kept). The application's own flush (manage.py flush) is unchanged.
"""
from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush


def _delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if reset_sequences or not tables:
        return _truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


def install() -> None:
    DatabaseOperations.sql_flush = _delete
