"""The audit log is append-only in the database itself: an UPDATE or DELETE of an entry is refused
whatever sends it (another manager, a queryset's update, raw SQL), on SQLite and PostgreSQL; a new
entry is still written. Going back past the migration drops the triggers, coming forward makes them."""
import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from audit.models import AuditEntry
from audit.record import entry_write

TRIGGERS = ("audit", "0003_append_only_triggers")


def attempts(entry_id: int) -> dict:
    """Every way past the model's own refusal, each in a transaction of its own."""
    table = connection.ops.quote_name(AuditEntry._meta.db_table)

    def raw(sql):
        def run():
            with connection.cursor() as cursor:
                cursor.execute(sql, [entry_id] if "%s" in sql else None)
        return run

    found = {
        "raw UPDATE": raw(f"UPDATE {table} SET detail = 'rewritten' WHERE id = %s"),
        "raw DELETE": raw(f"DELETE FROM {table} WHERE id = %s"),
        "raw DELETE of all": raw(f"DELETE FROM {table}"),
        "_base_manager update": lambda: AuditEntry._base_manager.filter(pk=entry_id).update(detail="rewritten"),
        "_base_manager delete": lambda: AuditEntry._base_manager.filter(pk=entry_id).delete(),
        "queryset update": lambda: AuditEntry._base_manager.all().update(actor_name="nobody"),
    }
    if connection.vendor == "postgresql":
        found["raw TRUNCATE"] = raw(f"TRUNCATE {table}")
    return found


def refusals(entry_id: int) -> dict[str, str]:
    """{way: the database's refusal, or "allowed" when it went through (rolled back after)}."""
    said = {}
    for way, attempt in attempts(entry_id).items():
        try:
            with transaction.atomic():
                attempt()
                said[way] = "allowed"
                raise _Undo
        except _Undo:
            pass
        except IntegrityError as exc:
            said[way] = str(exc).splitlines()[0]
    return said


class _Undo(Exception):
    pass


@pytest.mark.django_db
def test_the_database_refuses_to_change_or_delete_an_entry_by_any_door():
    entry = entry_write(action=AuditEntry.Action.UPDATED, kind="agent", object_repr="demo", after={"max_iterations": 5})
    said = refusals(entry.pk)
    assert said.pop("raw UPDATE") == "audit entries are never changed"
    assert said.pop("_base_manager update") == said.pop("queryset update") == "audit entries are never changed"
    assert set(said.values()) == {"audit entries are never deleted"}, said
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.detail, kept.actor_name, kept.after) == ("", entry.actor_name, {"max_iterations": 5})
    assert entry_write(action=AuditEntry.Action.CREATED, kind="agent", object_repr="another").pk > entry.pk


@pytest.mark.django_db(transaction=True)
def test_going_back_past_the_migration_drops_the_triggers_and_coming_forward_makes_them():
    executor = MigrationExecutor(connection)
    executor.migrate([("audit", "0002_alter_auditentry_action")])
    try:
        entry = AuditEntry.objects.create(action="created", kind="agent", object_repr="before the triggers")
        assert set(refusals(entry.pk).values()) == {"allowed"}
    finally:
        executor.loader.build_graph()
        executor.migrate([TRIGGERS])
    assert set(refusals(entry.pk).values()) == {"audit entries are never changed", "audit entries are never deleted"}
