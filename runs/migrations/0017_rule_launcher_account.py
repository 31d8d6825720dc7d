"""Rules on who launched a run point at an account, not a name.

The name each rule held is resolved to the account of that username (exactly: the loop compared
usernames exactly). A name that matches no account is kept in `launched_by_unresolved`: such a
rule matches no run (it never widens to "anyone") and the editor flags it until an account, or
anyone, is chosen."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def names_to_accounts(apps, schema_editor):
    ApprovalRule = apps.get_model("runs", "ApprovalRule")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    field = getattr(User, "USERNAME_FIELD", "username")
    for rule in ApprovalRule.objects.exclude(launched_by_unresolved=""):
        account = User.objects.filter(**{field: rule.launched_by_unresolved.strip()}).first()
        if account is not None:
            rule.launched_by_id, rule.launched_by_unresolved = account.pk, ""
            rule.save(update_fields=["launched_by", "launched_by_unresolved"])


def accounts_to_names(apps, schema_editor):
    ApprovalRule = apps.get_model("runs", "ApprovalRule")
    field = getattr(apps.get_model(*settings.AUTH_USER_MODEL.split(".")), "USERNAME_FIELD", "username")
    for rule in ApprovalRule.objects.exclude(launched_by=None).select_related("launched_by"):
        rule.launched_by_unresolved = getattr(rule.launched_by, field)
        rule.save(update_fields=["launched_by_unresolved"])


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("runs", "0016_approval_and_month_rollups"),
    ]

    operations = [
        migrations.RenameField(model_name="approvalrule", old_name="launched_by", new_name="launched_by_unresolved"),
        migrations.AddField(
            model_name="approvalrule",
            name="launched_by",
            field=models.ForeignKey(
                blank=True, help_text="Only runs this account launched; empty: any.", null=True,
                on_delete=django.db.models.deletion.PROTECT, related_name="+", to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(names_to_accounts, accounts_to_names),
        migrations.AlterField(
            model_name="approvalrule",
            name="conditions",
            field=models.JSONField(
                blank=True, default=list,
                help_text='All must hold: [{"path": "$.amount", "op": "lt", "value": 50}]. Operators: eq, ne, lt, gt, '
                "in, fullmatch (the whole value, RE2), matches (contains a match, RE2), present, absent.",
            ),
        ),
        migrations.AlterField(
            model_name="approvalrule",
            name="launched_by_unresolved",
            field=models.CharField(
                blank=True, editable=False, max_length=150,
                help_text="A launcher name from before rules named accounts, which matched no account: "
                "the rule matches no run until an account (or anyone) is chosen.",
            ),
        ),
    ]
