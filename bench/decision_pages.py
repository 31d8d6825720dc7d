"""The approval queue, one approval's page and the pending-approvals API at 100,000 runs, with a
full page of waiting calls, each carrying its evidence (issue 47: the decision moment).

Seeds as bench/dashboard.py does (100,000 runs, 1,000,000 steps), then turns the newest 60
cancel_order calls into calls that wait for a person: their runs wait, each call's step is
preceded by a lookup_order result, and each approval has the evidence row the loop writes when it
asks (what the model had just read, where each value came from, a state check's answer).

Then times the pages through Django's test Client, signed in as an operator who may decide (so
the per-person reads of the queue run too): the server's time, median and max ms.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_decisions .venv/bin/python bench/decision_pages.py
     [--runs 100000] [--steps 1000000] [--repeat 15]
     --reuse [--code DIR]: time the seeded database again, served by this checkout or by DIR's (the
     code before a change): run both in turn, several times, to compare before and after alternately.
The database is DROPPED and created again unless --reuse: its name must contain "bench".
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENDING = 60


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--call-share", type=float, default=0.3)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--code", help="with --reuse: the checkout whose code serves the pages")
    return parser.parse_args()


def evidence_data(order_id: str, step: int, call_pk: int) -> dict:
    result = json.dumps({"order_id": order_id, "item": "Blue kettle", "total": "39.90", "status": "cancelled"})
    read = [{"kind": "tool", "tool": "lookup_order", "step": step - 1, "call_pk": call_pk, "outside": False,
             "text": result, "chars": len(result)}]
    read += [{"kind": "tool", "tool": "search_tickets", "step": step - 2 - n, "call_pk": call_pk - 1 - n,
              "outside": False, "text": "x" * 600, "chars": 600} for n in range(4)]
    values = [
        {"path": "$.order_id", "value": order_id, "source": "tool", "words": f"from lookup_order's result at step {step - 1}",
         "tool": "lookup_order", "step": step - 1, "call_pk": call_pk, "before": '{"order_id": "', "match": order_id,
         "after": '", "item": "Blue kettle"', "outside": False},
        {"path": "$.reason", "value": "customer asked", "source": "model", "words": "the model wrote this", "outside": False},
    ]
    return {"said": f"The customer asked to cancel {order_id}; I will cancel it.", "read": read, "values": values}


def make_pending() -> int:
    """The newest cancel_order calls wait for a person, with their evidence. Returns how many."""
    from django.db import connection, transaction
    from django.utils import timezone

    from runs.models import Approval, Run, ToolCall

    tables = set(connection.introspection.table_names())
    with transaction.atomic():
        approvals = list(Approval.objects.filter(tool_call__tool_name="cancel_order").order_by("-pk")
                         .select_related("tool_call", "tool_call__step")[:PENDING])
        now = timezone.now()
        for n, approval in enumerate(approvals):
            order_id = f"ORD-{1000 + n}"
            arguments = json.dumps({"order_id": order_id, "reason": "customer asked"})
            ToolCall.objects.filter(pk=approval.tool_call_id).update(
                status=ToolCall.Status.AWAITING_APPROVAL, arguments=arguments, result_text="")
            Approval.objects.filter(pk=approval.pk).update(
                status=Approval.Status.PENDING, decided_at=None, automatic=False, requested_at=now)
            Run.objects.filter(pk=approval.run_id).update(status=Run.Status.AWAITING_APPROVAL, finished_at=None)
            if "runs_callevidence" in tables:
                from runs.models import CallEvidence

                step = approval.tool_call.step.index
                CallEvidence.objects.update_or_create(approval_id=approval.pk, defaults={
                    "tool_name": "cancel_order", "identity": f"{n:064x}",
                    "data": evidence_data(order_id, step, approval.tool_call_id),
                    "state": {"tool": "lookup_order", "ok": True, "summary": f"{order_id}: cancelled"},
                    "state_checked_at": now,
                })
    return len(approvals)


def measure(repeat: int) -> list[tuple[str, str, list[float], int]]:
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client

    from runs.models import Approval

    user = User.objects.get_or_create(username="bench-operator")[0]
    user.groups.add(Group.objects.get(name="operators"))
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    one = Approval.objects.filter(status=Approval.Status.PENDING).order_by("pk").values_list("pk", flat=True).first()
    pages = [("approvals queue", "/approvals/"), ("one approval's page", f"/approvals/{one}/"),
             ("pending approvals API", "/api/v1/approvals/")]
    timed = {}
    for name, url in pages:
        queries = []
        with connection.execute_wrapper(lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)):
            response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        timed[name] = ([], len(queries))
    cpu = {name: [] for name, _url in pages}
    for _ in range(repeat):  # pages in turn: a busy moment slows all of them alike
        for name, url in pages:
            started, started_cpu = time.perf_counter(), time.process_time()
            client.get(url)
            timed[name][0].append((time.perf_counter() - started) * 1000)
            cpu[name].append((time.process_time() - started_cpu) * 1000)
    # The server's own CPU time (this process: Django serves in it) is steadier than the clock on a
    # busy machine; the database's time is only in the clock's figure.
    return [(name, url, *timed[name], cpu[name]) for name, url in pages]


def main():
    args = parse_args()
    if args.reuse:
        code = os.path.abspath(args.code or HERE)
        sys.path[:] = [code] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
        os.chdir(code)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        import django

        django.setup()
    else:
        sys.path.insert(0, HERE)
        from bench._common import setup_django
        from bench.dashboard import fresh_database, seed

        sqlite_path, where = fresh_database()
        if sqlite_path:
            raise SystemExit("set DATABASE_URL to a PostgreSQL database named like bench_decisions")
        setup_django()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        args.no_analyze = False
        totals = seed(args)
        print(f"{where}: seeded {totals['runs']:,} runs, {totals['steps']:,} steps, {totals['approvals']:,} approvals")
        print(f"{make_pending()} calls wait for a person, with their evidence")
    import runs

    print(f"served by {os.path.dirname(os.path.dirname(runs.__file__))}")
    print(f"{'page':24} {'median ms':>9} {'max ms':>7} {'queries':>7} {'CPU ms (median)':>15}")
    for name, _url, times, queries, cpu in measure(args.repeat):
        print(f"{name:24} {statistics.median(times):9.1f} {max(times):7.1f} {queries:7d} {statistics.median(cpu):15.1f}")


if __name__ == "__main__":
    main()
