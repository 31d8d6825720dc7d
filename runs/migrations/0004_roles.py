"""Roles as groups: viewers read everything; operators also launch and cancel runs and decide
approvals; admins also manage agents and tools."""
from django.db import migrations

from runs.roles import roles_migrate


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_permissions_and_indexes"),
        ("toolsapp", "0002_demo_tools"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(roles_migrate, migrations.RunPython.noop)]
