"""The run timeline websocket on the real ASGI stack and the channels-redis layer."""

import asyncio
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client

from agentsite.asgi import application
from runs.engine.storage.events import event_at, event_record, publish
from runs.models import RunEvent
from tests.support.channel_layer import fresh_channel_layer

LOCAL = b"http://localhost"
LOCAL_HOST = b"localhost"  # the Host a page of LOCAL opens its sockets at
TIMEOUT = 10


@pytest.fixture
def session_cookie(demo_data):
    """session_cookie(group or None) -> a cookie header value of a signed-in user."""

    def make(group=None, name="vera"):
        user = User.objects.create_user(name)
        if group:
            user.groups.add(Group.objects.get(name=group))
        client = Client()
        client.force_login(user)
        return f"sessionid={client.cookies['sessionid'].value}"

    return make


async def publisher_flushed():
    """Wait until everything published so far has reached the channel layer.

    Events are published from one background thread in order, after their commit: once a marker
    published now arrives, no earlier event can still turn up as a "live" surprise in a test.
    The marker is received on a layer instance of its own, not the process's shared one (see
    fresh_channel_layer).
    """
    layer = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
    channel = await layer.new_channel()
    group = f"test-flush-{uuid.uuid4().hex}"
    await layer.group_add(group, channel)
    try:
        publish(group, {"type": "flush"})
        await asyncio.wait_for(layer.receive(channel), TIMEOUT)
    finally:
        await layer.group_discard(group, channel)
        await layer.close_pools()


@pytest.fixture
def finished_run(launch):
    fresh_channel_layer()
    run = launch()  # the weather task: several steps, calls and run events
    assert run.events.count() >= 5
    async_to_sync(publisher_flushed)()
    yield run
    fresh_channel_layer()


def communicator(run_id, cookie=None, origin=LOCAL):
    headers = [(b"origin", origin), (b"host", LOCAL_HOST)]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)


def stored(run_id, after=0):
    return [
        {"type": "event", "seq": e.seq, "kind": e.kind, "data": e.data, "at": event_at(e.created_at)}
        for e in RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")
    ]


async def replay(ws, after):
    """Send a resume; return the events received until the end-of-replay marker."""
    await ws.send_json_to({"type": "resume", "after": after})
    events = []
    while True:
        message = await ws.receive_json_from(timeout=TIMEOUT)
        if message["type"] == "resumed":
            return events, message
        events.append(message)


@database_sync_to_async
def record_committed(run_id, kind="verification", data=None):
    with transaction.atomic():
        event = event_record(run_id=run_id, kind=kind, data=data or {"ok": False, "reason": "test"})
    return {"type": "event", "seq": event.seq, "kind": event.kind, "data": event.data, "at": event_at(event.created_at)}


def refused(run_id, cookie=None, origin=LOCAL) -> bool:
    async def go():
        ws = communicator(run_id, cookie, origin)
        connected, _ = await ws.connect(timeout=TIMEOUT)
        await ws.disconnect()
        return not connected

    return async_to_sync(go)()


def test_unauthenticated_connection_is_refused(finished_run):
    assert refused(finished_run.pk)


def test_foreign_origin_is_refused(finished_run, session_cookie):
    cookie = session_cookie("viewers")
    assert refused(finished_run.pk, cookie, origin=b"http://evil.example")
    assert not refused(finished_run.pk, cookie)


def test_user_without_view_permission_is_refused(finished_run, session_cookie):
    assert refused(finished_run.pk, session_cookie(None))


def test_unknown_run_is_refused(finished_run, session_cookie):
    assert refused(finished_run.pk + 1000, session_cookie("viewers"))


def test_viewer_reads_the_whole_timeline(finished_run, session_cookie):
    cookie = session_cookie("viewers")
    expected = stored(finished_run.pk)

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        events, end = await replay(ws, 0)
        await ws.disconnect()
        return events, end

    events, end = async_to_sync(go)()
    assert events == expected
    assert [e["seq"] for e in events] == list(range(1, len(expected) + 1))
    assert {"run", "step"} <= {e["kind"] for e in events}
    assert end == {"type": "resumed", "last": expected[-1]["seq"]}


def test_resume_after_n_replays_exactly_the_later_events(finished_run, session_cookie):
    cookie = session_cookie("viewers")
    n = 3
    expected = stored(finished_run.pk, after=n)
    assert expected

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        events, end = await replay(ws, n)
        nothing_else = await ws.receive_nothing(timeout=0.5)
        past_the_end = await replay(ws, expected[-1]["seq"])
        await ws.disconnect()
        return events, end, nothing_else, past_the_end

    events, end, nothing_else, past_the_end = async_to_sync(go)()
    assert events == expected
    assert end["last"] == expected[-1]["seq"]
    assert nothing_else
    assert past_the_end == ([], {"type": "resumed", "last": expected[-1]["seq"]})


@pytest.mark.parametrize("bad", [-1, "3", 2.5, True, None, 2**60])
def test_bad_resume_gets_an_error_and_the_socket_stays_open(finished_run, session_cookie, bad):
    cookie = session_cookie("viewers")

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await ws.send_json_to({"type": "resume", "after": bad})
        error = await ws.receive_json_from(timeout=TIMEOUT)
        await ws.send_to(text_data="not json")
        not_json = await ws.receive_json_from(timeout=TIMEOUT)
        events, _ = await replay(ws, 0)
        await ws.disconnect()
        return error, not_json, events

    error, not_json, events = async_to_sync(go)()
    assert error["type"] == "error" and "after" in error["message"]
    assert not_json["type"] == "error"
    assert events == stored(finished_run.pk)


def test_live_event_reaches_a_connected_client(finished_run, session_cookie):
    cookie = session_cookie("viewers")

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await replay(ws, 0)
        sent = await record_committed(finished_run.pk)
        received = await ws.receive_json_from(timeout=TIMEOUT)
        await ws.disconnect()
        return sent, received

    sent, received = async_to_sync(go)()
    assert received == sent
    assert received["seq"] == RunEvent.objects.filter(run=finished_run).count()


def test_event_of_a_rolled_back_transaction_is_never_sent(finished_run, session_cookie):
    cookie = session_cookie("viewers")

    @database_sync_to_async
    def record_then_roll_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            event_record(run_id=finished_run.pk, kind="verification", data={"ok": False, "reason": "rolled back"})
            raise RuntimeError

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await replay(ws, 0)
        await record_then_roll_back()
        silent = await ws.receive_nothing(timeout=1)
        await ws.disconnect()
        return silent

    assert async_to_sync(go)()


def test_reconnect_with_last_seq_gets_exactly_the_missed_events(finished_run, session_cookie):
    cookie = session_cookie("viewers")
    total = RunEvent.objects.filter(run=finished_run).count()

    async def go():
        first = communicator(finished_run.pk, cookie)
        assert (await first.connect(timeout=TIMEOUT))[0]
        seen, _ = await replay(first, 0)
        await first.disconnect()
        last = seen[-1]["seq"]
        # While the client is away, the run goes on.
        missed = [
            await record_committed(finished_run.pk, data={"ok": False, "reason": f"missed {i}"}) for i in range(3)
        ]
        await publisher_flushed()  # published while nobody listened: only the replay can bring them
        second = communicator(finished_run.pk, cookie)
        assert (await second.connect(timeout=TIMEOUT))[0]
        events, end = await replay(second, last)
        nothing_else = await second.receive_nothing(timeout=0.5)
        await second.disconnect()
        return last, missed, events, end, nothing_else

    last, missed, events, end, nothing_else = async_to_sync(go)()
    assert last == total
    assert events == missed
    assert [e["seq"] for e in events] == [total + 1, total + 2, total + 3]
    assert end["last"] == total + 3
    assert nothing_else
