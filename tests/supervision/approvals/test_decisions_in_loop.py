"""What the loop does with people's richer decisions: grants for the rest of a run, edited
arguments (and what the model reads of them), guidance with a rejection, and a rule that meets a
call whose outcome is unknown after a crash.

People's decisions are written to the approval row directly, as the deciding service leaves it
(its own tests cover how); what is tested here is the loop that reads them."""
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from runs.engine import guards
from runs.engine.loop import run_advance
from runs.engine.tools.edit_note import EDIT_NOTE
from runs.models import Agent, Approval, ApprovalRule, Run, RunGrant, ToolCall
from runs.supervision.approvals.checks import IDENTICAL
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.approvals.grants import grant_create, grant_revoke
from tests.engine.loop_contract.support import call, calls, result_for
from tests.support.approval_fixtures import make_user, pending_approval
from tests.support.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Order, Tool


@pytest.fixture(autouse=True)
def _timeline_equals_rows(demo_data, no_dispatch):
    yield
    problems = [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)]
    assert problems == []


def cancel(order_id, call_id, reason="customer asked"):
    return calls(call("cancel_order", {"order_id": order_id, "reason": reason}, call_id))


def decide(approval, *, approve=True, edited=None, **fields):
    """A person's decision as the deciding service writes it."""
    if edited is not None:
        text = json.dumps(edited)
        fields.update(edited_arguments=text, edited_args_hash=guards.args_hash(text, settings.ARGS_HASH_KEY))
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    changed = Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(
        status=status, decided_at=timezone.now(), decided_by_name="alice", **fields
    )
    assert changed == 1


def resume(run):
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    return run


# --- grants ---------------------------------------------------------------------------------------


@python_handler("test_grants_revoke")
def _revoke(args, ctx):
    # An operator revokes the run's grants while it goes on (another connection, like the run page).
    operator = User.objects.get(username="alice")
    for grant_id in RunGrant.objects.filter(run_id=ctx.run_id).values_list("pk", flat=True):
        grant_revoke(grant_id=grant_id, user=operator)
    return {"revoked": True}


def test_a_grant_approves_the_next_identical_call_and_stops_after_it_is_revoked(launch, script):
    Agent.objects.filter(name="demo").update(repeat_limit=10)
    Tool.objects.create(name="revoke_grants", handler="test_grants_revoke", description="test",
                        parameters={"type": "object", "properties": {}})
    model = script(cancel("ORD-1003", "first"), cancel("ORD-1003", "again"),
                   cancel("ORD-1001", "other"), calls(call("revoke_grants", {}, "revoke")),
                   cancel("ORD-1003", "after"))
    run = launch("Cancel ORD-1003 and ORD-1001", models=[model], tools=["cancel_order", "revoke_grants"])
    first = pending_approval(run)
    decide(first)
    # Given as the deciding service gives it, with its "grant" event (the timeline must show it).
    grant = grant_create(approval=first, user=make_user("alice", "operators"), scope=IDENTICAL)
    assert (grant.tool_name, grant.args_hash) == ("cancel_order", first.tool_call.args_hash)

    elsewhere = launch("Cancel ORD-1003", models=[script(cancel("ORD-1003", "first"))])
    assert pending_approval(elsewhere).grant_id is None, "a grant is for its own run only"

    run = resume(run)  # "again" is approved by the grant, "other" (other arguments) waits
    approvals = {a.tool_call.call_id: a for a in Approval.objects.filter(run=run)}
    again = approvals["again"]
    assert (again.status, again.automatic, again.grant_id, again.decided_by_name) == (
        Approval.Status.APPROVED, True, grant.pk, "")
    assert approvals["other"].status == Approval.Status.PENDING
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN

    decide(approvals["other"])
    run = resume(run)  # the grant is revoked by the next call, then the identical call waits again
    after = Approval.objects.get(run=run, tool_call__call_id="after")
    assert (after.status, after.grant_id) == (Approval.Status.PENDING, None)
    assert run.status == Run.Status.AWAITING_APPROVAL


def test_a_tool_grant_does_not_approve_an_unseen_id_in_a_sensitive_field(launch, script, alice):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["order_id"])
    model = script(cancel("ORD-1001", "seen"), cancel("ORD-1003", "unseen"), {"content": "done"})
    run = launch("Cancel ORD-1001", models=[model])
    approval_decide(approval_id=pending_approval(run).pk, user=alice, approve=True, grant="tool")

    run = resume(run)
    held = Approval.objects.get(run=run, tool_call__call_id="unseen")
    assert (held.status, held.automatic, held.grant_id) == (Approval.Status.PENDING, False, None)
    assert held.note == ("A grant for this run would approve, but the sensitive field order_id holds an identifier "
                         "this run has never seen.")
    assert "ORD-1003" not in json.dumps(held.unseen_ids)
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.OPEN
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED


# --- edited arguments -----------------------------------------------------------------------------


def test_an_edited_call_runs_with_the_edit_and_the_model_reads_what_changed(launch, script):
    model = script(cancel("ORD-1001", "c1", reason="wrong"), {"content": "done"})
    run = launch("Cancel ORD-1001 or ORD-1003, whichever is the lamp", models=[model])
    approval = pending_approval(run)
    decide(approval, edited={"order_id": "ORD-1003", "reason": "wrong"})

    run = resume(run)
    assert run.status == Run.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    row = ToolCall.objects.get(run=run)
    assert json.loads(row.arguments)["order_id"] == "ORD-1001", "the model's own call stays as sent"
    assert json.loads(row.executed_arguments)["order_id"] == "ORD-1003"
    approval.refresh_from_db()
    assert row.executed_args_hash == approval.edited_args_hash != row.args_hash
    told = result_for(script.requests(model)[1], "c1")
    assert told["ok"] is True and told["result"]["order_id"] == "ORD-1003"
    assert told["operator_edit"] == {"note": EDIT_NOTE, "changed": {"$.order_id": {"from": "ORD-1001", "to": "ORD-1003"}}}


def test_the_edit_of_a_sensitive_field_reaches_the_model_masked(launch, script):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    model = script(cancel("ORD-1001", "c1", reason="secret one"), {"content": "done"})
    run = launch("Cancel ORD-1001", models=[model])
    decide(pending_approval(run), edited={"order_id": "ORD-1001", "reason": "secret two"})

    resume(run)
    content = [m for m in script.requests(model)[1]["messages"] if m.get("tool_call_id") == "c1"][0]["content"]
    assert "secret" not in content
    assert json.loads(content)["operator_edit"]["changed"] == {"$.reason": {"from": "••••", "to": "••••"}}


def test_after_a_crash_the_call_asked_about_again_still_runs_the_edited_arguments(launch, script, alice):
    Tool.objects.filter(name="cancel_order").update(idempotent=False)  # a crash leaves its outcome unknown
    model = script(cancel("ORD-1001", "c1"), {"content": "done"})
    run = launch("Cancel ORD-1001 or ORD-1003", models=[model])
    approval = pending_approval(run)
    decide(approval, edited={"order_id": "ORD-1003", "reason": "customer asked"})
    approval.refresh_from_db()
    # The worker marked the edited call started, then died before the tool returned.
    now = timezone.now()
    ToolCall.objects.filter(pk=approval.tool_call_id).update(
        status=ToolCall.Status.STARTED, started_at=now, attempts=1,
        executed_arguments=approval.edited_arguments, executed_args_hash=approval.edited_args_hash,
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, lease_owner="a-dead-worker",
                                         lease_expires_at=now - timedelta(seconds=1))

    run = resume(run)
    again = pending_approval(run)
    assert "Outcome unknown" in again.note
    approval_decide(approval_id=again.pk, user=alice, approve=True, reason="checked: nothing happened")
    run = resume(run)

    assert run.status == Run.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    assert result_for(script.requests(model)[1], "c1")["operator_edit"]["changed"]["$.order_id"]["to"] == "ORD-1003"


# --- rejections and the crash safeguard -----------------------------------------------------------


def test_a_rejection_with_guidance_gives_the_model_both(launch, script):
    model = script(cancel("ORD-1001", "c1"), {"content": "done"})
    run = launch("Cancel ORD-1001", models=[model])
    decide(pending_approval(run), approve=False, reason="not this one", guidance="cancel ORD-1003 instead")

    resume(run)
    assert result_for(script.requests(model)[1], "c1") == {
        "ok": False, "error": "rejected by operator: not this one", "guidance": "cancel ORD-1003 instead"}


def test_a_rule_does_not_approve_a_call_whose_outcome_is_unknown(launch, script):
    Tool.objects.filter(name="cancel_order").update(idempotent=False)
    run = launch("Cancel ORD-1001", models=[script(cancel("ORD-1001", "c1"), {"content": "done"})])
    decide(pending_approval(run))
    now = timezone.now()
    ToolCall.objects.filter(run=run).update(status=ToolCall.Status.STARTED, started_at=now, attempts=1)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, lease_owner="a-dead-worker",
                                         lease_expires_at=now - timedelta(seconds=1))
    ApprovalRule.objects.create(name="everything", action="approve")

    run = resume(run)
    again = pending_approval(run)
    assert (again.automatic, again.required_approvals) == (False, 1)
    assert again.note.endswith("Rule 'everything' v1 would approve, but the outcome of this call is unknown after a crash.")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
