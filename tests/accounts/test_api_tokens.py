"""API tokens: stored as hashes, expiring, revocable by their owner and by an admin."""

import hashlib
import importlib
from datetime import timedelta

from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken


def token_from_password(username: str, password: str, **extra) -> str:
    response = APIClient().post("/api/v1/token/", {"username": username, "password": password, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["token"]


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def database_contains(text: str) -> list[str]:
    """Every table.column of the database whose text holds `text`, whatever app made the table."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            columns = connection.introspection.get_table_description(cursor, table)
            for column in columns:
                quoted_table, quoted_column = connection.ops.quote_name(table), connection.ops.quote_name(column.name)
                cursor.execute(f"SELECT {quoted_column} FROM {quoted_table}")
                if any(text in str(value) for (value,) in cursor.fetchall() if value is not None):
                    found.append(f"{table}.{column.name}")
    return found


def test_the_database_keeps_only_a_hash_of_a_token(alice):
    key = token_from_password("alice", "pw-alice")
    assert with_token(key).get("/api/v1/runs/").status_code == 200
    assert database_contains(key) == []
    assert ApiToken.objects.get(user=alice).key_hash == hashlib.sha256(key.encode()).hexdigest()


def test_a_token_expires_after_api_token_days(alice, settings):
    settings.API_TOKEN_DAYS = 30
    key = token_from_password("alice", "pw-alice")
    token = ApiToken.objects.get(user=alice)
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    client = with_token(key)
    assert client.get("/api/v1/runs/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # 30 days later
    response = client.get("/api/v1/runs/")
    assert response.status_code == 401 and response.json()["detail"] == "Token has expired."


def test_tokens_never_expire_only_when_the_operator_says_so(alice, settings):
    settings.API_TOKEN_DAYS = 0
    token_from_password("alice", "pw-alice")
    assert ApiToken.objects.get(user=alice).expires_at is None


def test_owners_list_create_and_revoke_their_tokens(alice, bob):
    session = APIClient()
    session.force_login(alice)
    created = session.post("/api/v1/tokens/", {"name": "nightly export", "days": 7}, format="json")
    assert created.status_code == 201
    key, token_id = created.json()["token"], created.json()["id"]
    other_key = token_from_password("alice", "pw-alice")
    assert key.startswith(created.json()["prefix"])
    listed = session.get("/api/v1/tokens/").json()
    assert [t["name"] for t in listed] == ["from password", "nightly export"]
    assert all("token" not in t and "key_hash" not in t for t in listed)

    revoked = session.post(f"/api/v1/tokens/{token_id}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = with_token(key).get("/api/v1/runs/")
    assert response.status_code == 401 and response.json()["detail"] == "Token has been revoked."
    assert with_token(other_key).get("/api/v1/runs/").status_code == 200
    assert session.post(f"/api/v1/tokens/{token_id}/revoke/").status_code == 409

    bobs = APIClient()
    bobs.force_login(bob)
    assert bobs.get("/api/v1/tokens/").json() == []
    assert bobs.post(f"/api/v1/tokens/{token_id}/revoke/").status_code == 404


def test_a_token_cannot_mint_tokens_or_outlive_the_lifetime(alice, settings):
    settings.API_TOKEN_DAYS = 30
    client = with_token(token_from_password("alice", "pw-alice"))
    response = client.post("/api/v1/tokens/", {"name": "successor"}, format="json")
    assert response.status_code == 403 and "session" in response.json()["detail"]
    assert client.post(f"/api/v1/tokens/{ApiToken.objects.get().pk}/revoke/").status_code == 200  # may revoke itself
    session = APIClient()
    session.force_login(alice)
    too_long = session.post("/api/v1/tokens/", {"days": 31}, format="json")
    assert too_long.status_code == 400 and too_long.json()["detail"] == "days: At most 30 days."


def test_a_deactivated_user_s_token_stops_working(alice):
    client = with_token(token_from_password("alice", "pw-alice"))
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert client.get("/api/v1/runs/").status_code == 401


def test_admins_see_tokens_read_only_and_revoke_them(alice, client):
    key = token_from_password("alice", "pw-alice")
    token = ApiToken.objects.get()
    client.force_login(User.objects.create_superuser("root", "root@localhost", "unused-password-1"))
    page = client.get("/admin/accounts/apitoken/").content.decode()
    assert token.prefix in page and key not in page and token.key_hash not in page
    assert client.get("/admin/accounts/apitoken/add/").status_code == 403
    response = client.post(
        "/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    assert "1 token(s) revoked." in response.content.decode()
    assert with_token(key).get("/api/v1/runs/").status_code == 401
    assert ApiToken.objects.filter(pk=token.pk).exists()  # revoked, not deleted: the record stays


def test_the_command_line_prints_a_working_key_once(alice, capsys):
    call_command("create_api_token", "alice", "--name", "ci", "--days", "3")
    key = capsys.readouterr().out.strip()
    assert with_token(key).get("/api/v1/runs/").status_code == 200
    assert ApiToken.objects.get().name == "ci"


OLD_TABLE_SQL = (
    'CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, created timestamp NOT NULL, user_id integer NOT NULL)'
)


def test_plain_tokens_from_before_the_upgrade_are_hashed_and_keep_working(alice, settings):
    """The data migration, run on a database that still has DRF's plain token table."""
    settings.API_TOKEN_DAYS = 30
    old_key = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
    migration = importlib.import_module("accounts.migrations.0002_import_authtoken_tokens")
    with connection.cursor() as cursor:
        cursor.execute(OLD_TABLE_SQL)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                'INSERT INTO authtoken_token ("key", created, user_id) VALUES (%s, %s, %s)',
                [old_key, timezone.now(), alice.pk],
            )
        with connection.schema_editor() as editor:
            migration.import_authtoken_tokens(apps, editor)
        assert database_contains(old_key) == []
        assert with_token(old_key).get("/api/v1/runs/").status_code == 200
        assert ApiToken.objects.get().expires_at - timezone.now() > timedelta(days=29)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token")
