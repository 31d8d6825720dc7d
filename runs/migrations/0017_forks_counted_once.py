from django.db import migrations
from django.utils import timezone


def recount_days_of_forks(apps, schema_editor):
    """Rollups built before counted a fork's copies of its parent's work again (its inherited
    iterations, tokens and cost, its copied model and tool calls). The days holding forks are
    marked not built: the metrics page reads them from the runs' rows (exact) until they are
    rebuilt, by `manage.py rebuild_rollups` or a few at a time by the workers' periodic
    `build_rollups` task. A rebuild also corrects the month rows by the day's difference."""
    Run = apps.get_model("runs", "Run")
    RollupDay = apps.get_model("runs", "RollupDay")
    created = Run.objects.filter(forked_at_step__isnull=False).values_list("created_at", flat=True).iterator()
    days = {timezone.localtime(at).date() for at in created}
    RollupDay.objects.filter(day__in=sorted(days), built=True).update(built=False)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_approval_and_month_rollups"),
    ]

    operations = [
        migrations.RunPython(recount_days_of_forks, migrations.RunPython.noop),
    ]
