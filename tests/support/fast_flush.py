"""How transactional tests empty the test database (tests only; manage.py flush is unchanged).

PostgreSQL: DELETE instead of TRUNCATE. A transactional test (every test that drives the loop
through `demo_data`, starts a worker, or opens a browser) ends with Django's flush: on PostgreSQL
one TRUNCATE of all ~70 tables, which gives each table new files and took 0.6-1.2 s a test, about a
third of the PostgreSQL pass. The tables are nearly empty between tests, so a DELETE of each, in
flush's one transaction, empties them in a few milliseconds; Django's foreign keys on PostgreSQL are
DEFERRABLE INITIALLY DEFERRED, so the order does not matter. Sequences are not reset either way
(reset_sequences asks for TRUNCATE's path, kept).

Both databases: the audit log's triggers refuse every UPDATE, DELETE and TRUNCATE of its entries
(audit/migrations/0003_append_only_triggers.py), with no exception an application could use. The
tests' flush lifts them for its own statements only, inside flush's one transaction: on PostgreSQL
ALTER TABLE ... DISABLE TRIGGER USER and ENABLE again (only the table's owner may); on SQLite,
which cannot disable a trigger, it drops them and creates them again from the SQL SQLite stored.
"""
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from django.db.backends.sqlite3.base import DatabaseOperations as SqliteOperations  # .operations first: an import cycle

# Tables whose triggers refuse deleting rows (the tests' flush lifts them, above).
APPEND_ONLY_TABLES = ("audit_auditentry",)

_postgres_flush = PostgresOperations.sql_flush
_sqlite_flush = SqliteOperations.sql_flush


def _delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if reset_sequences or not tables:
        statements = _postgres_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    else:
        statements = [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]
    guarded = [self.quote_name(table) for table in APPEND_ONLY_TABLES if table in tables]
    if not statements or not guarded:
        return statements
    return [*(f"ALTER TABLE {table} DISABLE TRIGGER USER;" for table in guarded), *statements,
            *(f"ALTER TABLE {table} ENABLE TRIGGER USER;" for table in guarded)]


def _sqlite_delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    statements = _sqlite_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    guarded = [table for table in APPEND_ONLY_TABLES if table in tables]
    if not statements or not guarded:
        return statements
    with self.connection.cursor() as cursor:
        placeholders = ", ".join(["%s"] * len(guarded))
        cursor.execute(f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({placeholders})",
                       guarded)
        triggers = cursor.fetchall()
    return [*(f"DROP TRIGGER {self.quote_name(name)};" for name, _sql in triggers), *statements,
            *(f"{sql};" for _name, sql in triggers)]


def install() -> None:
    PostgresOperations.sql_flush = _delete
    SqliteOperations.sql_flush = _sqlite_delete
