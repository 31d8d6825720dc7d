"""Decisions are an append-only record: made once, only from pending; never written over by the
loop's expiry; the decider's name kept with the decision, so deleting the account blanks nothing.
The admin side (read-only, deleting runs archives their decisions) is in test_admin_records.py.
"""
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from runs.engine.storage.db import write_transaction
from runs.engine.storage.snapshots import run_data
from runs.lifecycle.exports import runs_export_records
from runs.models import Approval, Run, RunEvent, ToolCall
from runs.supervision.approvals.decide import AlreadyDecided, _decide_read, approval_decide
from runs.supervision.approvals.gate import EXPIRED, approval_end_undecided
from tests.support.approval_fixtures import make_user, pending_approval

DEMO_TASK = "Cancel order ORD-1001"


def decided_call(record: dict) -> dict:
    (call,) = [c for step in record["steps"] for c in step["calls"] if c["approval"]]
    return call


def test_deleting_the_deciders_account_keeps_their_name_with_the_decision(launch, client, alice, bob, no_dispatch):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="wrong order")

    User.objects.filter(pk=alice.pk).delete()

    approval.refresh_from_db()
    assert approval.decided_by is None, "the account is gone"
    assert approval.decided_by_name == "alice", "but who decided is kept with the decision"
    # Everywhere the decision is shown: the run (API, CLI, live timeline), the export, the audit.
    assert decided_call(run_data(run))["approval"]["decided_by"] == "alice"
    (record,) = runs_export_records(Run.objects.filter(pk=run.pk))
    assert decided_call(json.loads(json.dumps(record, default=str)))["approval"]["decided_by"] == "alice"
    client.force_login(bob)
    audit = client.get(reverse("approval_queue")).content.decode()
    assert f'data-approval-id="{approval.pk}">' in audit and '<td class="decider">alice</td>' in audit
    # A late decider is told who won, by name.
    with pytest.raises(AlreadyDecided, match="already rejected by alice at "):
        approval_decide(approval_id=approval.pk, user=bob, approve=True)


def test_the_decision_event_names_the_decider(launch, alice, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    decided = approval_decide(approval_id=approval.pk, user=alice, approve=True)
    assert decided.decided_by_name == "alice"
    assert RunEvent.objects.get(run=approval.run, kind="approval").data["decided_by"] == "alice"


def test_a_decision_whose_read_saw_pending_never_writes_over_one_that_landed_after_the_read(
        launch, alice, bob, no_dispatch):
    # On PostgreSQL reading takes no lock: alice's transaction can read the approval pending, bob's
    # rejection commit, and then alice's UPDATE run. SQLite's write lock hides that interleaving,
    # so alice's read is taken before bob decides and her decision is made on it: only the
    # UPDATE's "from pending" condition stands between her approval and bob's rejection.
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    alices_read = Approval.objects.select_related("run", "tool_call").get(pk=approval.pk)
    approval_decide(approval_id=approval.pk, user=bob, approve=False, reason="bob was first")

    with pytest.raises(AlreadyDecided, match="already rejected by bob at "), write_transaction():
        _decide_read(alices_read, person=alice, approve=True, reason="alice read it pending", arguments=None,
                     guidance="", grant="")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name, approval.reason) == (
        Approval.Status.REJECTED, "bob", "bob was first")
    assert [e.data["status"] for e in RunEvent.objects.filter(run=approval.run, kind="approval")] == ["rejected"]
    assert no_dispatch == [approval.run_id], "the run resumed once, for bob's decision"


def test_a_decision_is_final_for_people_and_for_expiry(launch, alice, bob, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    loops_copy = Approval.objects.get(pk=approval.pk)  # read by the loop while still pending
    approval_decide(approval_id=approval.pk, user=alice, approve=True, reason="checked")

    with pytest.raises(AlreadyDecided):
        approval_decide(approval_id=approval.pk, user=bob, approve=False, reason="no")
    # The loop's expiry works on its stale copy: one UPDATE from pending, so it changes nothing.
    assert approval_end_undecided(approval=loops_copy, reason=EXPIRED) is None

    approval.refresh_from_db()
    assert (approval.status, approval.reason, approval.decided_by_name) == (Approval.Status.APPROVED, "checked", "alice")
    assert RunEvent.objects.filter(run=approval.run, kind="approval").count() == 1


def test_archived_decisions_are_listed_in_the_api_for_those_who_may_view_approvals(launch, client, alice, viewer, no_dispatch):
    from runs.lifecycle.archive import runs_delete  # here: the module is new with the archive

    runs = [launch(DEMO_TASK, approval_policy="ask") for _ in range(3)]
    for run in runs:
        approval_decide(approval_id=pending_approval(run).pk, user=alice, approve=True, reason=f"run {run.pk} ok")
    runs_delete(run_ids=[r.pk for r in runs])
    User.objects.filter(pk=alice.pk).delete()
    url = reverse("api-approval-archived")

    client.force_login(make_user("nobody", None))
    assert client.get(url).status_code == 403
    client.force_login(viewer)
    first = client.get(url).json()
    assert [(r["run_id"], r["status"], r["decided_by_name"], r["reason"]) for r in first["results"]] == [
        (r.pk, Approval.Status.APPROVED, "alice", f"run {r.pk} ok") for r in runs
    ]
    assert first["next"] is None
    only = client.get(url, {"run_id": runs[1].pk}).json()["results"]
    assert [r["run_id"] for r in only] == [runs[1].pk] and only[0]["tool_name"] == "cancel_order"
    after = client.get(url, {"after": first["results"][0]["id"]}).json()["results"]
    assert [r["run_id"] for r in after] == [runs[1].pk, runs[2].pk]
    assert client.get(url, {"after": "-1"}).status_code == 400


def test_the_loops_expiry_on_a_stale_read_keeps_a_decision_that_just_landed(launch, alice, no_dispatch):
    """The loop read the approval pending and, by its clock, overdue; a person approved it in
    between. The gate's expiry must not write over that decision: the call runs as approved."""
    from runs.engine.leases import lease_claim, lease_release
    from runs.engine.storage.records import Recorder
    from runs.supervision.approvals.gate import RUN, approval_gate
    from toolsapp.models import Tool

    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    call = ToolCall.objects.select_related("approval").get(pk=approval.tool_call_id)
    call.approval.expires_at = timezone.now() - timedelta(seconds=1)  # the loop's view: overdue
    approval_decide(approval_id=approval.pk, user=alice, approve=True, reason="checked")

    run.refresh_from_db()
    assert lease_claim(run.pk, "test-driver")
    try:
        recorder = Recorder(run, "test-driver")
        with recorder.transaction():
            gate = approval_gate(call=call, tool=Tool.objects.get(name=call.tool_name), config=run.config, recorder=recorder)
    finally:
        lease_release(run.pk, "test-driver")

    assert gate == RUN
    approval.refresh_from_db()
    assert (approval.status, approval.reason, approval.decided_by_name) == (Approval.Status.APPROVED, "checked", "alice")
    call.refresh_from_db()
    assert call.status == ToolCall.Status.APPROVED


def test_exports_say_what_decided_a_call_when_no_person_did(launch, script, alice, viewer, no_dispatch):
    """A rule, a grant and the run's policy decide without a name: the JSONL and CSV exports say
    which, as the run page does, instead of a blank."""
    from runs.engine.loop import run_advance
    from runs.models import ApprovalRule
    from runs.supervision.approvals.checks import IDENTICAL
    from tests.engine.loop_contract.support import call, calls
    from tests.web.api.test_api import api

    def cancel(order_id, call_id):
        return calls(call("cancel_order", {"order_id": order_id, "reason": "customer asked"}, call_id))

    ApprovalRule.objects.create(name="cancels of ORD-1001", action="approve", tool_pattern="cancel_*",
                                conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    by_rule = launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001", "c1"), {"content": "done"})])
    # Another customer's order: the same cancel would be a twin that ran, which holds the grant's call.
    by_policy = launch("Cancel order ORD-2001", approval_policy="approve", customer="globex",
                       models=[script(cancel("ORD-2001", "c1"), {"content": "done"})])
    by_grant = launch("Cancel order ORD-1003", models=[
        script(cancel("ORD-1003", "first"), cancel("ORD-1003", "again"), {"content": "done"})])
    approval_decide(approval_id=pending_approval(by_grant).pk, user=alice, approve=True, grant=IDENTICAL)
    run_advance(run_id=by_grant.pk)
    runs = [by_rule, by_policy, by_grant]

    lines = api(viewer).get("/api/v1/runs/export.jsonl").streaming_content
    records = {r["run_id"]: r for r in (json.loads(line) for line in b"".join(lines).decode().splitlines())}
    deciders = {run.pk: [c["approval"]["decided_by"] for s in records[run.pk]["steps"] for c in s["calls"]] for run in runs}
    assert deciders == {
        by_rule.pk: ["rule 'cancels of ORD-1001' v1"],
        by_policy.pk: ["the run's policy"],
        by_grant.pk: ["alice", "a grant for this run"],
    }
    csv_text = b"".join(api(viewer).get("/api/v1/runs/export.csv").streaming_content).decode()
    assert "rule 'cancels of ORD-1001' v1" in csv_text and "a grant for this run" in csv_text
