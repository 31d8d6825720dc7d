"""A run's timeline socket opened by someone who may watch, who then may not: every message the
client sends (a resume, a lever, anything else) and live events after a while check the session
and the permission again; when either is gone the socket says so and closes, and sends no event.
On the real ASGI stack and the channels-redis layer."""
import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group, User
from django.test import Client

from runs.web.consumers import rights
from tests.web.websockets import test_consumer_timeline as timeline
from tests.web.websockets.test_consumer_timeline import TIMEOUT, communicator, record_committed, replay, stored

finished_run = timeline.finished_run  # fixture


@pytest.fixture
def vera(demo_data):
    user = User.objects.create_user("vera")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(user)
    return user, client, f"sessionid={client.cookies['sessionid'].value}"


def deactivate_and_remove_from_groups(user, client):
    User.objects.filter(pk=user.pk).update(is_active=False)
    User.objects.get(pk=user.pk).groups.clear()


def remove_from_groups(user, client):
    User.objects.get(pk=user.pk).groups.clear()


def sign_out(user, client):
    client.logout()


def change_password(user, client):
    fresh = User.objects.get(pk=user.pk)
    fresh.set_password("a-new-password-4242")
    fresh.save()


async def received_until_closed(ws) -> tuple[list[dict], dict]:
    """Every JSON message until the server closes the socket, and the close (None if it never does)."""
    messages = []
    while True:
        try:
            output = await ws.receive_output(timeout=TIMEOUT)
        except TimeoutError:
            return messages, None
        if output["type"] == "websocket.close":
            return messages, output
        messages.append(json.loads(output["text"]))


CHANGES = pytest.mark.parametrize(
    "change, error, code",
    [
        (deactivate_and_remove_from_groups, "your session has ended", 4401),
        (sign_out, "your session has ended", 4401),
        (change_password, "your session has ended", 4401),
        (remove_from_groups, "permission denied", 4403),
    ],
    ids=["deactivated-and-ungrouped", "signed-out", "password-changed", "role-removed"],
)
MESSAGES = pytest.mark.parametrize(
    "message",
    [{"type": "resume", "after": 0}, {"type": "lever", "lever": "pause"}, {"type": "hello"}],
    ids=["resume", "lever", "other"],
)


@CHANGES
@MESSAGES
def test_a_viewer_who_lost_the_right_gets_no_event_and_the_socket_closes(
    finished_run, vera, change, error, code, message
):
    user, client, cookie = vera

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await database_sync_to_async(change)(user, client)
        await ws.send_json_to(message)
        messages, closed = await received_until_closed(ws)
        if closed is not None:  # else the communicator stopped the consumer at the timeout
            await ws.disconnect()
        return messages, closed

    messages, closed = async_to_sync(go)()
    assert [m["type"] for m in messages] == ["error"], messages
    assert messages[0]["message"].startswith(error)
    assert closed == {"type": "websocket.close", "code": code}


@CHANGES
def test_a_live_event_is_not_sent_once_the_right_is_gone(finished_run, vera, change, error, code, monkeypatch):
    monkeypatch.setattr(rights, "RIGHTS_RECHECK_SECONDS", 0)  # every live event checks
    user, client, cookie = vera

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await replay(ws, 0)
        await database_sync_to_async(change)(user, client)
        await record_committed(finished_run.pk, data={"ok": False, "reason": "secret tool output"})
        messages, closed = await received_until_closed(ws)
        if closed is not None:  # else the communicator stopped the consumer at the timeout
            await ws.disconnect()
        return messages, closed

    messages, closed = async_to_sync(go)()
    assert [m["type"] for m in messages] == ["error"], messages
    assert messages[0]["message"].startswith(error)
    assert closed == {"type": "websocket.close", "code": code}


def test_a_viewer_who_still_may_watch_keeps_watching(finished_run, vera, monkeypatch):
    monkeypatch.setattr(rights, "RIGHTS_RECHECK_SECONDS", 0)
    _user, _client, cookie = vera

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        first, _ = await replay(ws, 0)
        sent = await record_committed(finished_run.pk)
        live = await ws.receive_json_from(timeout=TIMEOUT)
        again, end = await replay(ws, 0)
        await ws.disconnect()
        return first, sent, live, again

    first, sent, live, again = async_to_sync(go)()
    assert live == sent
    assert again == stored(finished_run.pk) and again[: len(first)] == first
