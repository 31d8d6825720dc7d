"""The approvals socket of a person whose projects change while it is open: it hears of the
projects they belong to now, not those they had at connect (the run timeline's schedule: before
each message the client sends, and before a change is told once a few seconds have passed).
Over the real ASGI stack, with a signed-in session, and the channels-redis layer."""
import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from projects.models import Membership
from runs.engine.storage.events import approvals_changed
from runs.web.consumers import rights
from tests.projects import member
from tests.projects import test_runs_scoping as scoping
from tests.support.channel_layer import fresh_channel_layer
from tests.web.websockets.test_consumer_approvals import CONNECT_TIMEOUT, PATH, headers_for

teams = scoping.teams  # fixture: projects A and B, a call waiting in each

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_layer():
    fresh_channel_layer()
    yield
    fresh_channel_layer()


@pytest.fixture
def vera(teams):
    """An operator of A and a viewer of B."""
    member("vera", teams["b"], "viewers")
    return member("vera", teams["a"], "operators")


async def changes_until(socket, run_id: int, timeout: float = 10.0) -> list[dict]:
    """The approvals.changed messages received up to and including the one of `run_id`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = []
    while not seen or seen[-1]["run_id"] != run_id:
        message = await socket.receive_json_from(timeout=max(deadline - loop.time(), 0.01))
        if message.get("type") == "approvals.changed":
            seen.append(message)
    return seen


def leave(user, project) -> None:
    Membership.objects.filter(user=user, project=project).delete()


@pytest.mark.parametrize("told_by", ["a-later-change", "a-message-from-the-page"])
def test_a_person_removed_from_a_project_no_longer_hears_its_changes(teams, vera, monkeypatch, told_by):
    if told_by == "a-later-change":
        monkeypatch.setattr(rights, "RIGHTS_RECHECK_SECONDS", 0)  # every change checks again
    a_run, b_run = teams["runs"]["a"], teams["runs"]["b"]
    headers = headers_for(vera)

    async def body():
        socket = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await socket.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await database_sync_to_async(approvals_changed)(run_id=b_run.pk)
            before = await changes_until(socket, b_run.pk)
            await database_sync_to_async(leave)(vera, teams["b"])
            if told_by == "a-message-from-the-page":
                await socket.send_json_to({"type": "announce"})
                assert (await socket.receive_json_from(timeout=CONNECT_TIMEOUT))["type"] == "announcing"
            await database_sync_to_async(approvals_changed)(run_id=b_run.pk)
            await database_sync_to_async(approvals_changed)(run_id=a_run.pk)
            return before, await changes_until(socket, a_run.pk)
        finally:
            await socket.disconnect()

    before, after = async_to_sync(body)()
    assert before[-1] == {"type": "approvals.changed", "pending": 2, "run_id": b_run.pk}  # A's call and B's
    assert after == [{"type": "approvals.changed", "pending": 1, "run_id": a_run.pk}]  # nothing of B, B's call not counted


def test_a_person_removed_from_every_project_is_told_and_the_socket_closes(teams, vera, monkeypatch):
    monkeypatch.setattr(rights, "RIGHTS_RECHECK_SECONDS", 0)
    a_run = teams["runs"]["a"]
    headers = headers_for(vera)

    async def body():
        socket = WebsocketCommunicator(application, PATH, headers=headers)
        assert (await socket.connect(timeout=CONNECT_TIMEOUT))[0]
        try:
            await database_sync_to_async(lambda: Membership.objects.filter(user=vera).delete())()
            await database_sync_to_async(approvals_changed)(run_id=a_run.pk)
            return await socket.receive_json_from(timeout=CONNECT_TIMEOUT), await socket.receive_output(timeout=5)
        finally:
            await socket.disconnect()

    told, closed = async_to_sync(body)()
    assert told == {"type": "error", "error": "permission denied: you may no longer see the approval queue"}
    assert closed == {"type": "websocket.close", "code": 4403}
