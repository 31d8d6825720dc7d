"""The pending-approvals API carries what the card shows: the evidence (the model's words, what it
had just read, where each value came from), masked as stored, the paths from outside content, the
state check's answer and the twins."""
import json

from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import CallEvidence
from runs.supervision.queue.card_controls import approval_for_page
from tests.supervision.evidence.twins import waiting
from toolsapp.models import Tool


def pending_item(user, approval_id: int) -> dict:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    (item,) = [i for i in client.get("/api/v1/approvals/").json()["results"] if i["id"] == approval_id]
    return item


def test_the_api_gives_each_waiting_call_the_evidence_its_card_shows(launch, alice):
    approval = waiting(launch)
    item = pending_item(alice, approval.pk)
    card = approval_for_page(approval_id=approval.pk)

    assert item["evidence"] == {key: card.evidence.get(key, default)
                                for key, default in (("said", ""), ("read", []), ("values", []))}
    assert item["outside_paths"] == card.outside_paths and item["twins"] == card.twins == []
    # What the model had just read: lookup_order's answer for the order it then asked to cancel.
    assert any(read.get("tool") == "lookup_order" and "ORD-1001" in read["text"] for read in item["evidence"]["read"])
    assert [(v["path"], v["source"]) for v in item["evidence"]["values"]][:1] == [("$.order_id", "task")]


def test_sensitive_values_stay_masked_in_the_apis_evidence(launch, alice):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    approval = waiting(launch)
    text = json.dumps(pending_item(alice, approval.pk), ensure_ascii=False)
    assert "Customer asked to cancel" not in text and "••••" in text


def test_the_state_checks_answer_and_its_time_are_in_the_api(launch, alice):
    approval = waiting(launch)
    answer = {"tool": "lookup_order", "ok": True, "summary": "ORD-1001: cancelled", "answer": '{"status": "cancelled"}'}
    CallEvidence.objects.filter(pk=approval.pk).update(state=answer, state_checked_at=approval.requested_at,
                                                       state_requested_at=None)
    item = pending_item(alice, approval.pk)
    assert item["state"]["summary"] == "ORD-1001: cancelled" and item["state"]["ok"] is True
    assert item["state_checked_at"] is not None
