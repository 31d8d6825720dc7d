"""Two operators decide the same approval at the same moment: exactly one wins.

Real threads, each with its own database connection and transaction, meet at a barrier
right before `approval_decide`, whose one conditional UPDATE (only from pending) lets exactly
one of them change the row. On PostgreSQL the loser's UPDATE waits on the winner's row lock and
then matches nothing; on SQLite the IMMEDIATE transactions queue on the database's write lock.
"""
import threading

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

from runs.models import Approval, RunEvent
from runs.supervision.approvals import decide as decide_module
from runs.supervision.approvals.decide import AlreadyDecided, approval_decide

DEMO_TASK = "Cancel order ORD-1001"
ROUNDS = 5


def make_operator(name: str) -> User:
    user = User.objects.create_user(name, password="pw-" + name)
    user.groups.add(Group.objects.get(name="operators"))
    return user


def decide_together(approval_id: int, deciders: list[tuple[User, bool]]) -> list[tuple[User, object]]:
    """Run approval_decide for every (user, approve) at once; return (user, Approval or exception)."""
    barrier = threading.Barrier(len(deciders))
    outcomes: list[tuple[User, object]] = []
    lock = threading.Lock()

    def decide(user: User, approve: bool) -> None:
        try:
            barrier.wait(timeout=10)
            try:
                outcome = approval_decide(approval_id=approval_id, user=user, approve=approve, reason=f"{user} says so")
            except AlreadyDecided as exc:
                outcome = exc
            except Exception as exc:  # noqa: BLE001 (a crash in a thread is reported by the assertions)
                outcome = exc
            with lock:
                outcomes.append((user, outcome))
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=decide, args=pair) for pair in deciders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a decider hung (lock never released?)"
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_two_operators_deciding_at_once_one_wins(launch, monkeypatch):
    dispatched = []
    monkeypatch.setattr(decide_module, "run_dispatch", lambda run_id: dispatched.append(run_id))
    alice, bob = make_operator("alice"), make_operator("bob")

    for round_number in range(ROUNDS):
        run = launch(DEMO_TASK, approval_policy="ask")
        approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
        # Alternate who approves and who rejects, so neither outcome is favoured by order.
        deciders = [(alice, True), (bob, False)] if round_number % 2 == 0 else [(bob, True), (alice, False)]

        outcomes = decide_together(approval.pk, deciders)

        assert len(outcomes) == 2, outcomes
        winners = [(user, o) for user, o in outcomes if isinstance(o, Approval)]
        losers = [(user, o) for user, o in outcomes if isinstance(o, AlreadyDecided)]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        (winner, won), (loser, lost) = winners[0], losers[0]
        assert winner != loser
        assert lost.approval.decided_by == winner, (
            f"AlreadyDecided must name the winner: decided_by_id={lost.approval.decided_by_id} (winner {winner.pk}) "
            f"but decided_by={lost.approval.decided_by!r}"
        )
        assert f"by {winner.username} at" in str(lost)

        approval.refresh_from_db()
        assert approval.decided_by == winner
        assert approval.status == won.status
        assert approval.status == (Approval.Status.APPROVED if dict(deciders)[winner] else Approval.Status.REJECTED)
        events = RunEvent.objects.filter(run=run, kind="approval")
        assert events.count() == 1
        assert events.get().data["decided_by"] == winner.username

    assert sorted(dispatched) == sorted(set(dispatched)) and len(dispatched) == ROUNDS  # one resume per run


@pytest.mark.django_db(transaction=True)
def test_two_operators_posting_at_once_get_200_and_409_naming_the_winner(launch, monkeypatch):
    from django.test import Client
    from django.urls import reverse

    monkeypatch.setattr(decide_module, "run_dispatch", lambda run_id: None)
    operators = [make_operator("alice"), make_operator("bob")]
    clients = []
    for user in operators:
        client = Client()
        client.force_login(user)
        clients.append(client)

    for _ in range(3):
        approval = Approval.objects.get(run=launch(DEMO_TASK, approval_policy="ask"), status=Approval.Status.PENDING)
        responses = post_together(reverse("approval_decide", args=[approval.pk]), list(zip(operators, clients)))

        assert sorted(r.status_code for r in responses.values()) == [200, 409]
        winner = next(name for name, r in responses.items() if r.status_code == 200)
        loser_reply = next(r for r in responses.values() if r.status_code == 409).json()
        assert loser_reply["error"].startswith(f"Already approved by {winner} at ")
        assert RunEvent.objects.filter(run=approval.run, kind="approval").count() == 1


def post_together(url: str, senders: list) -> dict:
    """POST an approval from every (user, logged-in client) at once; return {username: response}."""
    barrier = threading.Barrier(len(senders))
    responses = {}

    def post(user, client):
        try:
            barrier.wait(timeout=10)
            responses[user.username] = client.post(url, {"decision": "approve"}, HTTP_ACCEPT="application/json")
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=sender) for sender in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a request hung"
    return responses
