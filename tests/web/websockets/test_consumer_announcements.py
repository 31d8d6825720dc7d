"""Announcements on the approvals socket: a call that newly waits goes, as "approval.to_decide", only
to the sockets (that asked for announcements) of people who may decide it: their role, their
groups, and not the launcher of a run whose call needs two people. Everyone who may view still gets
"approvals.changed"."""
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group

from agentsite.asgi import application
from runs.engine.loop import run_advance
from runs.engine.storage.events import approvals_changed
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, ApprovalRule, Run
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import call, calls
from tests.web.websockets.test_consumer_approvals import (
    CONNECT_TIMEOUT,
    PATH,
    _fresh_layer,  # noqa: F401 (autouse: a new channel layer per test)
    headers_for,
    receive,
    sign_out,
    signed_in,
)


def cancel(order_id: str, call_id: str):
    return call("cancel_order", {"order_id": order_id, "reason": "asked"}, call_id)


def launch_as(user, script, *entries) -> Run:
    """A run `user` launched, driven here until it waits for its approvals."""
    model = script(calls(*entries), {"content": "Done."})
    run = run_create(agent=Agent.objects.get(name="demo"), task="Cancel the orders", user=user,
                     overrides={"models": [model]}, approval_policy="ask")
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL
    return run


async def announcing(headers) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, PATH, headers=headers)
    assert (await communicator.connect(timeout=CONNECT_TIMEOUT))[0]
    await communicator.send_json_to({"type": "announce"})
    await receive(communicator, "announcing")
    return communicator


MARK = 0  # no run has this id: its change marks the end of what a test waits for


def mark() -> None:
    """Publish a change of no run after everything published so far: the consumer handles its
    messages in order, so once a socket hears this, it has said all it had to say before."""
    approvals_changed(run_id=MARK)


async def heard_until_mark(communicator: WebsocketCommunicator) -> list:
    """Every message before the change that mark() published."""
    received = []
    while True:
        message = await communicator.receive_json_from(timeout=10)
        if message.get("type") == "approvals.changed" and message.get("run_id") == MARK:
            return received
        received.append(message)


def announced(messages: list, run: Run) -> list[str]:
    """The orders of the calls of `run` announced in `messages`, in order."""
    orders = dict(Approval.objects.filter(run=run).values_list("pk", "tool_call__arguments"))
    return [
        "ORD-" + orders[m["approval_id"]].split('"ORD-')[1][:4]
        for m in messages if m.get("type") == "approval.to_decide" and m["run_id"] == run.pk
    ]


def test_a_call_is_announced_only_to_who_may_decide_it(demo_data, script, alice, bob, viewer):
    finance = Group.objects.create(name="finance")
    bob.groups.add(finance)
    ApprovalRule.objects.create(name="desk needs two", action="ask_two", position=1,
                                conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    ApprovalRule.objects.create(name="lamp to finance", action="ask_group", group=finance, position=2,
                                conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1003"}])
    people = {"alice": headers_for(alice), "bob": headers_for(bob), "viewer": headers_for(viewer)}
    quiet = headers_for(bob)  # a socket that never asks for announcements

    async def body():
        sockets = {name: await announcing(headers) for name, headers in people.items()}
        silent = WebsocketCommunicator(application, PATH, headers=quiet)
        assert (await silent.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            # alice launches: a call that needs two people, one for finance, one for anybody.
            run = await database_sync_to_async(launch_as)(
                alice, script, cancel("ORD-1001", "desk"), cancel("ORD-1003", "lamp"), cancel("ORD-1002", "plain"))
            await database_sync_to_async(mark)()
            heard = {name: await heard_until_mark(s) for name, s in sockets.items()}
            heard["quiet"] = await heard_until_mark(silent)
        finally:
            for communicator in [*sockets.values(), silent]:
                await communicator.disconnect()
        return run, heard

    run, heard = async_to_sync(body)()
    orders = {name: announced(messages, run) for name, messages in heard.items()}
    # alice launched the run: the two-person call is for two others; the lamp is finance's.
    assert orders == {"alice": ["ORD-1002"], "bob": ["ORD-1001", "ORD-1003", "ORD-1002"], "viewer": [], "quiet": []}
    for name, messages in heard.items():
        assert any(m["type"] == "approvals.changed" and m["run_id"] == run.pk for m in messages), name
    plain = Approval.objects.get(run=run, tool_call__call_id="plain")
    told = next(m for m in heard["alice"] if m["type"] == "approval.to_decide")
    assert told == {"type": "approval.to_decide", "approval_id": plain.pk, "run_id": run.pk, "tool": "cancel_order",
                    "task": "Cancel the orders", "url": f"/approvals/{plain.pk}/"}


def test_calls_that_waited_before_and_a_second_change_are_not_announced_again(demo_data, script, alice, bob, no_dispatch):
    ApprovalRule.objects.create(name="two", action="ask_two", position=1)
    before = launch_as(alice, script, cancel("ORD-1001", "c1"))
    headers = headers_for(bob)

    async def body():
        communicator = await announcing(headers)
        try:
            run = await database_sync_to_async(launch_as)(alice, script, cancel("ORD-1003", "c1"))
            await database_sync_to_async(mark)()
            first = await heard_until_mark(communicator)
            approval = await database_sync_to_async(Approval.objects.get)(run=run)
            # bob's vote (1 of 2) and a change of the run that waited before: nothing new to decide.
            await database_sync_to_async(approval_decide)(approval_id=approval.pk, user=bob, approve=True)
            await database_sync_to_async(approvals_changed)(run_id=before.pk)
            await database_sync_to_async(mark)()
            later = await heard_until_mark(communicator)
        finally:
            await communicator.disconnect()
        return run, first, later

    run, first, later = async_to_sync(body)()
    assert announced(first, run) == ["ORD-1003"]
    assert [m["type"] for m in later if m["type"] != "approvals.changed"] == []
    assert {m["run_id"] for m in later} == {run.pk, before.pk}


def test_a_session_that_ended_gets_no_announcement_and_the_socket_closes(demo_data, script, alice, bob):
    client, headers = signed_in(bob)

    async def body():
        communicator = await announcing(headers)
        try:
            await database_sync_to_async(sign_out)(bob, client)
            await database_sync_to_async(launch_as)(alice, script, cancel("ORD-1001", "c1"))
            messages = []
            while True:
                output = await communicator.receive_output(timeout=10)
                if output["type"] == "websocket.close":
                    return messages, output
                messages.append(output)
        finally:
            await communicator.disconnect()

    messages, closed = async_to_sync(body)()
    assert closed == {"type": "websocket.close", "code": 4401}
    assert not any("approval.to_decide" in m.get("text", "") for m in messages)
    assert "your session has ended" in messages[-1]["text"]
