"""The metrics and history pages at 1,000,000 runs and 10,000,000 steps on PostgreSQL.

Seeds in SQL (INSERT ... SELECT over generate_series: minutes, not hours) a year of runs of five
agents, ten steps each (lognormal latencies per model), three tool calls each and an approval for
each call of the destructive tool; then VACUUM ANALYZE, `manage.py rebuild_rollups` (timed), and
times the pages as bench/dashboard.py does (the same page list and report, raw anchors included).

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_big .venv/bin/python bench/dashboard_big.py
     [--runs 1000000] [--days 365] [--repeat 5] [--raw-repeat 1] [--only metrics]
The database is DROPPED and created again: its name must contain "bench" (never start with "test").
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django  # noqa: E402
from bench.dashboard import AGENTS, MODELS, TOOLS, fresh_database, report  # noqa: E402

STEPS_PER_RUN = 10
CALL_STEPS = (2, 5, 8)  # the steps of a run that call a tool


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--raw-repeat", type=int, default=1)
    parser.add_argument("--only", default="", help="time only the pages whose name contains this")
    parser.add_argument("--reuse", action="store_true", help="time the database as it is: no seeding, no rebuild")
    return parser.parse_args()


def array(values) -> str:
    return "ARRAY[" + ", ".join("'" + value.replace("'", "''") + "'" for value in values) + "]"


def seed_sql(*, runs: int, days: int, agent_ids: list[int]) -> list[tuple[str, str]]:
    """(what, statement) in order. A run's values are functions of its id (a multiplicative hash
    picks its agent, outcome and task), so steps and calls find their run's agent and time again."""
    models, tools = array(MODELS), array(TOOLS)
    agents = "ARRAY[" + ", ".join(str(pk) for pk in agent_ids) + "]::bigint[]"
    medians = "ARRAY[" + ", ".join(str(m) for m, _s in MODELS.values()) + "]::float8[]"
    spreads = "ARRAY[" + ", ".join(str(s) for _m, s in MODELS.values()) + "]::float8[]"
    created = f"(now() - interval '{days} days' + (%s - 1) * (interval '{days} days' / {runs}))"
    agent_index = "((%s::bigint * 7919) %% 5)::int"
    outcome = (
        "CASE WHEN h < 75 THEN 'succeeded|final_answer' WHEN h < 83 THEN 'failed|iteration_limit' "
        "WHEN h < 86 THEN 'failed|repeated_call' WHEN h < 90 THEN 'failed|model_error' "
        "WHEN h < 92 THEN 'failed|token_budget' WHEN h < 94 THEN 'failed|verification_failed' "
        "WHEN h < 99 THEN 'cancelled|cancelled' ELSE 'failed|worker_lost' END"
    )
    task = (
        "CASE g % 6 WHEN 0 THEN 'What''s the weather in Lagos?' "
        "WHEN 1 THEN 'Cancel order ORD-' || (1000 + (g * 31) % 99000) || ' for the customer, they asked twice' "
        "WHEN 2 THEN 'Find tickets about login and summarise them' "
        "WHEN 3 THEN 'Customer wants a refund for order ORD-' || (1000 + (g * 37) % 99000) "
        "WHEN 4 THEN 'Open a ticket: export is broken since this morning' "
        "ELSE 'Look up order ORD-' || (1000 + (g * 41) % 99000) || ' and tell me when it ships' END"
    )
    run_created = created % "g"
    step_run = f"((s - 1) / {STEPS_PER_RUN} + 1)"
    lognormal = "exp({spread} * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))"
    return [
        (
            "runs",
            f"""
            INSERT INTO runs_run (id, agent_id, task, customer, config, overrides, status, stop_reason, stop_detail,
                answer, iterations, tokens_in, tokens_out, cost_usd, active_seconds, verification_attempts,
                pending_messages, cancel_requested, lease_owner, takeovers, event_seq, created_at, started_at,
                finished_at, pause_requested, paused_by_name, stop_requested_by_name, summary_pending,
                inherited_cost_usd, inherited_iterations, inherited_tokens_in, inherited_tokens_out,
                models_used, tools_used, compactions, tokens_cached, tokens_reasoning, experiment)
            SELECT g, ({agents})[1 + {agent_index % "g"}], {task}, 'acme', '{{}}', '{{}}',
                CASE WHEN going THEN 'running' ELSE split_part(o, '|', 1) END,
                CASE WHEN going THEN '' ELSE split_part(o, '|', 2) END, '', '', 1 + (g::bigint * 104729) % 19,
                {STEPS_PER_RUN} * (300 + (g * 13) % 3700), {STEPS_PER_RUN} * (10 + (g * 17) % 590),
                {STEPS_PER_RUN} * ((300 + (g * 13) % 3700) + 2.0 * (10 + (g * 17) % 590)) / 1e6, 12.5, 0, '[]',
                false, '', 0, 0, {run_created}, {run_created},
                CASE WHEN going THEN NULL ELSE {run_created} + interval '15 seconds' END, false, '', '',
                false, 0, 0, 0, 0, '', '', 0, 0, 0, false
            FROM generate_series(1, {runs}) g,
                LATERAL (SELECT (g::bigint * 2654435761) % 100 AS h) hashed,
                LATERAL (SELECT {outcome} AS o, {run_created} > now() - interval '10 minutes' AND g % 2 = 0 AS going) x
        """,
        ),
        (
            "steps",
            f"""
            INSERT INTO runs_step (id, run_id, index, iteration, kind, preamble, model, tool_choice,
                tool_choice_fallback, finish_reason, message, latency_ms, tokens_in, tokens_out, cost_usd, model_errors,
                created_at, notes, reasoning, compacted_calls, context_tokens, tokens_cached, tokens_reasoning,
                tool_definition_tokens)
            SELECT s, {step_run}, (s - 1) % {STEPS_PER_RUN} + 1, (s - 1) % {STEPS_PER_RUN} + 1, 'turn', '[]',
                ({models})[m], 'auto', false,
                CASE WHEN (s - 1) % {STEPS_PER_RUN} = {STEPS_PER_RUN - 1} THEN 'stop' ELSE 'tool_calls' END,
                '{{"role": "assistant", "content": "ok"}}', ({medians})[m] * {lognormal.format(spread=f"({spreads})[m]")},
                300 + (s * 13) % 3700, 10 + (s * 17) % 590, ((300 + (s * 13) % 3700) + 2.0 * (10 + (s * 17) % 590)) / 1e6,
                '[]', {created % step_run} + ((s - 1) % {STEPS_PER_RUN}) * interval '1 second', '[]', '',
                '[]', 0, 0, 0, 0
            FROM generate_series(1, {runs * STEPS_PER_RUN}) s,
                LATERAL (SELECT CASE WHEN random() < 0.08 THEN 1 + floor(random() * 4)::int
                                     ELSE 1 + {agent_index % step_run} % 4 END AS m) picked
        """,
        ),
        (
            "tool calls",
            f"""
            INSERT INTO runs_toolcall (id, run_id, step_id, index, call_id, tool_name, arguments, args_hash,
                idempotency_key, status, result_text, truncated, error, latency_ms, attempts, started_at, finished_at,
                executed_arguments, executed_args_hash)
            SELECT c, (c - 1) / 3 + 1, ((c - 1) / 3) * {STEPS_PER_RUN} + (ARRAY{list(CALL_STEPS)})[1 + (c - 1) % 3], 0,
                'call_' || c, t, '{{"id": 1}}', md5(c::text), lpad(to_hex(c), 40, '0'),
                CASE WHEN t = 'cancel_order' AND st = 'skipped' THEN 'succeeded' ELSE st END, 'ok', false,
                CASE WHEN st = 'failed' THEN 'boom' ELSE '' END, 2 + random() * 298, 1,
                {created % "((c - 1) / 3 + 1)"}, {created % "((c - 1) / 3 + 1)"}, '', ''
            FROM generate_series(1, {runs * len(CALL_STEPS)}) c,
                LATERAL (SELECT ({tools})[1 + (c * 13) % {len(TOOLS)}] AS t,
                                CASE WHEN r < 0.90 THEN 'succeeded' WHEN r < 0.96 THEN 'failed'
                                     WHEN r < 0.98 THEN 'rejected' ELSE 'skipped' END AS st
                         FROM (SELECT random() AS r) roll) picked
        """,
        ),
        (
            "approvals",
            f"""
            INSERT INTO runs_approval (tool_call_id, run_id, status, note, requested_at, expires_at, decided_at, reason,
                automatic, decided_by_name, rule_name, required_approvals, approvals_given, edited_arguments,
                edited_args_hash, guidance, unseen_ids, quorum_groups)
            SELECT id, run_id, CASE WHEN expired THEN 'expired' WHEN status = 'rejected' THEN 'rejected'
                                    ELSE 'approved' END,
                '', started_at, NULL,
                started_at + CASE WHEN expired THEN interval '1 hour'
                                  ELSE 45 * {lognormal.format(spread="1.0")} * interval '1 second' END,
                '', random() < 0.1, '', '', 1, 0, '', '', '', '[]', '[]'
            FROM runs_toolcall, LATERAL (SELECT random() < 0.05 AS expired) e
            WHERE tool_name = 'cancel_order'
        """,
        ),
    ]


def seed(args) -> None:
    from django.db import connection

    from runs.models import Agent

    agent_ids = [
        Agent.objects.create(name=name, model_list=[list(MODELS)[i % len(MODELS)]]).pk for i, name in enumerate(AGENTS)
    ]
    with connection.cursor() as cursor:
        for what, sql in seed_sql(runs=args.runs, days=args.days, agent_ids=agent_ids):
            started = time.perf_counter()
            cursor.execute(sql)
            print(f"seeded {cursor.rowcount:,} {what} in {time.perf_counter() - started:.1f} s", flush=True)
        for table in ("runs_run", "runs_step", "runs_toolcall", "runs_approval"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))")
        started = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE in {time.perf_counter() - started:.1f} s", flush=True)


def main():
    args = parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("PostgreSQL only: set DATABASE_URL")
    if not args.reuse:
        print(fresh_database()[1])
    setup_django()
    from django.core.management import call_command
    from django.db import connection

    from bench.dashboard import measure

    if not args.reuse:
        call_command("migrate", verbosity=0)
        seed(args)
        started = time.perf_counter()
        call_command("rebuild_rollups", verbosity=0)
        print(f"rebuild_rollups over {args.days} days: {time.perf_counter() - started:.1f} s", flush=True)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    from django.contrib.auth.models import User

    User.objects.filter(username="bench-viewer").delete()
    report(measure(args))
    print(
        f"\n{args.repeat} timed requests per page ({args.raw_repeat} for raw) after one warm-up, pages in turn; "
        f"database: {connection.vendor} {connection.settings_dict['NAME']}."
    )


if __name__ == "__main__":
    main()
