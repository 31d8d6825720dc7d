"""Everyone who sees runs reads datasets and experiments; operators make cases and run
experiments; admins delete datasets (runs/roles.py)."""
from django.db import migrations

from runs.roles import roles_migrate


class Migration(migrations.Migration):
    dependencies = [("evals", "0001_initial"), ("runs", "0034_experiments"), ("memory", "0002_roles")]
    operations = [migrations.RunPython(roles_migrate, migrations.RunPython.noop)]
