"""The rows of the daily rollups (runs/models/rollups.py) and how they change: a set of runs'
contribution by day, inserted into an empty day or taken out of one; upserts of day and month
rows; the latency buckets. runs/observability/metrics/rollups.py says when each is called, under which lock.
"""

import math
from collections import Counter, defaultdict
from datetime import date

from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, Sum

from runs.days import TruncDay
from runs.models import Approval, RunRollup, Step, StepRollup, ToolCall, ToolRollup
from runs.models.rollups import AllAgentsStepRollup, ApprovalRollup, ApprovalWait, DayRollup, FigureRollup, WaitRollup
from runs.observability.metrics import own_work
from runs.observability.metrics.aggregates import approval_wait_seconds
from runs.observability.metrics.totals import totals_by_day

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
ZERO_BUCKET = -(2**31)  # latencies of 0 ms or less


def latency_bucket(ms: float | None) -> int:
    if not ms or ms <= 0:
        return ZERO_BUCKET
    return math.ceil(math.log(ms) / _LOG_GAMMA)


def bucket_value(bucket: int) -> float:
    """The value that stands for a bucket: within RELATIVE_ACCURACY of every latency in it."""
    if bucket == ZERO_BUCKET:
        return 0.0
    return 2 * GAMMA**bucket / (GAMMA + 1)


def tool_counts():
    status = ToolCall.Status
    return {
        "finished": Count("pk", filter=Q(status__in=[status.SUCCEEDED, status.FAILED, status.REJECTED])),
        "failed": Count("pk", filter=Q(status=status.FAILED)),
        "rejected": Count("pk", filter=Q(status=status.REJECTED)),
    }


def row_add(model, keys: dict, **deltas) -> None:
    """Add `deltas` to the row of `keys` (the day is locked: nobody else writes it meanwhile)."""
    if not model.objects.filter(**keys).update(**{name: F(name) + value for name, value in deltas.items()}):
        model.objects.create(**keys, **deltas)


# --- a set of runs' contribution, by day -----------------------------------------------------------


def empty_contribution() -> tuple:
    return [], Counter(), [], [], [], Counter()


def contributions(runs) -> dict:
    """{day: (run rows, step rows, tool rows, approval rows, waits, totals)} of the ended runs `runs`
    (a queryset); totals {(agent, total name): value} as figures.py declares them."""
    found = defaultdict(empty_contribution)
    day_of_created = TruncDay("created_at")
    # Each run's own work (runs/observability/metrics/own_work.py): a fork's copies are its parent's.
    for day, agent, status, stop, iterations, n, tokens, cost in (
        runs.order_by()
        .annotate(_day=day_of_created, _iterations=own_work.own_iterations())
        .values_list("_day", "agent_id", "status", "stop_reason", "_iterations")
        .annotate(n=Count("pk"), tokens=Sum(own_work.own_tokens()), cost=Sum(own_work.own_cost()))
    ):
        found[as_date(day)][0].append((agent, status, stop, iterations, n, tokens or 0, cost or 0.0))
    run_ids = runs.order_by().values("pk")
    steps = own_work.own_steps(Step.objects.filter(run_id__in=run_ids), runs=run_ids)
    by_day = steps.annotate(_day=TruncDay("run__created_at"))
    for day, agent, model, latency in by_day.values_list("_day", "run__agent_id", "model", "latency_ms").iterator():
        found[as_date(day)][1][(agent, model, latency_bucket(latency))] += 1
    calls = own_work.own_calls(ToolCall.objects.filter(run_id__in=run_ids), runs=run_ids)
    for day, agent, tool, finished, failed, rejected in (
        calls.annotate(_day=TruncDay("run__created_at"))
        .order_by()
        .values_list("_day", "run__agent_id", "tool_name")
        .annotate(**tool_counts())
    ):
        if finished:
            found[as_date(day)][2].append((agent, tool, finished, failed, rejected))
    for day, (approvals, waits) in approval_parts(runs).items():
        found[day][3].extend(approvals)
        found[day][4].extend(waits)
    for day, agent, name, value in totals_by_day(runs=runs, steps=steps, calls=calls):
        found[as_date(day)][5][agent, name] += value
    return dict(found)


APPROVAL_KEYS = ("day", "agent_id", "status", "automatic", "granted", "rule_name", "rule_version", "tool_name")
PERSON_DECIDED = Q(
    status__in=[Approval.Status.APPROVED, Approval.Status.REJECTED], automatic=False, decided_at__isnull=False
)


def approval_parts(runs) -> dict:
    """{day: (approval rows (agent, status, automatic, granted, rule name, rule version, tool, n),
    waits (approval id, agent, rule name, tool, seconds))} of the runs `runs` (a queryset)."""
    found = defaultdict(lambda: ([], []))
    approvals = (
        Approval.objects.filter(run_id__in=runs.order_by().values("pk"))
        .order_by()
        .annotate(_day=TruncDay("run__created_at"))
    )
    granted = ExpressionWrapper(Q(grant__isnull=False), output_field=BooleanField())
    for day, *keys, n in (
        approvals.annotate(_granted=granted)
        .values_list(
            "_day",
            "run__agent_id",
            "status",
            "automatic",
            "_granted",
            "rule_name",
            "rule_version",
            "tool_call__tool_name",
        )
        .annotate(n=Count("pk"))
    ):
        found[as_date(day)][0].append((*keys, n))
    # The wait as the raw page computes it (the same SQL), so a stored wait is the raw value exactly.
    for approval, day, agent, rule, tool, wait in (
        approvals.filter(PERSON_DECIDED)
        .annotate(_wait=approval_wait_seconds())
        .values_list("pk", "_day", "run__agent_id", "rule_name", "tool_call__tool_name", "_wait")
    ):
        found[as_date(day)][1].append((approval, agent, rule, tool, wait))
    return dict(found)


def day_insert(day: date, contribution) -> None:
    """The day's rows (not its month's) of `contribution`, into a day that has none."""
    run_rows, step_counts, tool_rows, approval_rows, waits, totals = contribution
    RunRollup.objects.bulk_create(
        [
            RunRollup(
                day=day,
                agent_id=agent,
                status=status,
                stop_reason=stop,
                iterations=iterations,
                runs=n,
                tokens=tokens,
                cost_usd=cost,
            )
            for agent, status, stop, iterations, n, tokens, cost in run_rows
        ]
    )
    DayRollup.objects.bulk_create(
        [
            DayRollup(day=day, agent_id=agent, runs=n, tokens=tokens, cost_usd=cost)
            for agent, (n, tokens, cost) in _per_agent(run_rows).items()
        ]
    )
    ToolRollup.objects.bulk_create(
        [
            ToolRollup(day=day, agent_id=agent, tool_name=tool, finished=finished, failed=failed, rejected=rejected)
            for agent, tool, finished, failed, rejected in tool_rows
        ]
    )
    ApprovalRollup.objects.bulk_create(
        [ApprovalRollup(**dict(zip(APPROVAL_KEYS, (day, *keys))), approvals=n) for *keys, n in approval_rows]
    )
    waits_insert(day, waits, counts=False)
    FigureRollup.objects.bulk_create(
        [FigureRollup(day=day, agent_id=agent, name=name, value=value) for (agent, name), value in totals.items() if value]
    )


def _per_agent(run_rows) -> dict:
    """{agent: [runs, tokens, cost]} of outcome rows (agent, status, stop, iterations, runs, tokens, cost)."""
    by_agent = defaultdict(lambda: [0, 0, 0.0])
    for agent, _status, _stop, _iterations, n, tokens, cost in run_rows:
        found = by_agent[agent]
        found[0], found[1], found[2] = found[0] + n, found[1] + tokens, found[2] + cost
    return by_agent


def waits_insert(day: date, waits: list, *, counts: bool = True) -> None:
    """Store each wait of `waits` (see approval_parts), and with `counts` add them to the buckets."""
    ApprovalWait.objects.bulk_create(
        [
            ApprovalWait(
                approval_id=approval,
                day=day,
                agent_id=agent,
                rule_name=rule,
                tool_name=tool,
                bucket=latency_bucket(wait),
                wait=wait,
            )
            for approval, agent, rule, tool, wait in waits
        ],
        batch_size=500,
    )
    if counts:
        waits_add(day, wait_counts(waits))


def wait_counts(waits) -> Counter:
    """{(agent, rule name, tool, bucket): decisions} of waits given as rows ending (agent, rule, tool, wait)."""
    return Counter((*row[-4:-1], latency_bucket(row[-1])) for row in waits)


def day_add(day: date, contribution) -> None:
    """Add `contribution` (runs not counted yet) to the day's rows and its month's."""
    run_rows, step_counts, tool_rows, approval_rows, waits, totals = contribution
    outcomes_add(day, {tuple(row[:4]): tuple(row[4:]) for row in run_rows})
    for agent, (n, tokens, cost) in sorted(_per_agent(run_rows).items()):
        row_add(DayRollup, {"day": day, "agent_id": agent}, runs=n, tokens=tokens, cost_usd=cost)
    steps_add(day, step_counts)
    for agent, tool, finished, failed, rejected in sorted(tool_rows):
        row_add(ToolRollup, {"day": day, "agent_id": agent, "tool_name": tool},
                finished=finished, failed=failed, rejected=rejected)
    for *keys, n in approval_rows:
        row_add(ApprovalRollup, dict(zip(APPROVAL_KEYS, (day, *keys))), approvals=n)
    waits_insert(day, waits)
    totals_add(day, totals)


def day_subtract(day: date, contribution) -> None:
    run_rows, step_counts, tool_rows, approval_rows, waits, totals = contribution
    outcomes_add(day, {tuple(row[:4]): tuple(-value for value in row[4:]) for row in run_rows})
    for agent, (n, tokens, cost) in _per_agent(run_rows).items():
        DayRollup.objects.filter(day=day, agent_id=agent).update(
            runs=F("runs") - n, tokens=F("tokens") - tokens, cost_usd=F("cost_usd") - cost
        )
    steps_add(day, {key: -n for key, n in step_counts.items()})
    for agent, tool, finished, failed, rejected in tool_rows:
        ToolRollup.objects.filter(day=day, agent_id=agent, tool_name=tool).update(
            finished=F("finished") - finished, failed=F("failed") - failed, rejected=F("rejected") - rejected
        )
    for *keys, n in approval_rows:
        ApprovalRollup.objects.filter(**dict(zip(APPROVAL_KEYS, (day, *keys)))).update(approvals=F("approvals") - n)
    waits_add(day, {key: -n for key, n in wait_counts(waits).items()})
    totals_add(day, {key: -value for key, value in totals.items()})
    ApprovalWait.objects.filter(approval_id__in=[row[0] for row in waits]).delete()
    # Rows of no run any more say nothing; the pages must not list them as zeros.
    DayRollup.objects.filter(day=day, runs=0).delete()
    ToolRollup.objects.filter(day=day, finished=0).delete()
    ApprovalRollup.objects.filter(day=day, approvals=0).delete()


def steps_add(day: date, deltas: dict, *, rows=(False, True)) -> None:
    """Add {(agent id, model, bucket): steps} to the day's StepRollup rows and its month's (`rows`
    as in outcomes_add), and their sums over agents to AllAgentsStepRollup's."""
    _month_add(StepRollup, ("agent_id", "model", "bucket"), ("steps",), day, {k: (n,) for k, n in deltas.items()}, rows=rows)
    summed = Counter()
    for (_agent, model, bucket), n in deltas.items():
        summed[model, bucket] += n
    _month_add(AllAgentsStepRollup, ("model", "bucket"), ("steps",), day, {k: (n,) for k, n in summed.items()}, rows=rows)


def waits_add(day: date, deltas: dict) -> None:
    """Add {(agent id, rule name, tool, bucket): decisions} to the day's WaitRollup rows and its month's."""
    _month_add(
        WaitRollup,
        ("agent_id", "rule_name", "tool_name", "bucket"),
        ("decisions",),
        day,
        {k: (n,) for k, n in deltas.items()},
    )


def totals_add(day: date, deltas: dict, *, rows=(False, True)) -> None:
    """Add {(agent id, total name): value} to the day's FigureRollup rows and its month's (`rows` as
    in outcomes_add)."""
    _month_add(FigureRollup, ("agent_id", "name"), ("value",), day, {k: (v,) for k, v in deltas.items()}, rows=rows)


def outcomes_add(day: date, deltas: dict, *, rows=(False, True)) -> None:
    """Add {(agent id, status, stop reason, iterations): (runs, tokens, cost)} to the day's RunRollup
    rows and its month's (`rows`: (True,) for the month's only)."""
    _month_add(
        RunRollup,
        ("agent_id", "status", "stop_reason", "iterations"),
        ("runs", "tokens", "cost_usd"),
        day,
        deltas,
        rows=rows,
    )


def _month_add(model, keys: tuple, sums: tuple, day: date, deltas: dict, *, rows=(False, True)) -> None:
    """Add {key values: (sums)} to the day's rows of `model` and its month's (`whole_month` in
    `rows`), in one upsert each (keys sorted: two transactions adding to one month's rows lock
    them in the same order). The first of `sums` counts: rows where it is 0 are deleted."""
    found = sorted((key, values) for key, values in deltas.items() if any(values))
    if not found:
        return
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(name) for name in ("day", "whole_month", *keys, *sums))
    conflict = ", ".join(quote(name) for name in ("day", *keys, "whole_month"))
    update = ", ".join(f"{quote(name)} = {table}.{quote(name)} + excluded.{quote(name)}" for name in sums)
    marks = "(" + ", ".join(["%s"] * (len(keys) + len(sums) + 2)) + ")"
    for whole_month in rows:
        row_day = day.replace(day=1) if whole_month else day
        for first in range(0, len(found), 100):  # within every database's limit of parameters
            chunk = found[first : first + 100]
            params = [p for key, values in chunk for p in (row_day, whole_month, *key, *values)]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) VALUES {', '.join([marks] * len(chunk))} "
                    f"ON CONFLICT ({conflict}) DO UPDATE SET {update}",
                    params,
                )
        # Rows that count nothing any more say nothing; the pages must not list them. Only a
        # delta that is not positive can leave one (a subtraction, or a summary's 0 runs on a
        # new row); a run's ending adds, and skips this scan of the day's (or month's) rows.
        if any(values[0] <= 0 for _, values in found):
            model.objects.filter(day=row_day, whole_month=whole_month, **{sums[0]: 0}).delete()


def step_buckets(rows) -> Counter:
    return Counter((model, latency_bucket(latency)) for model, latency in rows)


def as_date(value) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value
