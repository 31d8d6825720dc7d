import django.db.models.deletion
from django.db import migrations, models


def into_default(apps, schema_editor):
    """Everything there is belongs to the project "Default" (projects/migrations/0002)."""
    project = apps.get_model("projects", "Project").objects.get(slug="default")
    for name in ['agent', 'approvalrule', 'budget', 'webhook']:
        apps.get_model("runs", name).objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0002_default_project'),
        ('runs', '0040_budgets'),
    ]

    operations = [
        migrations.AddField(
            model_name='agent',
            name='project',
            field=models.ForeignKey(null=True, help_text="The team whose agent it is: its runs, approvals and figures are that project's.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AddField(
            model_name='approvalrule',
            name='project',
            field=models.ForeignKey(null=True, help_text="It decides calls of this project's runs only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AddField(
            model_name='budget',
            name='project',
            field=models.ForeignKey(null=True, help_text="It counts this project's runs only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AddField(
            model_name='webhook',
            name='project',
            field=models.ForeignKey(null=True, help_text="It receives this project's notifications only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.RunPython(into_default, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='agent',
            name='project',
            field=models.ForeignKey(help_text="The team whose agent it is: its runs, approvals and figures are that project's.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='approvalrule',
            name='project',
            field=models.ForeignKey(help_text="It decides calls of this project's runs only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='budget',
            name='project',
            field=models.ForeignKey(help_text="It counts this project's runs only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='webhook',
            name='project',
            field=models.ForeignKey(help_text="It receives this project's notifications only.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
    ]
