"""The approvals socket over the real ASGI stack and the channels-redis layer.

pytest-asyncio is not installed: each test's async body runs through `async_to_sync`, and
database work inside it goes through `database_sync_to_async` (the test's own thread).
"""
import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client

from agentsite.asgi import application
from runs.models import Approval, RunEvent
from runs.supervision.approvals.decide import approval_decide
from tests.support.approval_fixtures import make_user, pending_approval
from tests.support.channel_layer import fresh_channel_layer


@pytest.fixture(autouse=True)
def _fresh_layer():
    # Consumers here run on a new event loop per async_to_sync call: see fresh_channel_layer.
    fresh_channel_layer()
    yield
    fresh_channel_layer()


DEMO_TASK = "Cancel order ORD-1001"
PATH = "/ws/approvals/"
LOCAL_ORIGIN = b"http://localhost"
LOCAL_HOST = b"localhost"  # the Host a page of LOCAL_ORIGIN opens its sockets at
# The handshake reads the session and the user from the database; on a loaded CI machine
# that can take longer than the communicator's default second.
CONNECT_TIMEOUT = 10


def headers_for(user: User | None, origin: bytes = LOCAL_ORIGIN) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", origin), (b"host", LOCAL_HOST)]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


def matches(message: dict, kind: str, where: dict) -> bool:
    return message.get("type") == kind and all(message.get(k) == v for k, v in where.items())


async def receive(communicator: WebsocketCommunicator, kind: str, timeout: float = 5.0, **where) -> dict:
    """The next message of type `kind` (with these fields), skipping others.

    Changes are published from a background thread after commit, so one made before this
    socket joined (by this test's setup, or an earlier test) may still arrive: skip it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(f"no {kind!r} message {where or ''} within {timeout} s")
        message = await communicator.receive_json_from(timeout=remaining)
        if matches(message, kind, where):
            return message


async def nothing_of(communicator: WebsocketCommunicator, kind: str, timeout: float = 1.0, **where) -> bool:
    """True when no message of type `kind` (with these fields) arrives within `timeout`.

    Uses receive_nothing: a receive that times out would cancel the consumer.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (remaining := deadline - loop.time()) > 0:
        if await communicator.receive_nothing(timeout=remaining):
            return True
        if matches(await communicator.receive_json_from(), kind, where):
            return False
    return True


def connects(headers) -> bool:
    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        connected, _ = await communicator.connect(timeout=CONNECT_TIMEOUT)
        await communicator.disconnect()
        return connected

    return async_to_sync(body)()


# --- Who may connect ---------------------------------------------------------------------------


def test_anonymous_users_are_refused(demo_data):
    assert connects(headers_for(None)) is False


def test_a_foreign_origin_is_refused(alice):
    assert connects(headers_for(alice, origin=b"http://evil.example")) is False


def test_users_without_view_approval_are_refused(demo_data):
    assert connects(headers_for(make_user("nobody", None))) is False


def test_viewers_and_operators_connect(viewer, alice):
    assert connects(headers_for(viewer)) is True
    assert connects(headers_for(alice)) is True


# --- Decisions over the socket -------------------------------------------------------------------


def test_a_viewers_decision_is_refused_and_changes_nothing(launch, viewer, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))

    headers = headers_for(viewer)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True, "reason": ""})
            reply = await receive(communicator, "error")
        finally:
            await communicator.disconnect()
        return reply

    assert async_to_sync(body)() == {"type": "error", "error": "permission denied"}
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.decided_by is None
    assert not RunEvent.objects.filter(run=approval.run, kind="approval").exists()
    assert no_dispatch == []


def test_an_operators_decision_is_recorded_and_announced(launch, alice, no_dispatch):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)

    headers = headers_for(alice)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await communicator.send_json_to(
                {"type": "decide", "approval_id": approval.pk, "approve": False, "reason": "wrong order"}
            )
            decided = await receive(communicator, "decided")
            changed = await receive(communicator, "approvals.changed", pending=0)
        finally:
            await communicator.disconnect()
        return decided, changed

    decided, changed = async_to_sync(body)()
    assert decided["approval_id"] == approval.pk
    assert decided["approval"]["status"] == Approval.Status.REJECTED and decided["approval"]["decided_by"] == "alice"
    assert changed == {"type": "approvals.changed", "pending": 0, "run_id": run.pk}
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REJECTED and approval.reason == "wrong order"
    assert no_dispatch == [run.pk]


def test_a_late_decision_names_the_winner(launch, alice, bob, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    approval_decide(approval_id=approval.pk, user=alice, approve=True)

    headers = headers_for(bob)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": False, "reason": "no"})
            return await receive(communicator, "error")
        finally:
            await communicator.disconnect()

    reply = async_to_sync(body)()
    assert reply["error"].startswith("already approved by alice at ")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by == alice


def test_malformed_decisions_get_an_error(launch, alice, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))

    headers = headers_for(alice)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        replies = []
        try:
            for message in (
                {"type": "decide", "approval_id": str(approval.pk), "approve": True},
                {"type": "decide", "approval_id": approval.pk, "approve": "yes"},
                {"type": "decide", "approval_id": 999999, "approve": True},
                {"type": "hello"},
            ):
                await communicator.send_json_to(message)
                replies.append((await receive(communicator, "error"))["error"])
        finally:
            await communicator.disconnect()
        return replies

    replies = async_to_sync(body)()
    assert replies[2] == "no such approval" and replies[3] == "unknown message type"
    assert all(replies)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


# --- Change notifications ------------------------------------------------------------------------


def test_a_new_approval_is_announced(launch, viewer):
    headers = headers_for(viewer)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            run = await database_sync_to_async(launch)(DEMO_TASK, approval_policy="ask")
            return run, await receive(communicator, "approvals.changed", run_id=run.pk)
        finally:
            await communicator.disconnect()

    run, changed = async_to_sync(body)()
    assert changed == {"type": "approvals.changed", "pending": 1, "run_id": run.pk}


def test_a_decision_is_announced_after_commit_only(launch, alice, viewer, no_dispatch):
    def decide_then_roll_back(approval_id: int):
        with pytest.raises(RuntimeError), transaction.atomic():
            approval_decide(approval_id=approval_id, user=alice, approve=True)
            raise RuntimeError("roll back")

    headers = headers_for(viewer)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            # Launch with the socket open and take its announcement first, so that nothing
            # from the setup can be mistaken for a leaked one below.
            run = await database_sync_to_async(launch)(DEMO_TASK, approval_policy="ask")
            await receive(communicator, "approvals.changed", run_id=run.pk)
            approval = await database_sync_to_async(pending_approval)(run)

            await database_sync_to_async(decide_then_roll_back)(approval.pk)
            silent = await nothing_of(communicator, "approvals.changed", timeout=1.0, run_id=run.pk)

            await database_sync_to_async(approval_decide)(approval_id=approval.pk, user=alice, approve=True)
            return run, silent, await receive(communicator, "approvals.changed", run_id=run.pk)
        finally:
            await communicator.disconnect()

    run, silent, changed = async_to_sync(body)()
    assert silent, "a rolled-back decision must not be announced"
    assert changed == {"type": "approvals.changed", "pending": 0, "run_id": run.pk}


# --- A decision over a stale socket ---------------------------------------------------------------
# The socket was opened by an operator who could decide; before the decision arrives, that stops
# being true. Each decision checks again: refused, the socket closed, the approval still pending.


def signed_in(user: User) -> tuple[Client, list[tuple[bytes, bytes]]]:
    client = Client()
    client.force_login(user)
    return client, [(b"origin", LOCAL_ORIGIN), (b"host", LOCAL_HOST), (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def deactivate(user, client):
    User.objects.filter(pk=user.pk).update(is_active=False)


def sign_out(user, client):
    client.logout()  # the session is deleted, as the dashboard's "Sign out" does


def remove_role(user, client):
    User.objects.get(pk=user.pk).groups.clear()


def change_password(user, client):
    fresh = User.objects.get(pk=user.pk)
    fresh.set_password("a-new-password-4242")
    fresh.save()  # the session's auth hash no longer matches: Django signs other sessions out


@pytest.mark.parametrize(
    "change, error, code",
    [
        (deactivate, "your session has ended", 4401),
        (sign_out, "your session has ended", 4401),
        (change_password, "your session has ended", 4401),
        (remove_role, "permission denied", 4403),
    ],
    ids=["deactivated", "signed-out", "password-changed", "role-removed"],
)
def test_a_decision_over_a_stale_socket_is_refused_and_the_socket_closed(launch, alice, no_dispatch, change, error, code):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    client, headers = signed_in(alice)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0], "an operator connects"
        try:
            await database_sync_to_async(change)(alice, client)
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True, "reason": ""})
            reply = await receive(communicator, "error")
            closed = await communicator.receive_output(timeout=5)
        finally:
            await communicator.disconnect()
        return reply, closed

    reply, closed = async_to_sync(body)()
    assert reply["error"].startswith(error), reply
    assert closed == {"type": "websocket.close", "code": code}
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.decided_by_name == "" and approval.decided_at is None
    assert not RunEvent.objects.filter(run=approval.run, kind="approval").exists()
    assert no_dispatch == []


def test_an_operator_given_the_role_after_connecting_may_decide(launch, viewer, no_dispatch):
    """The check reads the user afresh both ways: a viewer promoted meanwhile decides."""
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    _client, headers = signed_in(viewer)

    def promote():
        User.objects.get(pk=viewer.pk).groups.add(Group.objects.get(name="operators"))

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await database_sync_to_async(promote)()
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True, "reason": ""})
            return await receive(communicator, "decided")
        finally:
            await communicator.disconnect()

    decided = async_to_sync(body)()
    assert decided["approval"]["status"] == Approval.Status.APPROVED and decided["approval"]["decided_by"] == viewer.username


def test_a_decision_that_is_not_this_persons_to_make_is_refused_and_the_socket_stays_open(launch, alice, bob, no_dispatch):
    """A call that needs two people: the one who launched the run may not approve it, and nobody
    approves twice. The refusal is an error message; the approval stays pending."""
    run = launch(DEMO_TASK, approval_policy="ask")
    run.created_by = alice
    run.save(update_fields=["created_by"])
    approval = pending_approval(run)
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2)
    headers = headers_for(alice)

    async def body():
        communicator = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True})
            refused = await receive(communicator, "error", approval_id=approval.pk)
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True})
            again = await receive(communicator, "error", approval_id=approval.pk)
            return refused, again
        finally:
            await communicator.disconnect()

    refused, again = async_to_sync(body)()
    assert "launched" in refused["error"] and "launched" in again["error"], refused
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 0)
