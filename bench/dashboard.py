"""The history and metrics pages at 100,000 runs and 1,000,000 steps.

Seeds a fresh database (bulk inserts: executemany on SQLite, COPY on PostgreSQL) with runs
spread over the last 90 days (the default retention; --days 365 for a year), their steps, tool
calls and approvals, builds the metrics rollups (manage.py rebuild_rollups, timed), then times
the pages through Django's test Client, signed in as a viewer: the server's time (routing,
queries, template), without a network or a browser. Prints median and max ms. Each metrics page
is timed with the rollups and without (the raw queries: the anchor), side by side on one line,
pages alternating (rollups, raw, rollups, ...) so a busy machine slows both alike. History pages
are timed at their first page and at late pages (any filter).

Run: .venv/bin/python bench/dashboard.py [--runs 100000] [--steps 1000000] [--days 90] [--repeat 7]
Uses a temporary SQLite file, or DATABASE_URL's database when set. That database is DROPPED
and created again, so its name must contain "bench" (never "test"), e.g.
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_dashboard .venv/bin/python bench/dashboard.py
--reuse times an existing database (--sqlite PATH, or DATABASE_URL) without seeding it; with
--code DIR the pages are served by another checkout of the project (e.g. the code before a
change), so before and after can be timed alternately over the same rows.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django  # noqa: E402

RUN_BATCH = 2_000  # runs per transaction, with their ~20,000 steps
AGENTS = ["support", "billing", "research", "ops", "sales"]
# name: (median latency ms, spread) — a lognormal per model, so p95 is well above p50.
MODELS = {"gpt-4o-mini": (600, 0.5), "gpt-4o": (1400, 0.6), "claude-haiku": (800, 0.4), "llama-70b": (2200, 0.8)}
TOOLS = ["get_weather", "search_tickets", "create_ticket", "get_ticket", "lookup_order", "cancel_order"]
TASKS = [
    "What's the weather in {city}?",
    "Cancel order ORD-{n} for the customer, they asked twice",
    "Find tickets about {word} and summarise them",
    "Customer wants a refund for order ORD-{n}",
    "Open a ticket: {word} is broken since this morning",
    "Look up order ORD-{n} and tell me when it ships",
]
CITIES = ["Lagos", "London", "Lima", "Oslo", "Pune", "Quito"]
WORDS = ["login", "invoice", "export", "billing", "latency", "password", "webhook"]
SHIPPING = ["shipped", "delivered", "in transit", "returned", "held at customs"]
# (status, stop reason, share)
OUTCOMES = [
    ("succeeded", "final_answer", 0.72),
    ("failed", "iteration_limit", 0.08),
    ("failed", "repeated_call", 0.03),
    ("failed", "model_error", 0.04),
    ("failed", "token_budget", 0.02),
    ("failed", "verification_failed", 0.02),
    ("cancelled", "cancelled", 0.05),
    ("failed", "worker_lost", 0.01),
    ("succeeded", "final_answer", 0.03),
]
CALL_OUTCOMES = [("succeeded", 0.90), ("failed", 0.06), ("rejected", 0.02), ("skipped", 0.02)]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90, help="days of history the runs are spread over")
    parser.add_argument("--raw-repeat", type=int, default=3, help="timed requests per metrics page without rollups (0: not even its warm-up: minutes at 1,000,000 runs)")
    parser.add_argument("--call-share", type=float, default=0.3, help="share of steps with a tool call")
    parser.add_argument("--repeat", type=int, default=7, help="timed requests per page (after one warm-up)")
    parser.add_argument("--no-analyze", action="store_true", help="skip (VACUUM) ANALYZE after seeding")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SQLite file")
    parser.add_argument("--reuse", action="store_true", help="time an existing database: no seeding, no rebuild")
    parser.add_argument("--sqlite", help="with --reuse: the SQLite file to time")
    parser.add_argument("--code", help="with --reuse: the checkout whose code serves the pages")
    parser.add_argument("--only", default="", help="time only the pages whose name contains this")
    return parser.parse_args()


# --- Database ------------------------------------------------------------------------------------


def fresh_database() -> tuple[str | None, str]:
    """(SQLite path or None, a description); a PostgreSQL database is dropped and created again."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        path = os.path.join(tempfile.mkdtemp(prefix="bench-dashboard-"), "db.sqlite3")
        return path, f"SQLite {path}"
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if "bench" not in name or name.startswith("test"):
        raise SystemExit(f"refusing to drop database {name!r}: use a database of its own named like bench_dashboard")
    import psycopg

    admin_url = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return None, f"PostgreSQL database {name}"


def remove_sqlite_database(path: str) -> None:
    """Close Django's connection and delete the SQLite file that fresh_database made, with its WAL files."""
    from django.db import connection

    connection.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


class Inserter:
    """Many rows into one table, fast: executemany on SQLite, COPY on PostgreSQL."""

    def with_defaults(self, table: str, columns: list[str], rows: list[tuple]) -> tuple[list[str], list[tuple]]:
        """The columns given, plus every NOT NULL column with a default that they leave out (a
        column added since this bench was written), set to the model field's default."""
        from django.apps import apps

        model = next(m for m in apps.get_models() if m._meta.db_table == table)
        extra = [
            f for f in model._meta.concrete_fields
            if f.column not in columns and not f.null and f.has_default() and not f.primary_key
        ]
        if not extra:
            return columns, rows
        values = tuple(f.get_db_prep_save(f.get_default(), self.connection) for f in extra)
        if self.vendor == "sqlite":
            values = tuple(json.dumps(v) if isinstance(v, (list, dict)) else v for v in values)
        return [*columns, *(f.column for f in extra)], [(*row, *values) for row in rows]

    def __init__(self, connection):
        self.connection = connection
        self.vendor = connection.vendor

    def when(self, moment: datetime):
        if self.vendor == "sqlite":
            return moment.replace(tzinfo=None).isoformat(" ")  # how Django stores it: naive UTC text
        return moment

    def insert(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        if not rows:
            return
        columns, rows = self.with_defaults(table, columns, rows)
        cols = ", ".join(f'"{c}"' for c in columns)
        raw = self.connection.connection
        if self.vendor == "sqlite":
            marks = ", ".join("?" for _ in columns)
            raw.executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', rows)
        else:
            with raw.cursor() as cursor, cursor.copy(f'COPY "{table}" ({cols}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)


RUN_COLUMNS = [
    "id",
    "agent_id",
    "task",
    "customer",
    "config",
    "overrides",
    "status",
    "stop_reason",
    "stop_detail",
    "answer",
    "iterations",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "active_seconds",
    "verification_attempts",
    "pending_messages",
    "cancel_requested",
    "lease_owner",
    "takeovers",
    "event_seq",
    "created_at",
    "started_at",
    "finished_at",
    "pause_requested",
    "paused_by_name",
    "stop_requested_by_name",
]
STEP_COLUMNS = [
    "id",
    "run_id",
    "index",
    "iteration",
    "kind",
    "preamble",
    "model",
    "tool_choice",
    "tool_choice_fallback",
    "finish_reason",
    "message",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "model_errors",
    "created_at",
]
CALL_COLUMNS = [
    "id",
    "run_id",
    "step_id",
    "index",
    "call_id",
    "tool_name",
    "arguments",
    "args_hash",
    "idempotency_key",
    "status",
    "result_text",
    "truncated",
    "error",
    "latency_ms",
    "attempts",
    "started_at",
    "finished_at",
    "executed_arguments",
    "executed_args_hash",
]
APPROVAL_COLUMNS = [
    "tool_call_id",
    "run_id",
    "status",
    "note",
    "requested_at",
    "expires_at",
    "decided_at",
    "reason",
    "automatic",
    "decided_by_name",
    "rule_name",
    "required_approvals",
    "approvals_given",
    "edited_arguments",
    "edited_args_hash",
    "guidance",
    "unseen_ids",
]


def pick(rng: random.Random, weighted: list[tuple]):
    """The value of one (value..., share) row, drawn by share."""
    roll = rng.random()
    for row in weighted:
        roll -= row[-1]
        if roll < 0:
            break
    return row[0] if len(row) == 2 else row[:-1]


def steps_per_run(rng: random.Random, runs: int, steps: int) -> list[int]:
    """Between 1 and 19 steps per run (mean steps/runs), adjusted to sum to exactly `steps`."""
    mean = steps / runs
    counts = [max(1, min(19, round(rng.gauss(mean, 4)))) for _ in range(runs)]
    diff = steps - sum(counts)
    i = 0
    while diff:
        j = i % runs
        if diff > 0 and counts[j] < 40:
            counts[j] += 1
            diff -= 1
        elif diff < 0 and counts[j] > 1:
            counts[j] -= 1
            diff += 1
        i += 1
    return counts


def seed(args) -> dict:
    from django.db import connection, transaction

    from runs.models import Agent

    rng = random.Random(20260301)
    ins = Inserter(connection)
    agent_ids = [
        Agent.objects.create(name=name, model_list=[list(MODELS)[i % len(MODELS)]]).pk for i, name in enumerate(AGENTS)
    ]
    counts = steps_per_run(rng, args.runs, args.steps)
    now = datetime.now(UTC)
    first = now - timedelta(days=args.days)
    spacing = (now - first) / args.runs
    message = json.dumps({"role": "assistant", "content": "ok"})
    model_names = list(MODELS)
    run_rows, step_rows, call_rows, approval_rows, search_rows = [], [], [], [], []
    totals = {"runs": 0, "steps": 0, "calls": 0, "approvals": 0, "search_texts": 0}
    step_id = call_id = 0

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=OFF")

    def flush():
        # One transaction per batch, parents first: the (deferred) foreign keys are checked at
        # each commit, so the database never queues a million pending checks.
        with transaction.atomic():
            for table, columns, rows, key in (
                ("runs_run", RUN_COLUMNS, run_rows, "runs"),
                ("runs_step", STEP_COLUMNS, step_rows, "steps"),
                ("runs_toolcall", CALL_COLUMNS, call_rows, "calls"),
                ("runs_approval", APPROVAL_COLUMNS, approval_rows, "approvals"),
                ("runs_runsearchtext", ("run_id", "text"), search_rows, "search_texts"),
            ):
                ins.insert(table, columns, rows)
                totals[key] += len(rows)
                rows.clear()

    started = time.perf_counter()
    for run_id in range(1, args.runs + 1):
        created = first + spacing * (run_id - 1) + timedelta(seconds=rng.random())
        agent_index = rng.randrange(len(agent_ids))
        model = model_names[agent_index % len(model_names)]
        status, stop_reason = pick(rng, OUTCOMES)
        recent = (now - created) < timedelta(minutes=10)
        if recent and rng.random() < 0.5:
            status, stop_reason = "running", ""
        template = rng.choice(TASKS)
        task = template.format(city=rng.choice(CITIES), n=rng.randint(1000, 99999), word=rng.choice(WORDS))
        n_steps = counts[run_id - 1]
        # What the history's search reads besides the task (runs/lifecycle/run_search.py): an
        # ended run's answer and the start of each tool result; TRK-<n> appears nowhere else.
        said = [f"Done: the {rng.choice(WORDS)} case for {rng.choice(CITIES)} is closed."]
        tokens_in = tokens_out = 0
        cost = 0.0
        moment = created
        for index in range(1, n_steps + 1):
            step_id += 1
            step_model = model if rng.random() > 0.08 else rng.choice(model_names)  # fallbacks
            median, spread = MODELS[step_model]
            latency = rng.lognormvariate(0, spread) * median
            t_in, t_out = rng.randint(300, 4000), rng.randint(10, 600)
            step_cost = (t_in * 1.0 + t_out * 2.0) / 1_000_000
            moment = moment + timedelta(milliseconds=latency + 50)
            tokens_in, tokens_out, cost = tokens_in + t_in, tokens_out + t_out, cost + step_cost
            step_rows.append(
                (
                    step_id,
                    run_id,
                    index,
                    index,
                    "turn",
                    "[]",
                    step_model,
                    "auto",
                    False,
                    "tool_calls" if index < n_steps else "stop",
                    message,
                    latency,
                    t_in,
                    t_out,
                    step_cost,
                    "[]",
                    ins.when(moment),
                )
            )
            if index < n_steps and rng.random() < args.call_share:
                call_id += 1
                tool = rng.choice(TOOLS)
                call_status = pick(rng, CALL_OUTCOMES)
                if tool == "cancel_order" and call_status == "skipped":
                    call_status = "succeeded"
                said.append(f'{{"ok": true, "result": {{"tool": "{tool}", "status": "{rng.choice(SHIPPING)}", '
                            f'"tracking": "TRK-{rng.randint(10000, 99999)}", "city": "{rng.choice(CITIES)}"}}}}')
                call_rows.append(
                    (
                        call_id,
                        run_id,
                        step_id,
                        0,
                        f"call_{call_id}",
                        tool,
                        '{"id": 1}',
                        f"{rng.getrandbits(128):032x}",
                        f"{call_id:040x}",
                        call_status,
                        "ok",
                        False,
                        "boom" if call_status == "failed" else "",
                        rng.uniform(2, 300),
                        1,
                        ins.when(moment),
                        ins.when(moment),
                        "",
                        "",
                    )
                )
                if tool == "cancel_order":
                    wait = timedelta(seconds=rng.lognormvariate(0, 1.0) * 45)
                    decision = {"rejected": "rejected"}.get(call_status, "approved")
                    if rng.random() < 0.05:
                        decision, wait = "expired", timedelta(hours=1)
                    approval_rows.append(
                        (
                            call_id,
                            run_id,
                            decision,
                            "",
                            ins.when(moment),
                            None,
                            ins.when(moment + wait),
                            "",
                            rng.random() < 0.1,
                            "",
                            "",
                            1,
                            0,
                            "",
                            "",
                            "",
                            "[]",
                        )
                    )
        run_rows.append(
            (
                run_id,
                agent_ids[agent_index],
                task,
                "acme",
                "{}",
                "{}",
                status,
                stop_reason,
                "",
                "",
                n_steps,
                tokens_in,
                tokens_out,
                cost,
                (moment - created).total_seconds(),
                0,
                "[]",
                False,
                "",
                0,
                0,
                ins.when(created),
                ins.when(created),
                ins.when(moment) if status != "running" else None,
                False,
                "",
                "",
            )
        )
        if status != "running":
            search_rows.append((run_id, "\n".join(said).upper()))  # stored as search_form does
        if len(run_rows) >= RUN_BATCH:
            flush()
    flush()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in ("runs_run", "runs_step", "runs_toolcall", "runs_approval"):
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"
                )
    totals["seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    if not args.no_analyze:
        # Planner statistics, and on PostgreSQL the visibility map that index-only scans need:
        # autovacuum does both soon after a bulk load; SQLite gathers statistics only on ANALYZE
        # or `PRAGMA optimize`.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    totals["analyze_seconds"] = time.perf_counter() - started
    return totals


# --- Timing --------------------------------------------------------------------------------------


def measure(args) -> list[tuple[str, str, list[float], int, int]]:
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from runs.models import Agent, Run

    user = User.objects.get_or_create(username="bench-viewer")[0]
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    today = timezone.localdate()
    month = {"date_from": (today - timedelta(days=29)).isoformat(), "date_to": today.isoformat()}
    support = Agent.objects.get(name="support").pk
    pages = [
        ("history, first page", "/runs/"),
        ("history, status=failed + model", "/runs/?" + urlencode({"status": "failed", "model": "claude-haiku"})),
        ("history, tool + agent", "/runs/?" + urlencode({"tool": "cancel_order", "agent": support})),
        ("history, text search", "/runs/?" + urlencode({"q": "refund"})),
        ("history, text search, rare", "/runs/?" + urlencode({"q": "ORD-12345"})),
        ("history, search of results", "/runs/?" + urlencode({"q": "customs"})),
        ("history, search of results, rare", "/runs/?" + urlencode({"q": "TRK-54321"})),
        ("history, search of results, page 100", "/runs/?" + urlencode({"q": "customs", "page": 100})),
        ("history, last 7 days", "/runs/?" + urlencode({"created_from": (today - timedelta(days=6)).isoformat()})),
        ("history, late page (1,500)", "/runs/?page=1500"),
        ("history, last page (2,000)", "/runs/?page=2000"),
        ("history, model, page 1", "/runs/?" + urlencode({"model": "gpt-4o"})),
        ("history, model, page 500", "/runs/?" + urlencode({"model": "gpt-4o", "page": 500})),
        (
            "history, failed + model, page 100",
            "/runs/?" + urlencode({"status": "failed", "model": "claude-haiku", "page": 100}),
        ),
        ("history, tool, page 500", "/runs/?" + urlencode({"tool": "cancel_order", "page": 500})),
        (
            "history, tool + agent, page 100",
            "/runs/?" + urlencode({"tool": "cancel_order", "agent": support, "page": 100}),
        ),
        ("history, text search, page 300", "/runs/?" + urlencode({"q": "refund", "page": 300})),
        ("history, status, past the end", "/runs/?" + urlencode({"status": "cancelled", "page": 5000})),
        ("metrics, default 7 days", "/metrics/"),
        ("metrics, last 30 days", "/metrics/?" + urlencode(month)),
        ("metrics, 30 days, one agent", "/metrics/?" + urlencode({**month, "agent": support})),
        (
            "metrics, 90 days",
            "/metrics/?"
            + urlencode({"date_from": (today - timedelta(days=89)).isoformat(), "date_to": today.isoformat()}),
        ),
        (
            "metrics, 365 days",
            "/metrics/?"
            + urlencode({"date_from": (today - timedelta(days=364)).isoformat(), "date_to": today.isoformat()}),
        ),
    ]
    # The run page of the newest run with tool calls, and the approvals queue.
    with_calls = Run.objects.filter(tool_calls__isnull=False).order_by("-pk").values_list("pk", flat=True).first()
    pages += [("run page, newest run with calls", f"/runs/{with_calls}/"), ("approvals queue", "/approvals/")]
    pages = [(name, address) for name, address in pages if args.only in name]
    timed = {}
    for name, url in pages:
        for raw in (False, True) if url.startswith("/metrics/") and args.raw_repeat else (False,):  # 0: no raw at all
            settings.METRICS_ROLLUPS = not raw
            queries = []
            with connection.execute_wrapper(lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)):
                response = client.get(url)  # warm-up (and a query count)
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code}")
            timed[name, raw] = ([], len(queries), response.content.decode().count('class="run-row"'))
    for n in range(max(args.repeat, args.raw_repeat)):  # alternately: each page's rounds spread over the run
        for (name, raw), (times, _queries, _rows) in timed.items():
            if n < (args.raw_repeat if raw else args.repeat):
                settings.METRICS_ROLLUPS = not raw
                url = dict(pages)[name]
                started = time.perf_counter()
                client.get(url)
                times.append((time.perf_counter() - started) * 1000)
    settings.METRICS_ROLLUPS = True
    return [(name, url, timed[name, False], timed.get((name, True))) for name, url in pages]


def report(results) -> None:
    print(
        f"\n{'page':36} {'median ms':>9} {'max ms':>7} {'queries':>7} {'rows':>4} | {'raw median':>10} {'raw max':>7} "
        f"{'queries':>7}   url"
    )
    for name, url, (times, queries, rows), raw in results:
        line = f"{name:36} {statistics.median(times):9.1f} {max(times):7.1f} {queries:7d} {rows:4d} | "
        if raw and raw[0]:  # --raw-repeat 0: none timed
            line += f"{statistics.median(raw[0]):10.1f} {max(raw[0]):7.1f} {raw[1]:7d}"
        else:
            line += f"{'':10} {'':7} {'':7}"
        print(line + f"   {url}")


def main():
    args = parse_args()
    if args.reuse:
        return main_reuse(args)
    sqlite_path, where = fresh_database()
    setup_django(sqlite_path)
    from django.core.management import call_command
    from django.db import connection

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    print(f"{where}: migrated in {time.perf_counter() - started:.1f} s")
    totals = seed(args)
    print(
        f"seeded {totals['runs']:,} runs, {totals['steps']:,} steps, {totals['calls']:,} tool calls, "
        f"{totals['approvals']:,} approvals, {totals['search_texts']:,} search texts in {totals['seconds']:.1f} s "
        f"({(totals['runs'] + totals['steps'] + totals['calls'] + totals['approvals']) / totals['seconds']:,.0f} "
        f"rows/s); " + ("no ANALYZE" if args.no_analyze else f"(VACUUM) ANALYZE {totals['analyze_seconds']:.1f} s")
    )
    started = time.perf_counter()
    call_command("rebuild_rollups", verbosity=0)
    print(f"rebuild_rollups over {args.days} days: {time.perf_counter() - started:.1f} s")
    report(measure(args))
    footer(args, connection.vendor)
    if sqlite_path and not args.keep:
        remove_sqlite_database(sqlite_path)


def main_reuse(args) -> None:
    """Time the pages of an existing database, served by this checkout or by `--code`'s."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = os.path.abspath(args.code or here)
    sys.path[:] = [code] + [path for path in sys.path if os.path.abspath(path or ".") != here]
    os.chdir(code)
    if args.sqlite:
        os.environ["SQLITE_PATH"] = args.sqlite
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection

    import runs

    User.objects.filter(username="bench-viewer").delete()
    print(
        f"{connection.vendor} {connection.settings_dict['NAME']}, served by {os.path.dirname(os.path.dirname(runs.__file__))}"
    )
    report(measure(args))
    footer(args, connection.vendor)


def footer(args, vendor: str) -> None:
    print(
        f"\n{args.repeat} timed requests per page ({args.raw_repeat} for raw: the same metrics page without the "
        f"rollups, the anchor) after one warm-up, pages taken in turn; Django test Client, signed in as a viewer; "
        f"database: {vendor}."
    )


if __name__ == "__main__":
    main()
