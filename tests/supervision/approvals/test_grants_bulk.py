"""Grants given with an approval (for the rest of one run) and their revocation; bulk decisions,
each approval decided on its own."""
import pytest

from runs.models import Approval, RunEvent, RunGrant
from runs.supervision.approvals.bulk_decisions import approvals_decide_many
from runs.supervision.approvals.decide import EditRefused, approval_decide
from runs.supervision.approvals.grants import grant_revoke, grants_of_run
from tests.support.supervision_fixtures import EDITED, for_group, needing_two, parked
from toolsapp.models import Tool


def grant_events(run) -> list[dict]:
    return [e.data for e in RunEvent.objects.filter(run=run, kind="grant").order_by("seq")]


def test_an_approval_with_an_identical_grant_records_it_in_the_same_decision(launch, alice, no_dispatch):
    approval = parked(launch)
    decided = approval_decide(approval_id=approval.pk, user=alice, approve=True, grant="identical")

    (grant,) = grants_of_run(approval.run_id)
    assert (grant.tool_name, grant.args_hash, grant.granted_by_name, grant.source_approval_id) == (
        "cancel_order", decided.tool_call.args_hash, "alice", approval.pk)
    assert grant.active
    (event,) = grant_events(approval.run)
    assert event["grant_id"] == grant.pk and event["scope"] == "identical" and event["by"] == "alice"
    assert event["revoked"] is False


def test_a_tool_grant_covers_any_arguments_and_an_identical_one_the_edited_arguments(launch, alice, no_dispatch):
    first, second = parked(launch), parked(launch)
    approval_decide(approval_id=first.pk, user=alice, approve=True, grant="tool")
    edited = approval_decide(approval_id=second.pk, user=alice, approve=True, arguments=EDITED, grant="identical")
    assert [g.args_hash for g in grants_of_run(first.run_id)] == [""]
    assert [g.args_hash for g in grants_of_run(second.run_id)] == [edited.edited_args_hash]


def test_revoking_a_grant_is_recorded_once_with_the_first_revoker(launch, alice, bob, no_dispatch):
    approval = parked(launch)
    approval_decide(approval_id=approval.pk, user=alice, approve=True, grant="tool")
    (grant,) = grants_of_run(approval.run_id)

    revoked = grant_revoke(grant_id=grant.pk, user=bob)
    again = grant_revoke(grant_id=grant.pk, user=alice)

    assert not revoked.active and revoked.revoked_by_name == "bob"
    assert again.revoked_by_name == "bob" and again.revoked_at == revoked.revoked_at
    assert [(e["revoked"], e["revoked_by"]) for e in grant_events(approval.run)] == [(False, None), (True, "bob")]
    with pytest.raises(RunGrant.DoesNotExist):
        grant_revoke(grant_id=grant.pk + 1000, user=bob)


@pytest.mark.parametrize("setup, approve, says", [
    (lambda a: Tool.objects.filter(name="cancel_order").update(critical=True), True, "always-ask or critical"),
    (lambda a: Tool.objects.filter(name="cancel_order").update(always_ask=True), True, "always-ask or critical"),
    (lambda a: needing_two(a), True, "two people or a named group"),
    (lambda a: None, False, "not a rejection"),
])
def test_a_grant_that_could_never_apply_is_refused(launch, alice, no_dispatch, setup, approve, says):
    approval = parked(launch)
    setup(approval)
    with pytest.raises(EditRefused, match=says):
        approval_decide(approval_id=approval.pk, user=alice, approve=approve, grant="tool")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and not RunGrant.objects.exists()


def test_bulk_decisions_report_what_was_decided_meanwhile_and_what_was_refused(launch, alice, bob, no_dispatch):
    mine, taken, finance = parked(launch), parked(launch), parked(launch)
    for_group(finance, "finance")
    approval_decide(approval_id=taken.pk, user=bob, approve=False, reason="no")

    outcome = approvals_decide_many(
        approval_ids=[mine.pk, taken.pk, finance.pk, 999_999, mine.pk], user=alice, approve=True, reason="batch",
        twins_confirmed=[mine.pk, taken.pk, finance.pk],  # all three cancel ORD-1001: twins, confirmed by name
    )

    assert [(a.pk, a.status, a.reason) for a in outcome.decided] == [(mine.pk, Approval.Status.APPROVED, "batch")]
    assert [(pk, text.split(" at ")[0]) for pk, text in outcome.already] == [(taken.pk, "Already rejected by bob")]
    assert outcome.refused == [(finance.pk, "Only members of finance may decide this call."), (999_999, "No such approval.")]
    finance.refresh_from_db()
    assert finance.status == Approval.Status.PENDING
