import django.db.models.deletion
from django.db import migrations, models


def from_agent_names(apps, schema_editor):
    """Decisions archived before this column belong to the project of the agent that has their
    agent's name today. That is the best there is to go on: a decision whose agent was renamed or
    deleted since keeps no project, and only people who see every project see it."""
    ArchivedApproval = apps.get_model("runs", "ArchivedApproval")
    Agent = apps.get_model("runs", "Agent")
    ArchivedApproval.objects.filter(project__isnull=True).update(
        project=models.Subquery(Agent.objects.filter(name=models.OuterRef("agent_name")).values("project")[:1])
    )


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0003_chat_channel'),
        ('runs', '0042_budget_scope_label'),
    ]

    operations = [
        migrations.AddField(
            model_name='archivedapproval',
            name='project',
            field=models.ForeignKey(help_text="The project of the run when it was archived: only its people see the decision.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.project'),
        ),
        migrations.RunPython(from_agent_names, migrations.RunPython.noop),
    ]
