"""Pruning keeps the whole decision: the rule that decided (as it was), everyone who approved a
two-person call, and an operator's edit (sensitive values masked) with its hash."""
import json

from django.urls import reverse
from django.utils import timezone

from runs.lifecycle.archive import runs_delete
from runs.models import Approval, ApprovalVote, ArchivedApproval
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Tool


def test_a_pruned_runs_decisions_keep_rule_voters_and_masked_edit(launch, client, alice, bob, viewer, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    approval = pending_approval(launch("Cancel order ORD-1001", approval_policy="ask"))
    edited = json.dumps({"order_id": "ORD-1002", "reason": "customer's secret note"})
    Approval.objects.filter(pk=approval.pk).update(
        status=Approval.Status.APPROVED, required_approvals=2, approvals_given=2, rule_name="critical cancels",
        rule_version=3, edited_arguments=edited, edited_args_hash="e" * 64, decided_by_name="bob",
        decided_at=timezone.now(), guidance="check the customer's other orders",
    )
    # Carol approved the model's arguments before the edit: her vote stopped counting, so it is no voter.
    ApprovalVote.objects.create(approval=approval, user_name="carol", superseded_at=timezone.now())
    ApprovalVote.objects.create(approval=approval, user=alice, user_name="alice")
    ApprovalVote.objects.create(approval=approval, user=bob, user_name="bob")

    runs_delete(run_ids=[approval.run_id])

    archived = ArchivedApproval.objects.get(approval_id=approval.pk)
    assert (archived.rule_name, archived.rule_version, archived.required_approvals) == ("critical cancels", 3, 2)
    assert archived.voters == ["alice", "bob"]
    assert archived.edited_args_hash == "e" * 64
    assert json.loads(archived.edited_arguments) == {"order_id": "ORD-1002", "reason": "••••"}
    assert "secret" not in archived.edited_arguments
    assert archived.guidance == "check the customer's other orders"

    # The archived-approvals API gives all of it, the edit still masked.
    client.force_login(viewer)
    (row,) = client.get(reverse("api-approval-archived"), {"run_id": approval.run_id}).json()["results"]
    assert (row["rule_name"], row["rule_version"], row["required_approvals"], row["voters"]) == (
        "critical cancels", 3, 2, ["alice", "bob"])
    assert (row["edited_args_hash"], row["guidance"]) == ("e" * 64, "check the customer's other orders")
    assert json.loads(row["edited_arguments"]) == {"order_id": "ORD-1002", "reason": "••••"}
    assert "secret" not in json.dumps(row)
