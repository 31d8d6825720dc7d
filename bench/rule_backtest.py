"""The rule backtest at 100,000 recorded calls (issue 47: rules tested against what people decided).

Seeds a fresh database with bulk_create: in one project, --calls destructive calls asked about in
the last 30 days (runs of 10 calls, a step each, the approval and the evidence row the loop
writes), decided as a busy team decides them (people approve most, reject some, edit a few; rules
and grants decide some; some expire); plus calls older than the window and calls of another
project, which the backtest must pass over. Three rules of the project are saved.

Then times, median of --repeat runs, the backtest of one rule as edited (in its place among the
saved rules) and of a whole five-rule set, as the editor and POST /api/v1/rules/backtest/ run them.
Prints the figures (and, on PostgreSQL, the streaming query's plan with --explain).

Run: .venv/bin/python bench/rule_backtest.py [--calls 100000] [--repeat 5]   (a temporary SQLite file)
     DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_backtest .venv/bin/python bench/rule_backtest.py
The PostgreSQL database is DROPPED and created again: its name must contain "bench" (never "test").
--reuse times an existing seeded database again (DATABASE_URL, or --sqlite PATH).
"""
import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import timedelta

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS_PER_RUN = 10
# A run's settings as launched: the agent's whole system prompt among them (stored out of line by
# PostgreSQL, so read per call it would be unpacked 100,000 times).
RUN_CONFIG = {"approval_policy": "ask", "agent_name": "demo", "system_prompt": "You help customers of the shop. " * 120,
              "models": ["demo"], "max_iterations": 20, "tools": ["lookup_order", "cancel_order", "refund_order"]}
BATCH = 5000


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--sqlite", help="with --reuse: the SQLite file")
    parser.add_argument("--explain", action="store_true", help="print PostgreSQL's plan of the streaming query")
    return parser.parse_args()


def evidence(order_id: str, amount: int) -> dict:
    result = json.dumps({"order_id": order_id, "status": "open", "total": amount, "item": "Blue kettle"})
    read = [{"kind": "tool", "tool": "lookup_order", "step": 1, "call_pk": 0, "outside": False, "text": result,
             "chars": len(result)}]
    read += [{"kind": "tool", "tool": "search_tickets", "step": 0, "call_pk": 0, "outside": False,
              "text": "ticket text " * 50, "chars": 600}]
    values = [{"path": "$.order_id", "value": order_id, "source": "tool", "words": "from lookup_order's result at step 1",
               "tool": "lookup_order", "step": 1, "outside": False},
              {"path": "$.amount", "value": amount, "source": "model", "words": "the model wrote this", "outside": False}]
    return {"said": f"Cancelling {order_id} as the customer asked.", "read": read, "values": values}


def seed(total: int) -> dict:
    """Calls of the project in the window, and the calls the backtest must pass over."""
    from django.db import connection
    from django.utils import timezone

    from projects.models import Project
    from runs.models import Agent, Approval, ApprovalRule, CallEvidence, Run, Step, ToolCall

    rng = random.Random(47)
    demo = Agent.objects.get(name="demo")
    other_project = Project.objects.get_or_create(slug="other-team", defaults={"name": "Other team"})[0]
    other = Agent.objects.get(pk=demo.pk)
    other.pk, other.name, other.project = None, "other-bot", other_project
    other.save()
    ApprovalRule.objects.bulk_create([
        ApprovalRule(name="never VIP", project_id=demo.project_id, tool_pattern="cancel_order", action="reject",
                     position=1, conditions=[{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]),
        ApprovalRule(name="tickets", project_id=demo.project_id, tool_pattern="create_ticket", action="approve",
                     position=5),
        ApprovalRule(name="big refunds to two", project_id=demo.project_id, tool_pattern="refund_*", action="ask_two",
                     position=20, conditions=[{"path": "$.amount", "op": "gt", "value": 500}]),
    ])
    now = timezone.now()
    requested = Approval._meta.get_field("requested_at")
    requested.auto_now_add = False  # the seeded times stand (the bench only)
    groups = [(demo, total, 0, 29.9), (demo, total // 5, 31, 120), (other, total // 5, 0, 29.9)]
    made = 0
    try:
        for agent, calls, oldest, newest in groups:
            for start in range(0, calls, BATCH):
                made += _batch(agent, min(BATCH, calls - start), oldest, newest, now, rng,
                               (Run, Step, ToolCall, Approval, CallEvidence))
    finally:
        requested.auto_now_add = True
    # Each call points at its approval, as the loop leaves it: one statement (a join) for all.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE runs_toolcall SET approval_id = a.id FROM runs_approval a "
                       "WHERE a.tool_call_id = runs_toolcall.id AND runs_toolcall.approval_id IS NULL")
    return {"in_window": total, "passed_over": made - total}


def _batch(agent, count: int, oldest: float, newest: float, now, rng, models) -> int:
    Run, Step, ToolCall, Approval, CallEvidence = models
    runs = Run.objects.bulk_create([Run(agent=agent, task="cancel what the customer asked", customer=f"C{n % 50}",
                                        status="succeeded", config=RUN_CONFIG)
                                    for n in range(count // CALLS_PER_RUN + 1)])
    steps = Step.objects.bulk_create([Step(run=run, index=1, iteration=1, model="m", message={}) for run in runs])
    calls, approvals, evidences = [], [], []
    for n in range(count):
        run, step = runs[n // CALLS_PER_RUN], steps[n // CALLS_PER_RUN]
        tool = rng.choice(("cancel_order", "cancel_order", "refund_order", "create_ticket"))
        order_id = ("VIP-" if rng.random() < 0.05 else "ORD-") + str(rng.randrange(1000, 99999))
        amount = rng.randrange(1, 900)
        arguments = json.dumps({"order_id": order_id, "amount": amount, "reason": "customer asked"})
        calls.append(ToolCall(run=run, step=step, index=n % CALLS_PER_RUN, call_id=f"c{n}", tool_name=tool,
                              arguments=arguments, args_hash=f"{rng.getrandbits(256):064x}", idempotency_key=f"k{n}",
                              status="succeeded"))
    ToolCall.objects.bulk_create(calls)
    for call in calls:
        when = now - timedelta(days=rng.uniform(oldest, newest))
        roll = rng.random()
        status, automatic, person, edited = "approved", False, rng.choice(("amy", "rita", "sam")), ""
        if roll < 0.15:
            status = "rejected"
        elif roll < 0.20:
            edited = "cd" * 32
        elif roll < 0.35:
            automatic, person = True, ""
        elif roll < 0.40:
            status, person = "expired", ""
        approvals.append(Approval(tool_call=call, run_id=call.run_id, status=status, automatic=automatic,
                                  decided_by_name=person, edited_args_hash=edited, requested_at=when,
                                  decided_at=when + timedelta(seconds=rng.randrange(2, 600)),
                                  rule_name="tickets" if automatic else "", reason="no" if status == "rejected" else "",
                                  unseen_ids=["ORD-1"] if rng.random() < 0.03 else []))
    Approval.objects.bulk_create(approvals)
    for call, approval in zip(calls, approvals, strict=True):
        arguments = json.loads(call.arguments)
        evidences.append(CallEvidence(approval=approval, project_id=agent.project_id, tool_name=call.tool_name,
                                      identity=call.args_hash, data=evidence(arguments["order_id"], arguments["amount"]),
                                      outside_paths=["$.reason"] if rng.random() < 0.02 else []))
    CallEvidence.objects.bulk_create(evidences)
    return count


EDITED = {"name": "small cancels", "tool_pattern": "cancel_order", "action": "approve", "position": 10,
          "conditions": [{"path": "$.amount", "op": "lt", "value": 300},
                         {"path": "$.order_id", "op": "fullmatch", "value": "ORD-[0-9]+"}]}
RULE_SET = [
    {"name": "never VIP", "tool_pattern": "cancel_order", "action": "reject",
     "conditions": [{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]},
    {"name": "outside text", "tool_pattern": "*", "action": "ask", "conditions": [{"path": "$.reason", "op": "outside"}]},
    EDITED,
    {"name": "small refunds", "tool_pattern": "refund_*", "action": "approve", "conditions": [{"path": "$.amount", "op": "lt", "value": 50}]},
    {"name": "tickets", "tool_pattern": "create_ticket", "action": "approve"},
]


def timed(repeat: int, function) -> tuple[list[float], list[float], object]:
    """(wall seconds, this process's CPU seconds, the last result) of each run: on a busy machine
    the CPU time is what the replay itself costs here, the wall time what a person waits."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = function()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return times, cpu, result


def main():
    args = parse_args()
    sys.path.insert(0, HERE)
    from bench._common import setup_django

    if args.reuse:
        setup_django(args.sqlite)
        where = os.environ.get("DATABASE_URL") or args.sqlite
    else:
        from bench.dashboard import fresh_database

        sqlite_path, where = fresh_database()
        setup_django(sqlite_path)
        from django.core.management import call_command

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        print(f"{where}: migrated in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        seeded = seed(args.calls)
        print(f"seeded {seeded['in_window']:,} calls in the window and {seeded['passed_over']:,} to pass over "
              f"(older, or another project's) in {time.perf_counter() - started:.1f} s")
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
    from django.db import connection

    from runs.models import Agent
    from runs.supervision.rules.backtest import (
        backtest_days,
        calls_query,
        rule_backtest,
        ruleset_backtest,
        ruleset_specs,
    )
    from runs.supervision.rules.preview import draft_spec

    project_id = Agent.objects.get(name="demo").project_id
    if args.explain and connection.vendor == "postgresql":
        from django.utils import timezone

        sql, params = calls_query(project_id, timezone.now() - timedelta(days=backtest_days())).query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            print("\n".join(row[0] for row in cursor.fetchall()))
    one_times, one_cpu, one = timed(args.repeat, lambda: rule_backtest(draft_spec(EDITED), project_id=project_id))
    specs, _skipped = ruleset_specs(RULE_SET)
    set_times, set_cpu, whole = timed(args.repeat, lambda: ruleset_backtest(specs, project_id=project_id))
    print(f"{connection.vendor}, {one.considered:,} calls people decided of "
          f"{one.considered + one.automatic + one.undecided:,} in the window; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'backtest':34} {'median s':>8} {'max s':>6} {'cpu s':>6} {'agreed':>7} {'disagreed':>9} "
          f"{'approved over a no':>18}")
    for name, times, cpu, result in (("one rule as edited, among 3 saved", one_times, one_cpu, one),
                                     ("a whole rule set of 5", set_times, set_cpu, whole)):
        print(f"{name:34} {statistics.median(times):8.2f} {max(times):6.2f} {statistics.median(cpu):6.2f} "
              f"{result.agreed:7,} {result.disagreed:9,} {result.approved_rejected:18,}")


if __name__ == "__main__":
    main()
