"""Operators' levers over the REST API and the run's websocket: operators steer, viewers are told
no, a lever that cannot apply answers in words, and a paused run keeps the decisions made meanwhile."""
import json

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.controls import levers
from runs.controls.levers import run_pause, run_resume
from runs.engine.loop import run_advance
from runs.models import Approval, OperatorMessage, Run, RunEvent, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.support.approval_fixtures import make_user, pending_approval
from tests.support.timeline_replay import mismatches
from tests.web.websockets.test_consumer_timeline import TIMEOUT, communicator, replay
from toolsapp.models import Order


@pytest.fixture
def dispatched(monkeypatch):
    sent = []
    monkeypatch.setattr(levers, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def lever_kinds(run) -> list[str]:
    return [d["lever"] for d in RunEvent.objects.filter(run=run, kind="lever").order_by("seq").values_list("data", flat=True)]


def test_an_operator_pauses_notes_resumes_and_stops_over_the_api(launch, alice, viewer, no_dispatch, dispatched):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    client, base = api(alice), f"/api/v1/runs/{run.pk}"

    response = client.post(f"{base}/pause/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["detail"] == f"Run {run.pk} is paused."
    assert body["run"]["status"] == "paused" and body["levers"]["paused_by"] == "alice"
    detail = client.get(f"{base}/").json()
    assert detail["status"] == "paused" and detail["levers"]["paused_by"] == "alice"

    response = client.post(f"{base}/message/", {"text": "  Check ORD-1002 too.  "}, format="json")
    assert response.status_code == 200
    assert response.json()["message"]["text"] == "Check ORD-1002 too."
    assert response.json()["message"]["author"] == "alice" and response.json()["levers"]["notes_waiting"] == 1
    assert client.post(f"{base}/message/", {"text": ""}, format="json").status_code == 400

    response = client.post(f"{base}/resume/")
    assert response.status_code == 200
    assert response.json()["run"]["status"] == "awaiting_approval"  # its decision is still pending
    assert dispatched == []

    assert client.post(f"{base}/resume/").json()["detail"] == "The run is not paused (it is awaiting approval)."
    response = client.post(f"{base}/stop/")
    assert response.status_code == 200
    assert response.json()["run"]["status"] == "cancelled" and response.json()["run"]["stop_reason"] == "operator_stop"
    assert pending_approval_count(run) == 0

    response = client.post(f"{base}/pause/")
    assert response.status_code == 409
    assert response.json()["detail"] == "Too late: the run ended as Cancelled (Stopped by an operator)."
    assert client.post("/api/v1/runs/999999/pause/").status_code == 404
    assert lever_kinds(run) == ["pause", "paused", "message", "resume", "stop"]
    assert mismatches(run.pk) == []


def pending_approval_count(run) -> int:
    return Approval.objects.filter(run=run, status=Approval.Status.PENDING).count()


def test_viewers_cannot_pull_levers_over_the_api(launch, viewer, no_dispatch):
    run = launch("Cancel order ORD-1001")
    client = api(viewer)
    for lever in ("pause", "resume", "stop"):
        assert client.post(f"/api/v1/runs/{run.pk}/{lever}/").status_code == 403
    assert client.post(f"/api/v1/runs/{run.pk}/message/", {"text": "hi"}, format="json").status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL and not run.pause_requested
    assert lever_kinds(run) == [] and not OperatorMessage.objects.exists()


def test_a_decision_made_while_paused_is_kept_and_runs_only_after_the_resume(launch, alice, bob, no_dispatch, dispatched):
    run = launch("Cancel order ORD-1001")
    approval = pending_approval(run)
    run_pause(run_id=run.pk, user=alice)
    approval_decide(approval_id=approval.pk, user=bob, approve=True)
    assert no_dispatch == []  # the last decision does not wake a paused run
    assert run_advance(run_id=run.pk).status == Run.Status.PAUSED  # nor does a stray task
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED
    assert Order.objects.get(order_id="ORD-1001").status != "cancelled"

    run = run_resume(run_id=run.pk, user=alice)
    assert run.status == Run.Status.QUEUED and dispatched == [run.pk]
    run = run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    call = ToolCall.objects.get(run=run, tool_name="cancel_order")
    assert call.status == ToolCall.Status.SUCCEEDED and call.approval.decided_by_name == "bob"
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"
    assert mismatches(run.pk) == []


def socket_levers(run_id, cookie, *messages) -> list[dict]:
    """Send each lever message on the run's socket; the replies (events skipped), in order."""

    async def go():
        ws = communicator(run_id, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await replay(ws, 0)
        replies = []
        for message in messages:
            await ws.send_json_to(message)
            while True:
                reply = await ws.receive_json_from(timeout=TIMEOUT)
                if reply["type"] != "event":
                    replies.append(reply)
                    break
        await ws.disconnect()
        return replies

    return async_to_sync(go)()


def test_levers_over_the_websocket_check_the_role_at_each_message(launch, session_cookie, no_dispatch):
    run = launch("Cancel order ORD-1001")
    viewer_cookie = session_cookie("viewers", name="vic")
    refused = socket_levers(run.pk, viewer_cookie, {"type": "lever", "lever": "pause"})
    assert refused == [{"type": "error", "lever": "pause",
                        "message": "permission denied: your role may watch runs, not steer them"}]
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL and lever_kinds(run) == []

    cookie = session_cookie("operators", name="olga")
    done, noted, again, bad = socket_levers(
        run.pk, cookie,
        {"type": "lever", "lever": "pause"},
        {"type": "lever", "lever": "message", "text": "wait for finance"},
        {"type": "lever", "lever": "pause"},
        {"type": "lever", "lever": "explode"},
    )
    assert done["type"] == "lever_done" and done["run"]["status"] == "paused" and done["levers"]["paused_by"] == "olga"
    assert noted["type"] == "lever_done" and noted["levers"]["notes_waiting"] == 1
    assert again == {"type": "error", "lever": "pause", "message": "The run is already paused (by olga)."}
    assert bad["type"] == "error" and "lever must be one of" in bad["message"]
    assert OperatorMessage.objects.get(run=run).author_name == "olga"
    assert mismatches(run.pk) == []


def test_a_lever_from_a_session_that_ended_is_refused_and_the_socket_closes(launch, session_cookie, no_dispatch):
    from django.contrib.sessions.models import Session

    run = launch("Cancel order ORD-1001")
    cookie = session_cookie("operators", name="olga")

    async def go():
        ws = communicator(run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await replay(ws, 0)
        await _sign_out()
        await ws.send_json_to({"type": "lever", "lever": "stop"})
        # The run's own events may still arrive (published after the replay): the answer to the
        # lever is the first other message, and the close comes after it.
        reply = await ws.receive_json_from(timeout=TIMEOUT)
        while reply["type"] == "event":
            reply = await ws.receive_json_from(timeout=TIMEOUT)
        closed = await ws.receive_output(timeout=TIMEOUT)
        while closed["type"] == "websocket.send" and json.loads(closed["text"])["type"] == "event":
            closed = await ws.receive_output(timeout=TIMEOUT)
        return reply, closed

    from channels.db import database_sync_to_async

    @database_sync_to_async
    def _sign_out():
        Session.objects.all().delete()

    reply, closed = async_to_sync(go)()
    assert reply["type"] == "error" and "session has ended" in reply["message"]
    assert closed == {"type": "websocket.close", "code": 4401}
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL and not run.stop_requested_by_name


@pytest.fixture
def session_cookie(demo_data):
    from django.test import Client

    def make(group, name):
        user = make_user(name, group)
        client = Client()
        client.force_login(user)
        return f"sessionid={client.cookies['sessionid'].value}"

    return make
