"""StepRollup summed over agents (runs/models/rollups.py), filled from the StepRollup rows there
are: the same sums, written together from now on."""

from django.db import migrations, models
from django.db.models import Sum


def fill_from_step_rollups(apps, schema_editor):
    step_rollup = apps.get_model("runs", "StepRollup")
    all_agents = apps.get_model("runs", "AllAgentsStepRollup")
    rows = (
        step_rollup.objects.order_by()
        .values_list("day", "whole_month", "model", "bucket")
        .annotate(n=Sum("steps"))
        .filter(n__gt=0)
        .iterator(chunk_size=5000)
    )
    batch = []
    for day, whole_month, model, bucket, n in rows:
        batch.append(all_agents(day=day, whole_month=whole_month, model=model, bucket=bucket, steps=n))
        if len(batch) == 5000:
            all_agents.objects.bulk_create(batch)
            batch = []
    all_agents.objects.bulk_create(batch)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0029_run_filter_indexes_with_id'),
    ]

    operations = [
        migrations.CreateModel(
            name='AllAgentsStepRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('whole_month', models.BooleanField(default=False)),
                ('model', models.CharField(max_length=200)),
                ('bucket', models.IntegerField()),
                ('steps', models.IntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('day', 'model', 'bucket', 'whole_month'), name='unique_all_agents_step_rollup')],
            },
        ),
        migrations.RunPython(fill_from_step_rollups, migrations.RunPython.noop),
    ]
