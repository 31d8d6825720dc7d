"""/metrics (the Prometheus scrape) at 100,000 runs and 1,000,000 steps.

Seeds the same data as bench/dashboard.py (runs over 90 days, their steps, tool calls and
approvals), then times the scrape through Django's test Client with a bearer token: the
server's time (queries, exposition), without a network. Prints median and max ms, the number
of queries and of samples.

Run: .venv/bin/python bench/prometheus_scrape.py [--runs 100000] [--steps 1000000] [--repeat 7]
Uses a temporary SQLite file, or DATABASE_URL's database when set. That database is DROPPED
and created again, so its name must contain "bench" (never "test").
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django  # noqa: E402
from bench.dashboard import fresh_database, parse_args, remove_sqlite_database, seed  # noqa: E402

TOKEN = "bench-scrape-token"


def measure(repeat: int) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test import Client, override_settings

    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    with override_settings(METRICS_TOKEN=TOKEN):
        queries = []
        with connection.execute_wrapper(lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)):
            response = client.get("/metrics")  # warm-up (and a query count)
        if response.status_code != 200:
            raise SystemExit(f"/metrics answered {response.status_code}")
        samples = sum(1 for line in response.content.decode().splitlines() if line and not line.startswith("#"))
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get("/metrics")
            times.append((time.perf_counter() - started) * 1000)
    return times, len(queries), samples


def main():
    args = parse_args()
    sqlite_path, where = fresh_database()
    setup_django(sqlite_path)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    totals = seed(args)
    print(f"{where}: seeded {totals['runs']:,} runs, {totals['steps']:,} steps, {totals['calls']:,} tool calls, "
          f"{totals['approvals']:,} approvals in {totals['seconds']:.1f} s")
    times, queries, samples = measure(args.repeat)
    print(f"/metrics: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms, {queries} queries, "
          f"{samples} samples ({args.repeat} timed scrapes after one warm-up; database: {connection.vendor})")
    if sqlite_path and not args.keep:
        remove_sqlite_database(sqlite_path)


if __name__ == "__main__":
    main()
