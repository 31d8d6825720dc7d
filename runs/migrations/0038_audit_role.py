"""Administrators read the audit log (runs/roles.py)."""
from django.db import migrations

from runs.roles import roles_migrate


class Migration(migrations.Migration):
    dependencies = [("runs", "0037_quorum"), ("audit", "0001_initial"), ("evals", "0002_roles")]
    operations = [migrations.RunPython(roles_migrate, migrations.RunPython.noop)]
