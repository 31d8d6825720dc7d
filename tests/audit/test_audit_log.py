"""The audit log of administration: every change, by whom, through which door and from where,
with before and after and secrets masked; sign-ins, failed sign-ins and tokens used from a new
address; append-only; read by administrators with filters and as JSONL."""
import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from audit.models import AppendOnly, AuditEntry
from runs.lifecycle.agents import agent_save
from runs.models import Agent, Webhook
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api
from toolsapp.models import Tool


@pytest.fixture
def ada(demo_data):
    return make_user("ada", "admins")


def newest(**filters) -> AuditEntry:
    return AuditEntry.objects.filter(**filters).order_by("-pk").first()


def test_an_agent_changed_through_the_api_is_recorded_with_who_before_after_and_secrets_masked(ada):
    agent = Agent.objects.get(name="demo")
    client = api(ada)
    response = client.patch(f"/api/v1/agents/{agent.pk}/", {
        "max_iterations": 7, "provider_options": {"api_key": "sk-very-secret"},
        "tools": ["get_weather"],
    }, format="json", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 200, response.content

    entry = newest(kind="agent", action="updated", after__has_key="max_iterations")
    assert (entry.actor_name, entry.via, entry.address) == ("ada", "api", "203.0.113.9")
    assert entry.before["max_iterations"] == 10 and entry.after["max_iterations"] == 7
    assert entry.after["provider_options"] == "•••• (changed)"
    assert "sk-very-secret" not in json.dumps(list(AuditEntry.objects.values("before", "after", "detail")))
    removed = newest(kind="agent", after__has_key="tools removed")
    assert "cancel_order" in removed.after["tools removed"]


def test_a_token_used_from_a_new_address_is_recorded_once_per_address(ada):
    client = api(ada)
    for address in ("198.51.100.1", "198.51.100.1", "198.51.100.2"):
        assert client.get("/api/v1/runs/", REMOTE_ADDR=address).status_code == 200
    entries = AuditEntry.objects.filter(action="token_new_address").order_by("pk")
    assert [(e.address, e.actor_name, e.via) for e in entries] == [
        ("198.51.100.1", "ada", "api"), ("198.51.100.2", "ada", "api")]


def test_sign_ins_and_failed_sign_ins_are_recorded_never_the_password(ada):
    client = Client(REMOTE_ADDR="192.0.2.5")
    client.post("/login/", {"username": "ada", "password": "wrong-password-123"})
    client.post("/login/", {"username": "nobody", "password": "x"})
    client.post("/login/", {"username": "ada", "password": "pw-ada"})

    failed = list(AuditEntry.objects.filter(action="sign_in_failed").order_by("pk"))
    assert [(e.object_repr, e.detail, e.address) for e in failed] == [
        ("ada", "an existing account", "192.0.2.5"), ("nobody", "no account of that name", "192.0.2.5")]
    signed_in = newest(action="signed_in")
    assert (signed_in.actor_name, signed_in.address, signed_in.detail) == ("ada", "192.0.2.5", "password")
    assert "wrong-password-123" not in json.dumps(list(AuditEntry.objects.values()), default=str)


def test_role_changes_rules_tools_and_webhooks_are_recorded_through_any_door(ada, settings):
    settings.OUTBOUND_ALLOWLIST = ["127.0.0.1:9"]
    victor = make_user("victor", "viewers")
    victor.groups.add(Group.objects.get(name="operators"))
    assert newest(kind="person", object_repr="victor").after == {"groups added": ["operators"]}

    admin = Client()
    admin.force_login(ada)
    admin.post(reverse("webhook_settings"), {"url": "http://127.0.0.1:9/T000/B000/secret-path",
                                             "description": "ops channel"})
    hook = newest(kind="webhook", action="created")
    assert hook is not None and hook.actor_name == "ada" and hook.via == "page"
    assert hook.after["url"] == "http://127.0.0.1/••••"
    Webhook.objects.all().delete()  # by code: the system
    assert newest(kind="webhook", action="deleted").actor_name == ""

    Tool.objects.filter(name="cancel_order").first().delete()
    assert newest(kind="tool", action="deleted").before["name"] == "cancel_order"
    agent_save(agent=None, data={"name": "billing", "system_prompt": "Help."}, user=ada)
    assert newest(kind="agent", action="created").object_repr == "billing"


def test_entries_are_append_only(demo_data):
    entry = AuditEntry.objects.create(action="created", kind="agent", object_repr="x")
    entry.detail = "rewritten"
    with pytest.raises(AppendOnly):
        entry.save()
    with pytest.raises(AppendOnly):
        entry.delete()
    with pytest.raises(AppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).update(detail="rewritten")
    with pytest.raises(AppendOnly):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get(pk=entry.pk).detail == ""


def test_only_administrators_read_the_log_with_filters_and_export(ada):
    make_user("bob", "operators").groups.add(Group.objects.get(name="viewers"))
    for name, group in (("olga", "operators"), ("vic", "viewers")):
        other = Client()
        other.force_login(make_user(name, group))
        assert other.get(reverse("audit_list")).status_code == 403
        assert other.get(reverse("audit_export")).status_code == 403
    assert Client().get(reverse("audit_list")).status_code == 302

    admin = Client()
    admin.force_login(ada)
    page = admin.get(reverse("audit_list"), {"kind": "person", "text": "bob"}).content.decode()
    assert "groups added" in page and "viewers" in page and "get_weather" not in page
    lines = admin.get(reverse("audit_export"), {"kind": "person"}).getvalue().decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows and {row["kind"] for row in rows} == {"person"}
    assert all("password" not in row["after"] or row["after"]["password"].startswith("••••") for row in rows)
    bad = admin.get(reverse("audit_list"), {"since": "not a date"})
    assert bad.status_code == 200 and "Enter a valid date." in bad.content.decode()


def test_a_deleted_account_keeps_its_entries(ada):
    agent = Agent.objects.get(name="demo")
    assert api(ada).patch(f"/api/v1/agents/{agent.pk}/", {"max_iterations": 5}, format="json").status_code == 200
    made = newest(kind="agent", action="updated", actor_name="ada")
    ada.delete()

    kept = AuditEntry.objects.get(pk=made.pk)
    assert (kept.actor_name, kept.actor_id, kept.after) == ("ada", made.actor_id, {"max_iterations": 5})
    assert newest(kind="person", action="deleted").object_repr == "ada"


def test_secrets_in_names_revocations_switches_and_chat_mappings_are_recorded(ada, settings):
    from django.contrib.auth.models import Permission

    from accounts.models import ChatIdentity
    from accounts.services import api_token_create, api_tokens_revoke
    from runs.notifications.webhooks import webhook_switch

    settings.OUTBOUND_ALLOWLIST = ["127.0.0.1:9"]
    admin = Client()
    admin.force_login(ada)
    admin.post(reverse("webhook_settings"), {"url": "http://127.0.0.1:9/services/T0/B0/XXXXSECRET", "description": ""})
    hook = Webhook.objects.get()
    webhook_switch(webhook=hook, enabled=False)
    assert newest(kind="webhook", action="updated").after == {"enabled": False}
    assert "XXXXSECRET" not in json.dumps(list(AuditEntry.objects.values("object_repr", "before", "after")))

    token, _key = api_token_create(user=ada, name="ci")
    api_tokens_revoke(tokens=type(token).objects.filter(pk=token.pk))
    revoked = newest(kind="api token", action="updated")
    assert revoked.object_repr.endswith("of ada") and revoked.after["revoked_at"]

    ChatIdentity.objects.create(user=ada, member_id="U0ADA")
    assert newest(kind="chat identity", action="created").object_repr == "U0ADA → ada"
    ada.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    assert "Can approve or reject destructive calls" in json.dumps(newest(kind="person", object_repr="ada").after)


def test_an_address_the_column_cannot_hold_is_left_out_not_an_error(ada):
    client = Client(REMOTE_ADDR="unknown")
    response = client.post("/login/", {"username": "ada", "password": "pw-ada"})
    assert response.status_code == 302
    assert newest(action="signed_in").address is None
