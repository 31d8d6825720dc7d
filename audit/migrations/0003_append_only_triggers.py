"""The database itself keeps the audit log append-only: triggers refuse every UPDATE and DELETE of an
entry (and, on PostgreSQL, a TRUNCATE of the table), whatever sends it: another manager
(`_base_manager`), a queryset's update(), raw SQL, a script. The model refuses the same through
its default manager first, with a clearer error (audit.models.AppendOnly); here the refusal is an
IntegrityError on both databases. Going back drops the triggers.

There is no switch that lets a session delete: an application could set it. The tests' flush lifts
the triggers as the table's owner, inside its own transaction (tests/support/fast_flush.py).

On SQLite a later migration that rebuilds this table (most field changes do) drops its triggers:
such a migration must create them again (tests/audit/test_append_only_database.py notices).
"""
from django.db import migrations

TABLE = "audit_auditentry"

SQLITE = [
    f"CREATE TRIGGER audit_entry_never_changed BEFORE UPDATE ON {TABLE} "
    "BEGIN SELECT RAISE(ABORT, 'audit entries are never changed'); END",
    f"CREATE TRIGGER audit_entry_never_deleted BEFORE DELETE ON {TABLE} "
    "BEGIN SELECT RAISE(ABORT, 'audit entries are never deleted'); END",
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS audit_entry_never_changed", "DROP TRIGGER IF EXISTS audit_entry_never_deleted"]

POSTGRESQL = [
    # SQLSTATE 23000, so that both databases raise django.db.IntegrityError.
    """CREATE FUNCTION audit_entry_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'audit entries are never changed' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RAISE EXCEPTION 'audit entries are never deleted' USING ERRCODE = 'integrity_constraint_violation';
END
$$""",
    f"CREATE TRIGGER audit_entry_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION audit_entry_append_only()",
    f"CREATE TRIGGER audit_entry_never_truncated BEFORE TRUNCATE ON {TABLE} "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_entry_append_only()",
]
POSTGRESQL_REVERSE = [
    f"DROP TRIGGER IF EXISTS audit_entry_never_truncated ON {TABLE}",
    f"DROP TRIGGER IF EXISTS audit_entry_append_only ON {TABLE}",
    "DROP FUNCTION IF EXISTS audit_entry_append_only()",
]


class RunSQLOn(migrations.RunSQL):
    """RunSQL on one database vendor only."""

    def __init__(self, vendor: str, sql, reverse_sql):
        super().__init__(sql, reverse_sql)
        self.vendor = vendor

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        return name, args, {"vendor": self.vendor, **kwargs}

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0002_alter_auditentry_action"),
    ]

    operations = [
        RunSQLOn("sqlite", SQLITE, SQLITE_REVERSE),
        RunSQLOn("postgresql", POSTGRESQL, POSTGRESQL_REVERSE),
    ]
