"""A call keeps every decision asked of it: approvals become a list per call, and the call points
at the one that counts. Call ids may be any length a model sends."""
from django.db import migrations, models
import django.db.models.deletion


def point_calls_at_their_approval(apps, schema_editor):
    Approval = apps.get_model("runs", "Approval")
    ToolCall = apps.get_model("runs", "ToolCall")
    for approval_id, call_id in Approval.objects.values_list("pk", "tool_call_id").iterator():
        ToolCall.objects.filter(pk=call_id).update(approval_id=approval_id)


def keep_only_the_current_approval(apps, schema_editor):
    # Going back to one approval per call: the earlier decisions of a call asked again are dropped.
    Approval = apps.get_model("runs", "Approval")
    ToolCall = apps.get_model("runs", "ToolCall")
    current = ToolCall.objects.exclude(approval=None).values_list("approval_id", flat=True)
    Approval.objects.exclude(pk__in=list(current)).delete()


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_run_task_trigram_index")]

    operations = [
        migrations.AlterField(
            model_name="approval",
            name="tool_call",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="approvals", to="runs.toolcall"
            ),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="approval",
            field=models.ForeignKey(
                blank=True, editable=False, null=True, on_delete=django.db.models.deletion.SET_NULL,
                related_name="+", to="runs.approval",
            ),
        ),
        migrations.RunPython(point_calls_at_their_approval, keep_only_the_current_approval),
        migrations.AlterField(
            model_name="toolcall",
            name="call_id",
            field=models.TextField(help_text="The model's id of the call, as sent (any length)."),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="tool_name",
            field=models.CharField(db_index=True, help_text="As the model named it, at most 200 characters.", max_length=200),
        ),
    ]
