"""Each run's models and tools on the run itself (Run.models_used, Run.tools_used), kept by the
database: a trigger on each step and tool call inserted adds its name when the run does not hold
it yet, whichever code inserts it (the loop, a summary, a fork's copies, an import). The runs
there are get theirs from their steps and calls here."""

from django.db import migrations, models

# (trigger, table, its name column, the run's column)
NAMES = [
    ("runs_step_model_used", "runs_step", "model", "models_used"),
    ("runs_toolcall_tool_used", "runs_toolcall", "tool_name", "tools_used"),
]


def postgresql(trigger: str, table: str, name: str, column: str) -> list[str]:
    return [
        f"""CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE runs_run SET {column} = CASE WHEN {column} = '' THEN E'\\n' ELSE {column} END || NEW.{name} || E'\\n'
            WHERE id = NEW.run_id AND strpos({column}, E'\\n' || NEW.{name} || E'\\n') = 0;
            RETURN NULL;
        END $$""",
        f"CREATE TRIGGER {trigger} AFTER INSERT ON {table} FOR EACH ROW WHEN (NEW.{name} <> '') "
        f"EXECUTE FUNCTION {trigger}()",
        f"""UPDATE runs_run SET {column} = found.names FROM (
            SELECT run_id, E'\\n' || string_agg(DISTINCT {name}, E'\\n') || E'\\n' AS names
            FROM {table} WHERE {name} <> '' GROUP BY run_id
        ) AS found WHERE found.run_id = runs_run.id""",
    ]


def sqlite(trigger: str, table: str, name: str, column: str) -> list[str]:
    return [
        f"""CREATE TRIGGER {trigger} AFTER INSERT ON {table} WHEN NEW.{name} <> '' BEGIN
            UPDATE runs_run SET {column} = CASE WHEN {column} = '' THEN char(10) ELSE {column} END || NEW.{name} || char(10)
            WHERE id = NEW.run_id AND instr({column}, char(10) || NEW.{name} || char(10)) = 0;
        END""",
        f"""UPDATE runs_run SET {column} = coalesce((
            SELECT char(10) || group_concat({name}, char(10)) || char(10)
            FROM (SELECT DISTINCT {name} FROM {table} WHERE run_id = runs_run.id AND {name} <> '')
        ), '')""",
    ]


def create_triggers(apps, schema_editor):
    build = postgresql if schema_editor.connection.vendor == "postgresql" else sqlite
    for names in NAMES:
        for statement in build(*names):
            schema_editor.execute(statement)


def drop_triggers(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    for trigger, table, _name, _column in NAMES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {trigger}" + (f" ON {table}" if postgres else ""))
        if postgres:
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {trigger}()")


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0030_all_agents_step_rollup'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='models_used',
            field=models.TextField(blank=True, default='', editable=False),
        ),
        migrations.AddField(
            model_name='run',
            name='tools_used',
            field=models.TextField(blank=True, default='', editable=False),
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
