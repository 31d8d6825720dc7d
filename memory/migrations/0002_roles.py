"""Everyone who sees runs reads agents' memories; admins edit and delete facts (runs/roles.py)."""
from django.db import migrations

from runs.roles import roles_migrate


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial"), ("runs", "0031_run_models_and_tools_used")]
    operations = [migrations.RunPython(roles_migrate, migrations.RunPython.noop)]
