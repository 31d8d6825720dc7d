"""Where one iteration's time goes, in one process, without the noise of a hundred threads.

Drives --runs runs of 5 iterations each (a weather tool call four times, then an answer) one
after the other through the real loop (`run_advance`, as a worker's task does) against the
offline demo model at zero latency, and prints per iteration: CPU milliseconds, SQL statements
(by kind, and the slowest in CPU), transactions, bytes sent to the database, Redis commands and
bytes, then the profile's top functions and the share of CPU by package (Django's ORM, psycopg,
JSON, the channel layer, the openai client, ...).
Run: .venv/bin/python bench/iteration_profile.py [--runs 40] [--top 30] [--sql] [--decisions 20]
--decisions N also measures a person's approval and the iteration it resumes (capacity model).
Uses DATABASE_URL when set (PostgreSQL), else a temporary SQLite file; REDIS_URL (db 13 by default).
For another checkout (before/after): --code DIR (its own module paths are found).
"""

import argparse
import atexit
import collections
import cProfile
import json
import os
import pstats
import re
import sys
import tempfile
import time
import urllib.request

ITERATIONS = 5


def script_for(url: str, responses: list | None = None) -> str:
    """A scripted model of the demo server: by default four weather calls, then an answer."""
    if responses is None:
        tool = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}
        responses = [tool] * (ITERATIONS - 1) + [{"content": "Lagos is sunny."}]
    req = urllib.request.Request(
        url + "/scripts",
        data=json.dumps({"responses": responses, "record": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    return json.loads(urllib.request.urlopen(req).read())["model"]


def _import_first(*names):
    import importlib

    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    raise ImportError(names)


def package_of(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0]
    if "/python3.11/" in filename or filename.startswith("<frozen"):
        name = filename.split("/python3.11/")[-1]
        return "stdlib:" + name.split("/")[0].removesuffix(".py")
    if filename.startswith("~") or filename.startswith("{"):
        return "builtins"
    m = re.search(r"/(runs|toolsapp|accounts|agentsite)/(.*)", filename)
    return f"{m.group(1)}/{m.group(2)}" if m else filename


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sql", action="store_true", help="print every distinct statement with its count")
    parser.add_argument("--dump", metavar="FILE", help="also write the profile (pstats) to FILE")
    parser.add_argument("--no-profile", action="store_true", help="time without the profiler (its overhead is ~2x)")
    parser.add_argument("--decisions", type=int, default=0, metavar="N",
                        help="also N runs whose one destructive call (cancel_order) waits for a person: "
                             "the statements and Redis commands of a decision and of the resumed iteration")
    parser.add_argument("--code", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    sys.path.insert(0, args.code)
    os.chdir(args.code)
    tmp = tempfile.mkdtemp(prefix="bench-profile-")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DEMO_MODEL_PACE", "instant")
    # The demo model in a process of its own: its CPU is not the loop's.
    sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench._common import start_demo_model

    demo, url = start_demo_model(latency=0.0)
    atexit.register(demo.terminate)
    os.environ["DEMO_MODEL_URL"] = url
    if not os.environ.get("DATABASE_URL"):
        os.environ["SQLITE_PATH"] = os.path.join(tmp, "bench.sqlite3")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0)
    import redis

    r = redis.Redis.from_url(settings.REDIS_URL)
    r.flushdb()
    run_advance = _import_first("runs.engine.loop.run_advance", "runs.services.loop.run_advance")
    run_create = _import_first("runs.lifecycle.runs.run_create", "runs.services.runs.run_create")
    from runs.models import Agent, Run

    if not Agent.objects.filter(name="demo").exists():
        call_command("seed_demo", verbosity=0)
    agent = Agent.objects.get(name="demo")

    def make(n):
        models = [script_for(url) for _ in range(n)]
        with transaction.atomic():
            return [
                run_create(
                    agent=agent,
                    task="What's the weather in Lagos?",
                    overrides={"models": [m], "tools": ["get_weather"], "repeat_limit": 100},
                ).pk
                for m in models
            ]

    # Warm up: clients, caches, compiled statements.
    for run_id in make(3):
        run_advance(run_id=run_id)
    ids = make(args.runs)

    statements = collections.Counter()
    sent_bytes = [0]
    transactions = [0]

    def wrapper(execute, sql, params, many, context):
        kind = sql.split(None, 1)[0].upper()
        key = re.sub(r"\s+", " ", re.sub(r"%s(, %s)*", "?", sql))[:160] if args.sql else kind
        statements[key] += 1
        sent_bytes[0] += len(sql) + sum(len(str(p)) for p in (params or ()) if not many)
        return execute(sql, params, many, context)

    info_before = r.info("commandstats")
    net_before = r.info("stats")
    from django.db.backends.signals import connection_created  # noqa: F401

    original_commit = connection.commit

    def counting_commit(*a, **kw):
        transactions[0] += 1
        return original_commit(*a, **kw)

    connection.commit = counting_commit
    profile = cProfile.Profile(time.process_time)  # CPU, not the waits on the database and the model
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    with connection.execute_wrapper(wrapper):
        if not args.no_profile:
            profile.enable()
        for run_id in ids:
            run_advance(run_id=run_id)
        profile.disable()
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    done = Run.objects.filter(pk__in=ids, status="succeeded").count()
    iterations = args.runs * ITERATIONS
    info_after, net_after = r.info("commandstats"), r.info("stats")
    redis_calls = {
        k: info_after[k]["calls"] - info_before.get(k, {"calls": 0})["calls"]
        for k in info_after
        if info_after[k]["calls"] != info_before.get(k, {"calls": 0})["calls"] and k != "cmdstat_info"
    }
    redis_in = net_after["total_net_input_bytes"] - net_before["total_net_input_bytes"]
    print(
        f"database: {connection.vendor}; code {args.code}; {args.runs} runs x {ITERATIONS} iterations "
        f"({done} succeeded), one thread, demo model at zero latency"
    )
    print(
        f"per iteration: CPU {1000 * cpu / iterations:.2f} ms (wall {1000 * wall / iterations:.2f} ms"
        f"{', without the profiler' if args.no_profile else ', profiled: about twice the real cost'})"
    )
    total = sum(statements.values())
    print(
        f"  SQL statements {total / iterations:.1f} (commits {transactions[0] / iterations:.1f}), "
        f"bytes to the database ~{sent_bytes[0] / iterations:.0f}"
    )
    for key, n in statements.most_common(60 if args.sql else 10):
        print(f"    {n / iterations:5.2f}  {key}")
    print(
        f"  Redis commands {sum(redis_calls.values()) / iterations:.1f} "
        f"({', '.join(f'{k[8:]} {v / iterations:.2f}' for k, v in sorted(redis_calls.items()))}), "
        f"bytes to Redis ~{redis_in / iterations:.0f}"
    )
    if args.decisions:
        decision_cost(args.decisions, agent=agent, url=url, run_create=run_create, run_advance=run_advance, redis=r)
    if args.no_profile:
        return
    stats = pstats.Stats(profile)
    if args.dump:
        stats.dump_stats(args.dump)
    by_package = collections.Counter()
    for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():
        by_package[package_of(filename)] += tt
    profiled = sum(by_package.values())
    grouped = collections.Counter()
    for name, t in by_package.items():
        grouped[name.split("/")[0] if not name.startswith(("runs/", "toolsapp/")) else name] += t
    print("CPU by package (self time, share of the profiled total):")
    for name, t in grouped.most_common(25):
        print(f"  {100 * t / profiled:5.1f}%  {1000 * t / iterations:6.3f} ms/iter  {name}")
    print(f"top {args.top} functions by cumulative time (ms per iteration):")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])
    shown = 0
    for (filename, line, name), (_cc, nc, _tt, ct, _callers) in rows:
        where = package_of(filename)
        if not where.startswith(("runs/", "toolsapp/")):
            continue
        print(f"  {1000 * ct / iterations:7.3f}  {nc / iterations:6.2f} calls  {where}:{line} {name}")
        shown += 1
        if shown >= args.top:
            break


def decision_cost(n: int, *, agent, url, run_create, run_advance, redis) -> None:
    """A person's decision and the iteration it resumes, measured apart: n runs each ask to cancel
    an order (destructive, "ask" policy), park awaiting approval, and are approved one by one."""
    from django.contrib.auth.models import User
    from django.db import connection

    from runs.models import Approval, Run
    from runs.supervision.approvals.decide import approval_decide

    person = User.objects.filter(username="bench-operator").first() or User.objects.create_superuser(
        "bench-operator", "bench@example.com", "unused-password"
    )
    responses = [{"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-1001", "reason": "asked"}}]},
                 {"content": "Cancelled."}]
    ids = []
    for _ in range(n):
        model = script_for(url, responses)
        run = run_create(agent=agent, task="Cancel order ORD-1001", approval_policy="ask",
                         overrides={"models": [model], "tools": ["cancel_order"]})
        run_advance(run_id=run.pk)
        ids.append(run.pk)
    pending = list(Approval.objects.filter(run_id__in=ids, status="pending").values_list("pk", flat=True))
    for phase, work in (
        ("a decision (approval_decide)", lambda: [approval_decide(approval_id=a, user=person, approve=True) for a in pending]),
        ("the resumed iteration (run_advance after the approval)", lambda: [run_advance(run_id=i) for i in ids]),
    ):
        counted = collections.Counter()

        def wrapper(execute, sql, params, many, context):
            counted[sql.split(None, 1)[0].upper()] += 1
            return execute(sql, params, many, context)

        before = sum(v["calls"] for k, v in redis.info("commandstats").items() if k != "cmdstat_info")
        cpu = time.process_time()
        with connection.execute_wrapper(wrapper):
            work()
        cpu = time.process_time() - cpu
        calls = sum(v["calls"] for k, v in redis.info("commandstats").items() if k != "cmdstat_info") - before - 1
        print(f"{phase}, per approval of {len(pending)}: CPU {1000 * cpu / len(pending):.2f} ms, SQL statements "
              f"{sum(counted.values()) / len(pending):.1f} ({', '.join(f'{k} {v / len(pending):.1f}' for k, v in counted.most_common())}), "
              f"Redis commands {calls / len(pending):.1f}")
    done = Run.objects.filter(pk__in=ids, status="succeeded").count()
    print(f"  {done} of {n} runs succeeded after their approval")


if __name__ == "__main__":
    main()
