"""Approval rules in the roles: everyone who sees runs reads rules; admins write them."""
from django.db import migrations

from runs.roles import roles_migrate


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_supervision_rules_votes_grants"),
        ("toolsapp", "0007_tool_always_ask_critical_edits"),
    ]
    operations = [migrations.RunPython(roles_migrate, migrations.RunPython.noop)]
