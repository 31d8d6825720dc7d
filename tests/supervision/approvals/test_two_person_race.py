"""Decisions that race under supervision: exactly one outcome, whatever the timing.

Real threads, each with its own database connection and transaction, meet at a barrier right
before deciding. Run on SQLite (write transactions queue) and on PostgreSQL (READ COMMITTED:
a blocked UPDATE re-reads the row once the winner commits, so `approvals_given + 1` and the
`status` condition are evaluated on the row as the winner left it).
"""
import json

import pytest
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import Approval, ApprovalVote, RunEvent
from runs.supervision.approvals.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from tests.support.approval_fixtures import make_user
from tests.support.supervision_fixtures import needing_two, parked
from tests.support.threads import together

ROUNDS = 4
pytestmark = pytest.mark.django_db(transaction=True)


def approving(user, approval, **kwargs):
    return lambda: approval_decide(approval_id=approval.pk, user=user, approve=True, **kwargs)


def test_two_operators_editing_and_approving_one_call_store_exactly_one_edit(launch, alice, bob, no_dispatch):
    clients = {}
    for user in (alice, bob):
        clients[user.username] = APIClient()
        clients[user.username].credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    for round_number in range(ROUNDS):
        approval = parked(launch)
        edits = {name: {"order_id": f"ORD-{1002 + n}", "reason": f"{name} checked the order"}
                 for n, name in enumerate(clients)}
        names = list(clients) if round_number % 2 == 0 else list(reversed(clients))

        def post(name, approval=approval, edits=edits):
            return lambda: clients[name].post(f"/api/v1/approvals/{approval.pk}/approve/",
                                              {"arguments": edits[name]}, format="json")

        responses = dict(zip(names, together(*(post(name) for name in names))))

        assert sorted(r.status_code for r in responses.values()) == [200, 409], responses
        winner = next(name for name, r in responses.items() if r.status_code == 200)
        loser = next(r for r in responses.values() if r.status_code == 409)
        assert loser.json()["detail"].startswith(f"Already approved by {winner} at ")
        approval.refresh_from_db()
        assert json.loads(approval.edited_arguments) == edits[winner], "the winner's edit, and only it"
        assert approval.decided_by_name == winner
        assert RunEvent.objects.filter(run=approval.run, kind="approval").count() == 1


def test_two_operators_giving_the_second_of_two_approvals_decide_once(launch, alice, bob, no_dispatch):
    carol = make_user("carol", "operators")
    for round_number in range(ROUNDS):
        approval = needing_two(parked(launch))
        approval_decide(approval_id=approval.pk, user=alice, approve=True)
        pair = (bob, carol) if round_number % 2 == 0 else (carol, bob)

        outcomes = together(*(approving(user, approval) for user in pair))

        decided = [(u, o) for u, o in zip(pair, outcomes) if isinstance(o, Approval)]
        late = [(u, o) for u, o in zip(pair, outcomes) if isinstance(o, AlreadyDecided)]
        assert len(decided) == 1 and len(late) == 1, outcomes
        (winner, won), (_, lost) = decided[0], late[0]
        assert won.status == Approval.Status.APPROVED and f"approved by {winner.username} at" in str(lost)
        approval.refresh_from_db()
        assert (approval.status, approval.approvals_given, approval.decided_by_name) == ("approved", 2, winner.username)
        votes = sorted(ApprovalVote.objects.filter(approval=approval).values_list("user_name", flat=True))
        assert votes == sorted(["alice", winner.username]), "the late vote was rolled back with its decision"
    assert len(no_dispatch) == ROUNDS


def test_two_operators_giving_the_first_of_two_approvals_at_once_approve_the_call(launch, alice, bob, no_dispatch):
    for round_number in range(ROUNDS):
        approval = needing_two(parked(launch))
        pair = (alice, bob) if round_number % 2 == 0 else (bob, alice)

        outcomes = together(*(approving(user, approval) for user in pair))

        assert all(isinstance(o, Approval) for o in outcomes), outcomes
        assert sorted(o.status for o in outcomes) == ["approved", "pending"], "one counted first, the other decided"
        approval.refresh_from_db()
        assert (approval.status, approval.approvals_given) == (Approval.Status.APPROVED, 2)
        assert ApprovalVote.objects.filter(approval=approval).count() == 2
        events = [e.data for e in RunEvent.objects.filter(run=approval.run, kind="approval").order_by("seq")]
        assert [(e["status"], e["approvals_given"]) for e in events] == [("pending", 1), ("approved", 2)]
    assert len(no_dispatch) == ROUNDS, "each run resumed once"


def test_one_person_approving_twice_at_once_counts_once(launch, alice, no_dispatch):
    for _ in range(ROUNDS):
        approval = needing_two(parked(launch))

        outcomes = together(approving(alice, approval), approving(alice, approval))

        assert sorted(type(o).__name__ for o in outcomes) == ["Approval", "NotAllowed"], outcomes
        assert any(isinstance(o, NotAllowed) for o in outcomes)
        approval.refresh_from_db()
        assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)
        assert ApprovalVote.objects.filter(approval=approval).count() == 1
    assert no_dispatch == []


def test_two_operators_editing_a_call_that_needs_two_at_once_leave_one_edit_with_its_one_vote(launch, alice, bob, no_dispatch):
    # Whichever order the database gives them, an edit is never counted with a vote for other
    # arguments: the stored edit has exactly one counting vote, its editor's, and nothing runs.
    for round_number in range(ROUNDS):
        approval = needing_two(parked(launch))
        edits = {user.username: json.dumps({"order_id": f"ORD-100{2 + n}", "reason": f"{user.username} checked"})
                 for n, user in enumerate((alice, bob))}
        pair = (alice, bob) if round_number % 2 == 0 else (bob, alice)

        outcomes = together(*(approving(user, approval, arguments=edits[user.username]) for user in pair))

        assert all(isinstance(o, (Approval, EditRefused)) for o in outcomes), outcomes
        approval.refresh_from_db()
        counting = list(ApprovalVote.objects.filter(approval=approval, superseded_at__isnull=True))
        assert (approval.status, approval.approvals_given, len(counting)) == (Approval.Status.PENDING, 1, 1)
        (vote,) = counting
        assert approval.edited_arguments == edits[vote.user_name] and vote.args_hash == approval.edited_args_hash
    assert no_dispatch == []
