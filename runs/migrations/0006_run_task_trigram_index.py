"""A trigram index for the history page's text search on PostgreSQL.

The search is `task__icontains`, which Django writes as UPPER(task::text) LIKE UPPER('%...%'):
no B-tree index can serve a pattern with a leading wildcard, so without this every search reads
the whole table. A GIN index with pg_trgm's operator class on that same expression can. SQLite
has no such index; there the migration does nothing. Where the pg_trgm extension cannot be
created (it ships with PostgreSQL's contrib, and is trusted from PostgreSQL 13, so a database
owner may create it), the search keeps working without the index and a warning says why.
"""
import logging

from django.db import migrations, transaction

log = logging.getLogger(__name__)

INDEX = "runs_run_task_trgm"


def create_index(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except Exception as exc:  # noqa: BLE001 - an optional speed-up must not stop a deployment
        log.warning("pg_trgm is not available (%s); the history text search will scan the runs table", exc)
        return
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON runs_run USING gin ((UPPER(task::text)) gin_trgm_ops)")


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0005_budget_alerts")]

    operations = [migrations.RunPython(create_index, drop_index)]
