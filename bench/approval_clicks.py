"""Clicks a person needs to supervise the demo scenarios, without rules and with a few rules.

A morning of support work for customer acme, through the real loop and the demo model: 30
cancellations (the demo model looks each order up, then cancels it; cancel_order is
destructive), 5 cancellations of an order the run never saw (a scripted model that skips the
lookup and names another id), and 5 cancellations of a tool marked critical (two people). Every
run asks ("ask" policy); a simulated operator approves whatever waits, one click per approval
given, until every run has ended. The same work is done twice: with no rules, then with the
rules below. Both must end with the same orders cancelled.

Run: .venv/bin/python bench/approval_clicks.py
"""
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django, start_demo_model  # noqa: E402

ORDINARY, UNSEEN, CRITICAL = 30, 5, 5
RULES = [
    # (name, tool pattern, conditions, action)
    ("routine cancels for acme", "cancel_order", [{"path": "$.order_id", "op": "matches", "value": "^ORD-3[0-9]{3}$"}],
     "approve"),
]


def script(url: str, responses: list) -> str:
    body = json.dumps({"responses": responses, "record": False}).encode()
    request = urllib.request.Request(url + "/scripts", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)["model"]


def prepare(url: str):
    """Orders, the critical twin of cancel_order, the operators and the runs' models."""
    from decimal import Decimal

    from django.contrib.auth.models import Group, User

    from runs.models import Agent
    from toolsapp.models import Order, Tool

    cancel = Tool.objects.get(name="cancel_order")
    Tool.objects.update_or_create(
        name="cancel_critical",
        defaults={"description": cancel.description, "parameters": cancel.parameters, "destructive": True,
                  "critical": True, "kind": "python", "handler": "cancel_order", "idempotent": cancel.idempotent},
    )
    agent = Agent.objects.get(name="demo")
    agent.tools.add(Tool.objects.get(name="cancel_critical"))
    for number in range(3000, 3000 + ORDINARY + UNSEEN + CRITICAL):
        Order.objects.update_or_create(order_id=f"ORD-{number}", defaults={
            "customer": "acme", "item": "Chair", "total": Decimal("20.00"), "status": "open"})
    operators = Group.objects.get(name="operators")
    people = []
    for name in ("olga", "omar"):
        user, _ = User.objects.get_or_create(username=name)
        user.groups.add(operators)
        people.append(user)
    return agent, people


def reset_orders():
    from toolsapp.models import Order

    Order.objects.filter(order_id__startswith="ORD-3").update(status="open", cancel_idempotency_key="", cancel_reason="", cancelled_at=None)


def launch_all(agent, url: str) -> list[int]:
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create

    tasks = []
    numbers = iter(range(3000, 3000 + ORDINARY + UNSEEN + CRITICAL))
    for _ in range(ORDINARY):
        tasks.append((f"Cancel order ORD-{next(numbers)}", {}))
    for _ in range(UNSEEN):
        # The model names an order that neither the task nor any tool result mentioned.
        number = next(numbers)
        model = script(url, [
            {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": f"ORD-{number}", "reason": "asked"}}]},
            {"content": "Cancelled."},
        ])
        tasks.append(("Cancel the customer's newest order", {"models": [model]}))
    for _ in range(CRITICAL):
        number = next(numbers)
        model = script(url, [
            {"tool_calls": [{"name": "cancel_critical", "arguments": {"order_id": f"ORD-{number}", "reason": "asked"}}]},
            {"content": "Cancelled."},
        ])
        tasks.append((f"Cancel order ORD-{number} (critical)", {"models": [model]}))
    run_ids = []
    for task, overrides in tasks:
        run = run_create(agent=agent, task=task, customer="acme", approval_policy="ask",
                         overrides={"summarize_on_stop": False, **overrides})
        run_advance(run_id=run.pk)
        run_ids.append(run.pk)
    return run_ids


def supervise(run_ids: list[int], people) -> dict:
    """Approve whatever waits, one click per approval given, until every run has ended."""
    from runs.engine.loop import run_advance
    from runs.models import Approval, Run
    from runs.supervision.approvals.decide import approval_decide

    clicks = opened = 0
    while True:
        waiting = list(Approval.objects.filter(run_id__in=run_ids, status=Approval.Status.PENDING))
        if not waiting:
            break
        for approval in waiting:
            opened += 1
            for person in people[: approval.required_approvals - approval.approvals_given]:
                approval_decide(approval_id=approval.pk, user=person, approve=True)
                clicks += 1
            run_advance(run_id=approval.run_id)
    runs = Run.objects.filter(pk__in=run_ids)
    automatic = Approval.objects.filter(run_id__in=run_ids, automatic=True).count()
    return {
        "runs": runs.count(),
        "succeeded": runs.filter(status=Run.Status.SUCCEEDED).count(),
        "destructive calls": Approval.objects.filter(run_id__in=run_ids).count(),
        "opened by a person": opened,
        "clicks": clicks,
        "decided by rules": automatic,
    }


def main():
    tmp = tempfile.mkdtemp(prefix="bench-clicks-")
    proc, url = start_demo_model()
    os.environ["DEMO_MODEL_URL"] = url
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    from django.core.management import call_command

    import runs.supervision.approvals.gate as approvals
    from runs.models import ApprovalRule
    from toolsapp.models import Order

    call_command("migrate", verbosity=0)
    approvals.run_dispatch = lambda run_id: None  # this script resumes runs itself, no worker
    try:
        agent, people = prepare(url)
        results = {}
        for label in ("without rules", "with rules"):
            reset_orders()
            ApprovalRule.objects.all().delete()
            if label == "with rules":
                for position, (name, pattern, conditions, action) in enumerate(RULES):
                    ApprovalRule.objects.create(name=name, tool_pattern=pattern, conditions=conditions,
                                                action=action, position=position, customer="acme")
            figures = supervise(launch_all(agent, url), people)
            figures["orders cancelled"] = Order.objects.filter(order_id__startswith="ORD-3", status="cancelled").count()
            results[label] = figures
        print(f"{'':24}{'without rules':>16}{'with rules':>16}")
        for key in results["without rules"]:
            print(f"{key:24}{results['without rules'][key]:>16}{results['with rules'][key]:>16}")
        print("rules:", "; ".join(f"{n!r} {p} {json.dumps(c)} -> {a}" for n, p, c, a in RULES))
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
