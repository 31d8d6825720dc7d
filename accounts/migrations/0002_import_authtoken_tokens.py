"""Tokens made before hashing (DRF's authtoken table, plain text) move to the hashed table.

They keep working, so scripts do not break on upgrade, but now expire API_TOKEN_DAYS after the
upgrade like any new token, and their plain copies are deleted. The old table itself is left
(empty) for DRF's own migrations; nothing reads it any more.
"""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

OLD_TABLE = "authtoken_token"


def import_authtoken_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return  # a new installation, or authtoken was never migrated
    ApiToken = apps.get_model("accounts", "ApiToken")
    days = settings.API_TOKEN_DAYS
    expires_at = timezone.now() + timedelta(days=days) if days else None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id FROM {OLD_TABLE}")
        rows = cursor.fetchall()
        ApiToken.objects.bulk_create(
            [
                ApiToken(
                    user_id=user_id,
                    name="made before tokens expired",
                    prefix=key[:8],
                    key_hash=hashlib.sha256(key.encode()).hexdigest(),
                    expires_at=expires_at,
                )
                for key, user_id in rows
            ]
        )
        cursor.execute(f"DELETE FROM {OLD_TABLE}")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(import_authtoken_tokens, migrations.RunPython.noop, elidable=True)]
