"""Facts and their reads, and the full-text index over the facts' text.

SQLite: an FTS5 table with the facts' text as external content (the rows stay in memory_memory
alone), kept in step by triggers on insert, update and delete. PostgreSQL: a GIN index on
to_tsvector('simple', COALESCE(text, '')), the expression memory/search.py matches with (the
COALESCE is how Django's SearchVector writes it; an index on another expression would not serve it).
"""
import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FTS = "memory_memory_fts"
TABLE = "memory_memory"
PG_INDEX = "memory_memory_text_fts"

SQLITE_SQL = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, content='{TABLE}', content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    f"CREATE TRIGGER {TABLE}_fts_ai AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.id, new.text); END",
    f"CREATE TRIGGER {TABLE}_fts_ad AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.id, old.text); END",
    f"CREATE TRIGGER {TABLE}_fts_au AFTER UPDATE OF text ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.id, old.text); "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.id, new.text); END",
]


def create_index(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for statement in SQLITE_SQL:
                cursor.execute(statement)
        elif connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON {TABLE} "
                "USING gin (to_tsvector('simple'::regconfig, COALESCE(text, '')))"
            )


def drop_index(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for name in ("ai", "ad", "au"):
                cursor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_fts_{name}")
            cursor.execute(f"DROP TABLE IF EXISTS {FTS}")
        elif connection.vendor == "postgresql":
            cursor.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")



class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('runs', '0031_run_models_and_tools_used'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Memory',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('customer', models.CharField(blank=True, max_length=100)),
                ('text', models.TextField(validators=[django.core.validators.MinLengthValidator(3), django.core.validators.MaxLengthValidator(1000)])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('idempotency_key', models.CharField(blank=True, editable=False, max_length=64)),
                ('written_in_run', models.BigIntegerField(blank=True, help_text="The run's number, kept after pruning.", null=True)),
                ('written_at_step', models.PositiveIntegerField(blank=True, null=True)),
                ('approved_by_name', models.CharField(blank=True, help_text='Who or what approved the save; empty: the tool asked nobody.', max_length=200)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='runs.agent')),
                ('edited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('written_by_call', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.toolcall')),
                ('written_by_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.run')),
            ],
            options={
                'verbose_name_plural': 'memories',
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='MemoryRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('call_key', models.CharField(blank=True, max_length=64)),
                ('read_at', models.DateTimeField(auto_now_add=True)),
                ('call', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.toolcall')),
                ('memory', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reads', to='memory.memory')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
            ],
            options={
                'ordering': ['-read_at', '-pk'],
            },
        ),
        migrations.AddIndex(
            model_name='memory',
            index=models.Index(fields=['agent', 'customer', '-created_at'], name='memory_scope_created'),
        ),
        migrations.AddConstraint(
            model_name='memory',
            constraint=models.UniqueConstraint(condition=models.Q(('idempotency_key', ''), _negated=True), fields=('idempotency_key',), name='memory_unique_idempotency_key'),
        ),
        migrations.AddIndex(
            model_name='memoryread',
            index=models.Index(fields=['memory', '-read_at'], name='memory_read_latest'),
        ),
        migrations.RunPython(create_index, drop_index),
    ]
