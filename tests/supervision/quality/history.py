"""The seeded history most of these tests read: project Shop, where alice and bob decide, and
project Other, where alice and carol decide. Its figures are worked out in the comments."""
from dataclasses import dataclass
from datetime import timedelta

from projects.models import Project
from runs.models import Approval, NudgeShown, ShadowDecision, ToolCall
from tests.projects import member, project
from tests.supervision.quality.seed import S, agent_in, at, decided, run_of

ALREADY = '{"ok": true, "result": {"order_id": "ORD-1", "cancelled": false, "already_cancelled": true}}'


@dataclass
class History:
    shop: Project
    other: Project
    alice: object
    bob: object
    carol: object
    approvals: dict  # name -> Approval


def history() -> History:
    shop, other = project("Shop"), project("Other")
    Project.objects.filter(pk=shop.pk).update(quick_approval_seconds=5)
    alice, bob = member("alice", shop), member("bob", shop)
    carol = member("carol", other)
    member("alice", other)
    run, later_run = run_of(agent_in(shop)), run_of(agent_in(shop, "second"))
    a = {}
    # alice, Shop. Seconds from the card appearing: 2, 4, 5, 60, 20, 30, 40, 3.
    a["quick_after_shown"] = decided(run, by=alice, asked=at(5, 10, 0), shown=30, took=2)  # quick
    a["quick"] = decided(run, by=alice, asked=at(5, 10, 600), shown=5, took=4)  # quick
    a["never_shown"] = decided(run, by=alice, asked=at(5, 10, 1200), took=5)  # quick: from asking
    a["failed"] = decided(run, by=alice, asked=at(6), took=60, call_status=ToolCall.Status.FAILED)
    a["rejected"] = decided(run, by=alice, status=S.REJECTED, asked=at(7), took=20)
    a["already_done"] = decided(run, by=alice, asked=at(8), took=30, result_text=ALREADY)  # moot
    a["reversed"] = decided(run, by=alice, asked=at(10), took=40, identity="order-1", args_hash="h1")
    a["moot_quick"] = decided(run, by=alice, asked=at(15), took=3, state={"moot": True, "summary": "cancelled"})
    # bob, Shop: 100, 8, 1. His call on order-1 with other arguments reverses alice's.
    a["reverses"] = decided(later_run, by=bob, asked=at(12), took=100, identity="order-1", args_hash="h2")
    a["bob_rejected"] = decided(later_run, by=bob, status=S.REJECTED, asked=at(13), took=8)
    a["bob_quick"] = decided(later_run, by=bob, asked=at(14), took=1)
    # Nobody's decisions: a rule's, an expiry, one still waiting (since 2 days 5 hours before NOW).
    decided(run, automatic=True, asked=at(9), took=0)
    a["expired"] = decided(run, status=S.EXPIRED, asked=at(16), took=3600)
    a["waiting"] = decided(run, status=S.PENDING, asked=at(18, 10), took=None)
    # Before the period (30 days to NOW): not counted.
    decided(run, by=alice, asked=at(5) - timedelta(days=40), took=1)
    # Other: alice's and carol's quick approvals there never count in Shop.
    elsewhere = run_of(agent_in(other))
    for who in (alice, carol, carol):
        decided(elsewhere, by=who, asked=at(11), took=1, call_status=ToolCall.Status.FAILED)
    # Rules in shadow: agreed with alice (approved) and bob (rejected), disagreed with alice's rejection.
    for name, outcome in (("quick_after_shown", "approve"), ("rejected", "approve"), ("bob_rejected", "reject"),
                          ("quick", "ask")):
        ShadowDecision.objects.create(approval=a[name], rule_key=1, rule_version=1, rule_name="r", outcome=outcome)
    for who, name in ((alice, "moot_quick"), (bob, "bob_quick")):
        nudge = NudgeShown.objects.create(approval=a[name], user=who, user_name=who.username, project_id=shop.pk, streak=3)
        NudgeShown.objects.filter(pk=nudge.pk).update(shown_at=a[name].requested_at)
    return History(shop, other, alice, bob, carol, a)


def approval(h: History, name: str) -> Approval:
    return h.approvals[name]
