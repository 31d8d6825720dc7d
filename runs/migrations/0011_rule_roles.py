"""Approval rules in the roles: everyone who sees runs reads rules; admins write them."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

from runs.roles import ensure_roles


def update_roles(apps, schema_editor):
    for app_config in apps.get_app_configs():  # permissions are normally created after migrate
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_supervision_rules_votes_grants"),
        ("toolsapp", "0007_tool_always_ask_critical_edits"),
    ]
    operations = [migrations.RunPython(update_roles, migrations.RunPython.noop)]
