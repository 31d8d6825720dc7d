"""People's decisions beyond approve and reject as sent: edited arguments (checked on the server
against the tool's schema), two-person approvals, named groups and guidance for the model."""
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from runs.engine.guards import args_hash
from runs.engine.storage.db import write_transaction
from runs.models import Approval, ApprovalVote, RunEvent
from runs.supervision.approvals.decide import (
    AlreadyDecided,
    EditRefused,
    NotAllowed,
    _decide_read,
    approval_decide,
    approval_expire,
)
from tests.support.approval_fixtures import make_user
from tests.support.supervision_fixtures import EDITED, for_group, needing_two, parked
from toolsapp.models import Tool


def decide(approval, user, approve=True, **kwargs):
    return approval_decide(approval_id=approval.pk, user=user, approve=approve, **kwargs)


# --- Edit, then approve ---------------------------------------------------------------------------


def test_an_edited_approval_records_the_edit_and_both_hashes(launch, alice, no_dispatch):
    approval = parked(launch)
    model_hash = approval.tool_call.args_hash

    decided = decide(approval, alice, arguments=EDITED, reason="wrong order")

    assert decided.status == Approval.Status.APPROVED and decided.decided_by_name == "alice"
    assert json.loads(decided.edited_arguments) == json.loads(EDITED)
    assert decided.edited_args_hash == args_hash(EDITED, settings.ARGS_HASH_KEY) != model_hash
    decided.tool_call.refresh_from_db()
    assert decided.tool_call.args_hash == model_hash, "the model's call keeps its own hash"
    event = RunEvent.objects.get(run=approval.run, kind="approval").data
    assert event["edited"] is True and event["edited_args_hash"] == decided.edited_args_hash
    assert no_dispatch == [approval.run_id]


@pytest.mark.parametrize("text, says", [
    ('{"order_id": "ORD-1002"', "not valid JSON"),
    ('["ORD-1002"]', "must be a JSON object"),
    ('{"order_id": "1002", "reason": "The customer meant their second order"}', "schema refuses"),
    ('{"order_id": "ORD-1002"}', "'reason' is a required property"),
])
def test_an_edit_the_tool_would_refuse_is_refused_and_nothing_is_decided(launch, alice, no_dispatch, text, says):
    approval = parked(launch)
    with pytest.raises(EditRefused, match=says):
        decide(approval, alice, arguments=text)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.edited_arguments == ""
    assert not RunEvent.objects.filter(run=approval.run, kind="approval").exists() and no_dispatch == []


def test_a_tool_that_forbids_edits_refuses_them(launch, alice, no_dispatch):
    approval = parked(launch)
    Tool.objects.filter(name="cancel_order").update(allow_argument_edits=False)
    with pytest.raises(EditRefused, match="does not allow edited arguments"):
        decide(approval, alice, arguments=EDITED)
    assert decide(approval, alice).status == Approval.Status.APPROVED, "approving as sent still works"


def test_a_rejection_cannot_carry_an_edit(launch, alice, no_dispatch):
    approval = parked(launch)
    with pytest.raises(EditRefused, match="go with an approval"):
        decide(approval, alice, approve=False, arguments=EDITED)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_the_same_arguments_reformatted_are_no_edit(launch, alice, no_dispatch):
    approval = parked(launch)
    same = json.dumps(json.loads(approval.tool_call.arguments), indent=4, sort_keys=True)
    decided = decide(approval, alice, arguments=same)
    assert decided.status == Approval.Status.APPROVED and decided.edited_arguments == "" and decided.edited_args_hash == ""


def test_a_masked_field_left_as_shown_keeps_the_models_value(launch, alice, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    approval = parked(launch)
    decided = decide(approval, alice, arguments='{"order_id": "ORD-1002", "reason": "••••"}')
    assert json.loads(decided.edited_arguments) == {"order_id": "ORD-1002", "reason": "Customer asked to cancel"}


# --- Two people ---------------------------------------------------------------------------------


def test_two_people_approve_a_call_that_needs_two(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch))

    first = decide(approval, alice, reason="looks right")
    assert (first.status, first.approvals_given, first.decided_by_name) == (Approval.Status.PENDING, 1, "")
    assert no_dispatch == [], "the run keeps waiting for the second person"
    second = decide(approval, bob)

    assert (second.status, second.approvals_given, second.decided_by_name) == (Approval.Status.APPROVED, 2, "bob")
    assert list(ApprovalVote.objects.filter(approval=approval).values_list("user_name", "reason")) == [
        ("alice", "looks right"), ("bob", "")]
    events = [e.data for e in RunEvent.objects.filter(run=approval.run, kind="approval").order_by("seq")]
    assert [(e["status"], e["approvals_given"], e["required_approvals"]) for e in events] == [
        ("pending", 1, 2), ("approved", 2, 2)]
    assert no_dispatch == [approval.run_id]


def test_the_same_person_cannot_approve_twice(launch, alice, no_dispatch):
    approval = needing_two(parked(launch))
    decide(approval, alice)
    with pytest.raises(NotAllowed, match="already approved"):
        decide(approval, alice)
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)


def test_a_person_renamed_after_voting_cannot_approve_the_same_call_again(launch, alice, no_dispatch):
    # The vote is found by account as well as by name: a new username is the same person.
    approval = needing_two(parked(launch))
    decide(approval, alice)
    alice.username = "alice-renamed"
    alice.save(update_fields=["username"])
    with pytest.raises(NotAllowed, match="already approved"):
        decide(approval, alice)
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)


def test_the_launcher_cannot_approve_a_call_that_needs_two(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch), launched_by=alice)
    with pytest.raises(NotAllowed, match="You launched this run"):
        decide(approval, alice)
    carol = make_user("carol", "operators")
    decide(approval, bob)
    assert decide(approval, carol).status == Approval.Status.APPROVED


def test_one_rejection_ends_a_two_person_approval(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch))
    decide(approval, alice)
    rejected = decide(approval, bob, approve=False, reason="not this order")
    assert (rejected.status, rejected.reason, rejected.decided_by_name) == (Approval.Status.REJECTED, "not this order", "bob")
    carol = make_user("carol", "operators")
    with pytest.raises(AlreadyDecided, match="already rejected by bob"):
        decide(approval, carol)


def test_an_edit_by_the_second_approver_needs_the_full_count_on_the_edited_arguments(launch, alice, bob, no_dispatch):
    # Alice approved the model's arguments, not bob's: his edit starts the count again at his vote.
    approval = needing_two(parked(launch))
    decide(approval, alice, reason="ORD-1001 is right")

    edited = decide(approval, bob, arguments=EDITED, reason="the second order")

    assert (edited.status, edited.approvals_given, edited.decided_by_name) == (Approval.Status.PENDING, 1, "")
    assert json.loads(edited.edited_arguments) == json.loads(EDITED), "the proposed edit waits with the call"
    assert no_dispatch == [], "one person's review of these arguments runs nothing"
    carol = make_user("carol", "operators")
    decided = decide(approval, carol, args_hash=edited.edited_args_hash)

    assert (decided.status, decided.approvals_given, decided.decided_by_name) == (Approval.Status.APPROVED, 2, "carol")
    assert json.loads(decided.edited_arguments) == json.loads(EDITED)
    votes = ApprovalVote.objects.filter(approval=approval).order_by("pk")
    model_hash = approval.tool_call.args_hash
    assert [(v.user_name, v.args_hash, v.superseded_at is not None) for v in votes] == [
        ("alice", model_hash, True), ("bob", decided.edited_args_hash, False), ("carol", decided.edited_args_hash, False)]
    assert no_dispatch == [approval.run_id]


def test_the_first_approver_may_approve_the_edited_arguments_and_the_editor_not_twice(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch))
    decide(approval, alice)
    edited = decide(approval, bob, arguments=EDITED)
    with pytest.raises(NotAllowed, match="already approved"):
        decide(approval, bob, args_hash=edited.edited_args_hash)
    with pytest.raises(NotAllowed, match="already approved"):
        decide(approval, bob, arguments=EDITED)

    decided = decide(approval, alice, args_hash=edited.edited_args_hash)
    assert (decided.status, decided.decided_by_name) == (Approval.Status.APPROVED, "alice")


def test_approving_after_an_edit_must_name_the_edited_arguments(launch, alice, bob, no_dispatch):
    # Alice's page still shows the model's arguments: her click must not approve bob's edit.
    approval = needing_two(parked(launch))
    model_hash = approval.tool_call.args_hash
    edited = decide(approval, bob, arguments=EDITED)
    for seen in ("", model_hash):
        with pytest.raises(EditRefused, match="bob proposed edited arguments"):
            decide(approval, alice, args_hash=seen)
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)
    assert decide(approval, alice, arguments=EDITED).status == Approval.Status.APPROVED, (
        "sending the same edited arguments approves them")
    assert edited.edited_args_hash == Approval.objects.get(pk=approval.pk).edited_args_hash


def test_an_edit_of_an_edit_or_back_to_the_models_arguments_starts_the_count_again(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch))
    carol = make_user("carol", "operators")
    decide(approval, bob, arguments=EDITED)
    other = '{"order_id": "ORD-1003", "reason": "The lamp, in fact"}'
    second = decide(approval, carol, arguments=other)
    assert (second.status, second.approvals_given, json.loads(second.edited_arguments)) == (
        Approval.Status.PENDING, 1, json.loads(other))

    back = decide(approval, bob, arguments=approval.tool_call.arguments)  # bob's vote on his own edit is void
    assert (back.status, back.approvals_given, back.edited_arguments, back.edited_args_hash) == (
        Approval.Status.PENDING, 1, "", "")
    decided = decide(approval, alice, args_hash=approval.tool_call.args_hash)
    assert (decided.status, decided.edited_arguments) == (Approval.Status.APPROVED, ""), "the model's arguments run"
    counting = ApprovalVote.objects.filter(approval=approval, superseded_at__isnull=True).order_by("pk")
    assert [v.user_name for v in counting] == ["bob", "alice"]


def test_the_launcher_cannot_edit_a_call_that_needs_two(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch), launched_by=alice)
    with pytest.raises(NotAllowed, match="You launched this run"):
        decide(approval, alice, arguments=EDITED)
    approval.refresh_from_db()
    assert (approval.approvals_given, approval.edited_arguments) == (0, "")


def test_an_edit_that_lands_after_the_read_refuses_an_approval_of_the_arguments_read(launch, alice, bob, no_dispatch):
    # As test_decision_record's stale read: on PostgreSQL bob's edit may commit between alice's read
    # and her UPDATE; her vote was for the model's arguments, so it must not count for bob's.
    approval = needing_two(parked(launch))
    alices_read = Approval.objects.select_related("run", "tool_call").get(pk=approval.pk)
    decide(approval, bob, arguments=EDITED)

    with pytest.raises(EditRefused, match="edited meanwhile"), write_transaction():
        _decide_read(alices_read, person=alice, approve=True, reason="", arguments=None, guidance="", grant="",
                     args_hash=approval.tool_call.args_hash)
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)
    assert ApprovalVote.objects.filter(approval=approval, superseded_at__isnull=True).count() == 1


# --- A named group, guidance --------------------------------------------------------------------


def test_only_members_of_the_named_group_decide(launch, alice, bob, no_dispatch):
    approval = parked(launch)
    for_group(approval, "finance").user_set.add(bob)
    for approve in (True, False):
        with pytest.raises(NotAllowed, match="Only members of finance"):
            decide(approval, alice, approve=approve)
    assert decide(approval, bob).decided_by_name == "bob"


def test_a_rejection_keeps_its_guidance(launch, alice, no_dispatch):
    approval = parked(launch)
    rejected = decide(approval, alice, approve=False, reason="wrong order", guidance="Cancel ORD-1002 instead")
    assert rejected.guidance == "Cancel ORD-1002 instead"
    assert RunEvent.objects.get(run=approval.run, kind="approval").data["guidance"] == "Cancel ORD-1002 instead"


# --- Nobody decides without a person ------------------------------------------------------------


@pytest.mark.parametrize("nobody", [None, AnonymousUser()], ids=["None", "anonymous"])
def test_a_decision_without_a_signed_in_person_is_refused(launch, no_dispatch, nobody):
    # Without a person there is no group to check nor two people to count: nothing may pass.
    approval = needing_two(parked(launch))
    for_group(approval, "finance")
    for approve in (True, False):
        with pytest.raises(NotAllowed, match="signed-in person"):
            decide(approval, nobody, approve=approve, reason="the system says so")
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given, approval.decided_at) == (Approval.Status.PENDING, 0, None)
    assert not RunEvent.objects.filter(run=approval.run, kind="approval").exists() and no_dispatch == []


def test_the_system_only_expires_an_overdue_approval_and_then_resumes_the_run(launch, no_dispatch):
    approval = parked(launch)
    assert approval_expire(approval_id=approval.pk) is None, "not overdue: nothing to expire"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and no_dispatch == []

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = approval_expire(approval_id=approval.pk)

    assert (expired.status, expired.reason, expired.decided_by_name) == (Approval.Status.EXPIRED, "approval expired", "")
    assert RunEvent.objects.get(run=approval.run, kind="approval").data["status"] == "expired"
    assert no_dispatch == [approval.run_id]
    assert approval_expire(approval_id=approval.pk) is None, "a decision is never written over"
