"""Ended runs not yet added to the metrics rollups (runs/observability/metrics/counter.py).

A run's ending used to count it in its own transaction; from here on it marks the run and a
counter adds it soon after. Every run that ended before this migration was counted by its
ending, so no run needs a mark here.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0026_run_search_text'),
    ]

    operations = [
        migrations.CreateModel(
            name='UncountedRun',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='runs.run')),
            ],
        ),
    ]
