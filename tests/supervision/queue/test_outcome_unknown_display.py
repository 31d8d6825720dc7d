"""A call whose outcome is unknown says so wherever people look: the approvals audit, the run's
API detail and the exports (the live run page: browser/test_browser_runs.py)."""
import csv
import io
import json

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from runs.lifecycle.runs import run_cancel
from runs.models import Run, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.support.approval_fixtures import pending_approval


def approved_then_interrupted(launch, user):
    """An approved cancel_order that a worker had started when the run was cancelled."""
    run = launch("Cancel order ORD-1001")
    approval_decide(approval_id=pending_approval(run).pk, user=user, approve=True)
    # What a worker writes before running a call that is not safe to repeat, then it died.
    ToolCall.objects.filter(run=run, tool_name="cancel_order").update(status=ToolCall.Status.STARTED, started_at=timezone.now(), attempts=1)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    return run_cancel(run=run, user=user)


@pytest.fixture
def interrupted(launch, alice, no_dispatch):
    run = approved_then_interrupted(launch, alice)
    assert run.status == Run.Status.CANCELLED
    return run


def test_the_call_of_a_run_that_ended_while_it_ran_is_outcome_unknown_in_the_api(interrupted, alice):
    client = APIClient()
    client.force_authenticate(alice)
    detail = client.get(f"/api/v1/runs/{interrupted.pk}/").json()
    (call,) = [c for step in detail["steps"] for c in step["calls"] if c["tool"] == "cancel_order"]
    assert call["status"] == ToolCall.Status.UNKNOWN
    assert call["error"].startswith("outcome unknown") and "cancelled" in call["error"]


def test_the_approvals_audit_shows_the_outcome_was_unknown(interrupted, client, alice):
    client.force_login(alice)
    html = client.get(reverse("approval_queue")).content.decode()
    audit = html[html.index('id="approval-audit"'):]
    assert "Approved" in audit and "Outcome unknown" in audit


def test_exports_show_the_outcome_as_unknown_neither_ok_nor_failed(interrupted, alice):
    client = APIClient()
    client.force_authenticate(alice)
    text = b"".join(client.get("/api/v1/runs/export.jsonl").streaming_content).decode()
    (record,) = [json.loads(line) for line in text.splitlines()]
    statuses = {c["tool"]: (c["status"], c["ok"]) for step in record["steps"] for c in step["calls"]}
    assert statuses == {"lookup_order": (ToolCall.Status.SUCCEEDED, True), "cancel_order": (ToolCall.Status.UNKNOWN, None)}
    rows = list(csv.DictReader(io.StringIO(b"".join(client.get("/api/v1/runs/export.csv").streaming_content).decode())))
    assert [(r["call_status"], r["call_ok"]) for r in rows if r["tool"] == "cancel_order"] == [(ToolCall.Status.UNKNOWN, "")]
