import django.db.models.deletion
from django.db import migrations, models


def into_default(apps, schema_editor):
    """The tools and MCP servers there are belong to Default, as everything else: a one-team
    installation changes nothing (its admins keep editing them); a tool is shared by the site
    (no project) only when an administrator says so."""
    project = apps.get_model("projects", "Project").objects.get(slug="default")
    for name in ("tool", "mcpserver"):
        apps.get_model("toolsapp", name).objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0002_default_project'),
        ('toolsapp', '0009_experiments'),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpserver',
            name='project',
            field=models.ForeignKey(blank=True, help_text="The team whose server it is (its tools are that project's); empty: shared by the site.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AddField(
            model_name='tool',
            name='project',
            field=models.ForeignKey(blank=True, help_text="The team whose tool it is; empty: shared by the site, for every project's agents.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.RunPython(into_default, migrations.RunPython.noop),
    ]
