"""The webhooks settings page: admins add a receiver (its address checked at once), send it a
test through the real delivery path, see each delivery's status, and remove it; notifications
go to the page's receivers as well as WEBHOOK_URLS."""
import json

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from runs.models import Webhook, WebhookDelivery
from runs.notifications.webhooks import notify, webhook_urls
from tests.notifications.test_notifications import Receiver, eager_tasks  # noqa: F401 - a fixture


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def admin(demo_data):
    user = User.objects.create_user("ada")
    user.groups.add(Group.objects.get(name="admins"))
    return user


@pytest.mark.usefixtures("eager_tasks")
def test_an_admin_adds_a_receiver_sends_it_a_test_and_sees_it_delivered(client, admin, settings, receiver):
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{receiver.port}"]
    client.force_login(admin)
    page = reverse("webhook_settings")
    response = client.post(page, {"url": receiver.url, "description": "the on-call channel"})
    assert response.status_code == 302
    webhook = Webhook.objects.get()
    assert (webhook.url, webhook.description, webhook.created_by) == (receiver.url, "the on-call channel", admin)
    with_commit = client.post(reverse("webhook_test", args=[webhook.pk]))
    assert with_commit.status_code == 302
    [delivery] = WebhookDelivery.objects.filter(url=receiver.url)
    assert (delivery.event, delivery.status) == ("webhook.test", WebhookDelivery.Status.DELIVERED)
    assert [event["event"] for event in receiver.events()] == ["webhook.test"]
    assert receiver.events()[0]["by"] == "ada"
    listed = client.get(page).content.decode()
    assert receiver.url in listed and "webhook.test" in listed and "Delivered" in listed


def test_a_private_address_and_a_second_copy_are_refused_with_the_reason(client, admin, settings):
    settings.OUTBOUND_ALLOWLIST = []
    client.force_login(admin)
    page = reverse("webhook_settings")
    refused = client.post(page, {"url": "http://127.0.0.1:9/hook"}).content.decode()
    assert "Refused:" in refused and not Webhook.objects.exists()
    Webhook.objects.create(url="https://hooks.example.com/a")
    again = client.post(page, {"url": "https://hooks.example.com/a"}).content.decode()
    assert "registered already" in again and Webhook.objects.count() == 1
    assert "only http and https URLs are allowed" in client.post(page, {"url": "ftp://files.example.com/x"}).content.decode()
    assert Webhook.objects.count() == 1


def test_notifications_go_to_enabled_receivers_and_the_environments_once_each(demo_data, settings):
    settings.WEBHOOK_URLS = ["https://a.example.com/hook", "https://b.example.com/hook"]
    Webhook.objects.create(url="https://b.example.com/hook")  # also in the environment: once
    Webhook.objects.create(url="https://c.example.com/hook")
    Webhook.objects.create(url="https://d.example.com/hook", enabled=False)
    assert webhook_urls() == ["https://a.example.com/hook", "https://b.example.com/hook", "https://c.example.com/hook"]
    notify("budget.alert", {"agent": "x"})
    assert sorted(WebhookDelivery.objects.values_list("url", flat=True)) == [
        "https://a.example.com/hook", "https://b.example.com/hook", "https://c.example.com/hook"]
    assert json.loads(json.dumps(WebhookDelivery.objects.first().body))["event"] == "budget.alert"


def test_removing_keeps_past_deliveries_and_only_admins_reach_the_page(client, admin, demo_data):
    webhook = Webhook.objects.create(url="https://hooks.example.com/a")
    WebhookDelivery.objects.create(url=webhook.url, event="budget.alert", body={})
    operator = User.objects.create_user("otto")
    operator.groups.add(Group.objects.get(name="operators"))
    client.force_login(operator)
    assert client.get(reverse("webhook_settings")).status_code == 403
    assert client.post(reverse("webhook_delete", args=[webhook.pk])).status_code == 403
    client.force_login(admin)
    assert client.get(reverse("webhook_delete", args=[webhook.pk])).status_code == 405  # a GET removes nothing
    assert client.post(reverse("webhook_delete", args=[webhook.pk])).status_code == 302
    assert not Webhook.objects.exists() and WebhookDelivery.objects.count() == 1


def test_an_admin_turns_a_receiver_off_and_on_and_an_off_one_gets_nothing_new(client, admin, demo_data):
    webhook = Webhook.objects.create(url="https://hooks.example.com/b", description="on-call")
    operator = User.objects.create_user("otto")
    operator.groups.add(Group.objects.get(name="operators"))
    client.force_login(operator)
    assert client.post(reverse("webhook_switch", args=[webhook.pk]), {"enabled": "false"}).status_code == 403
    assert Webhook.objects.get().enabled
    client.force_login(admin)
    assert client.get(reverse("webhook_switch", args=[webhook.pk])).status_code == 405  # a GET switches nothing
    page = client.post(reverse("webhook_switch", args=[webhook.pk]), {"enabled": "false"}, follow=True)
    assert page.redirect_chain[-1][0] == reverse("webhook_settings") + f"#webhook-{webhook.pk}"
    html = page.content.decode()
    assert "is off: it gets no new notifications" in html and "Off: gets no new notifications" in html
    assert ">Turn on</button>" in html
    assert webhook.url not in webhook_urls() and notify("budget.alert", {}) == []
    client.post(reverse("webhook_switch", args=[webhook.pk]), {"enabled": "true"})
    assert webhook.url in webhook_urls() and len(notify("budget.alert", {})) == 1
    assert Webhook.objects.get().description == "on-call"  # kept, unlike removing it
    assert client.post(reverse("webhook_switch", args=[9999]), {"enabled": "true"}).status_code == 404
