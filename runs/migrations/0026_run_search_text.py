"""The history's search over answers and tool results (runs/lifecycle/run_search.py).

One RunSearchText row per ended run, and an index for substring search over it: on SQLite an
FTS5 table with the trigram tokenizer (SQLite 3.34+), kept in step with the rows by triggers; on
PostgreSQL a pg_trgm GIN index on the text, stored upper case (search_form) so a search is a plain
LIKE (without pg_trgm the search works, reading every row). The
runs that have ended already get their rows here, a thousand at a time.
"""
import logging

import django.db.models.deletion
from django.db import migrations, models, transaction
from django.db.models.functions import Substr

log = logging.getLogger(__name__)

FTS = "runs_runsearchtext_fts"
TABLE = "runs_runsearchtext"
PG_INDEX = "runs_runsearchtext_trgm"
# As runs/lifecycle/run_search.py has them now, stored upper case as its search_form does (a
# migration keeps its own copy).
ANSWER_CHARS, RESULT_CHARS, RESULTS = 4000, 400, 40
FINISHED = ("succeeded", "failed", "cancelled")
BATCH = 1000

SQLITE_SQL = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, content='{TABLE}', content_rowid='run_id', tokenize='trigram')",
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.run_id, new.text); END",
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.run_id, old.text); END",
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.run_id, old.text); "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.run_id, new.text); END",
]


def create_index(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            for statement in SQLITE_SQL:
                cursor.execute(statement)
    elif connection.vendor == "postgresql":
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except Exception as exc:  # noqa: BLE001 - an optional speed-up must not stop a deployment
            log.warning("pg_trgm is not available (%s); the history search of answers reads every row", exc)
            return
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON {TABLE} USING gin (text gin_trgm_ops)")


def drop_index(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for name in ("ai", "ad", "au"):
                cursor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{name}")
            cursor.execute(f"DROP TABLE IF EXISTS {FTS}")
        elif connection.vendor == "postgresql":
            cursor.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")


def backfill(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    ToolCall = apps.get_model("runs", "ToolCall")
    RunSearchText = apps.get_model("runs", "RunSearchText")
    after = 0
    while True:
        runs = list(Run.objects.filter(pk__gt=after, status__in=FINISHED).order_by("pk")
                    .values_list("pk", Substr("answer", 1, ANSWER_CHARS))[:BATCH])
        if not runs:
            return
        results: dict[int, list[str]] = {}
        calls = (ToolCall.objects.filter(run_id__in=[pk for pk, _ in runs]).exclude(result_text="").order_by("run_id", "pk")
                 .values_list("run_id", Substr("result_text", 1, RESULT_CHARS)))
        for run_id, text in calls:
            kept = results.setdefault(run_id, [])
            if len(kept) < RESULTS:
                kept.append(text)
        RunSearchText.objects.bulk_create(
            [RunSearchText(run_id=pk, text="\n".join([answer or "", *results.get(pk, [])]).upper()) for pk, answer in runs],
            ignore_conflicts=True,
        )
        after = runs[-1][0]


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0025_webhooks'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunSearchText',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='search_text', serialize=False, to='runs.run')),
                ('text', models.TextField()),
            ],
        ),
        migrations.RunPython(create_index, drop_index),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
