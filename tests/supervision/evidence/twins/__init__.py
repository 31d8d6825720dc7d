"""Twins: calls of one project on the same thing (runs/supervision/evidence/twins.py), shown on each other's
cards and in the API, and confirmed by name before they are approved together."""
import json
import re

from django.urls import reverse

from runs.models import Approval, CallEvidence
from runs.supervision.evidence.twins import call_identity
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Tool

CANCEL_TASK = "Cancel order ORD-1001"


def with_evidence(approval: Approval) -> Approval:
    """The evidence row the loop writes when it asks (gate.approval_request), with the twins' key
    computed as the loop computes it; written here only when the loop did not write one."""
    call = approval.tool_call
    tool = Tool.objects.get(name=call.tool_name)
    CallEvidence.objects.get_or_create(approval=approval, defaults={
        "project_id": approval.run.agent.project_id, "tool_name": call.tool_name,
        "identity": call_identity(call.tool_name, json.loads(call.arguments), tool.identifier_fields),
    })
    return approval


def waiting(launch, task: str = CANCEL_TASK, **kwargs) -> Approval:
    """A call of a fresh run waiting for a person, with its evidence."""
    return with_evidence(pending_approval(launch(task, approval_policy="ask", **kwargs)))


def card(html: str, approval_id: int) -> str:
    """One approval's card of a queue page."""
    found = re.search(rf'<article class="card approval" data-approval-id="{approval_id}".*?</article>', html, re.S)
    assert found, f"no card for approval {approval_id}"
    return found.group(0)


def queue_html(client) -> str:
    response = client.get(reverse("approval_queue"))
    assert response.status_code == 200
    return response.content.decode()


def text_of(html: str) -> str:
    """The words a person reads: tags dropped, white space folded."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())
