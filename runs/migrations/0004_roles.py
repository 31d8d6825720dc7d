"""Roles as groups: viewers read everything; operators also launch and cancel runs and decide
approvals; admins also manage agents and tools."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

from runs.roles import ensure_roles

def create_roles(apps, schema_editor):
    for app_config in apps.get_app_configs():  # permissions are normally created after migrate
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_permissions_and_indexes"),
        ("toolsapp", "0002_demo_tools"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
