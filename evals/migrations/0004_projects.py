import django.db.models.deletion
from django.db import migrations, models


def into_default(apps, schema_editor):
    """Everything there is belongs to the project "Default" (projects/migrations/0002)."""
    project = apps.get_model("projects", "Project").objects.get(slug="default")
    for name in ['dataset']:
        apps.get_model("evals", name).objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):

    dependencies = [
        ('evals', '0003_snapshots'),
        ('projects', '0002_default_project'),
    ]

    operations = [
        migrations.AddField(
            model_name='dataset',
            name='project',
            field=models.ForeignKey(null=True, help_text="The team whose cases these are; its experiments run this project's agents.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.RunPython(into_default, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='dataset',
            name='project',
            field=models.ForeignKey(help_text="The team whose cases these are; its experiments run this project's agents.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
    ]
