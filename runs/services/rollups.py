"""Keep the daily rollups (runs/models/rollups.py) exact: a run is added by the transaction
that ends it, changed by the transaction that adds its summary, taken out by the one that
deletes it, and a day is rebuilt from the runs' own rows under the same lock.

Why a run is counted exactly once, even while a rebuild runs: every change of a day's rollups
first locks the day's `RollupDay` row (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the one write
transaction at a time) and keeps it until its transaction commits. A rebuild of the day takes
the lock, then reads the runs. A run's ending that committed before sees its run read as ended
and counted by the rebuild (READ COMMITTED: each statement after the lock sees every commit made
before it); an ending that has not committed reads as not ended, is left out, and adds itself
once the rebuild commits, because its own transaction waits for the lock. There is no third case.

Model latency is kept as counts per logarithmic bucket (the DDSketch mapping: bucket i holds
(GAMMA^(i-1), GAMMA^i] and stands for the value within 1% of all of it), so percentiles merge
over any days; counts, tokens, cost and iterations (a count per iteration number) are exact.

A run's approvals are counted with it (they do not change once it has ended: its ending expires
the pending ones first, in the same transaction): counts by status, decider, rule and tool, the
waits of people's decisions as counts per bucket of seconds (the same mapping), and each of those
waits exactly (ApprovalWait), so the page finds an exact percentile inside the bucket it falls in.
"""
import math
from collections import Counter, defaultdict
from datetime import date, timedelta

from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, Sum
from django.utils import timezone

from runs.models import Approval, RollupDay, Run, RunRollup, Step, StepRollup, ToolCall, ToolRollup
from runs.models.rollups import ApprovalRollup, ApprovalWait, DayRollup, WaitRollup
from runs.selectors.aggregates import SecondsBetween, TruncDay
from runs.selectors.history import day_start
from runs.services.db import write_transaction

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


def run_day(run: Run) -> date:
    """The day a run belongs to on the metrics page: the site's day of its creation."""
    return timezone.localtime(run.created_at).date()


def _tool_counts():
    status = ToolCall.Status
    return {
        "finished": Count("pk", filter=Q(status__in=[status.SUCCEEDED, status.FAILED, status.REJECTED])),
        "failed": Count("pk", filter=Q(status=status.FAILED)),
        "rejected": Count("pk", filter=Q(status=status.REJECTED)),
    }


def _day_lock(day: date, *, new_day_built) -> RollupDay:
    """Lock the day's row, creating it when missing: `new_day_built()` says whether the rollups
    hold every ended run of a new day (a day whose runs ended before the rollups existed does not)."""
    locked = RollupDay.objects.select_for_update()
    # An UPDATE takes SQLite's write lock too; on PostgreSQL the SELECT FOR UPDATE below locks.
    if not RollupDay.objects.filter(day=day).update(built=F("built")):
        RollupDay.objects.bulk_create([RollupDay(day=day, built=new_day_built())], ignore_conflicts=True)
    return locked.get(day=day)


def _add(model, keys: dict, **deltas) -> None:
    """Add `deltas` to the row of `keys` (the day is locked: nobody else writes it meanwhile)."""
    if not model.objects.filter(**keys).update(**{name: F(name) + value for name, value in deltas.items()}):
        model.objects.create(**keys, **deltas)


def run_ended(*, run: Run, fields: dict) -> None:
    """Count `run`, ending in this transaction with its new `fields`, in its day's rollups."""
    values = {name: fields.get(name, getattr(run, name))
              for name in ("status", "stop_reason", "iterations", "tokens_in", "tokens_out", "cost_usd")}
    if values["status"] not in Run.FINISHED_STATUSES:
        return
    day = run_day(run)
    others_ended = _created_on(day).filter(status__in=Run.FINISHED_STATUSES).exclude(pk=run.pk)
    _day_lock(day, new_day_built=lambda: not others_ended.exists())
    keys = {"day": day, "agent_id": run.agent_id}
    tokens = values["tokens_in"] + values["tokens_out"]
    outcomes_add(day, {(run.agent_id, values["status"], values["stop_reason"], values["iterations"]):
                       (1, tokens, values["cost_usd"])})
    _add(DayRollup, keys, runs=1, tokens=tokens, cost_usd=values["cost_usd"])
    steps = _step_buckets(Step.objects.filter(run=run).values_list("model", "latency_ms"))
    steps_add(day, {(run.agent_id, model, bucket): n for (model, bucket), n in steps.items()})
    for tool, finished, failed, rejected in (
        ToolCall.objects.filter(run=run).order_by().values_list("tool_name").annotate(**_tool_counts())
    ):
        if finished:
            _add(ToolRollup, {**keys, "tool_name": tool}, finished=finished, failed=failed, rejected=rejected)
    approvals, waits = _approval_parts(Run.objects.filter(pk=run.pk)).get(day, ([], []))
    for agent, *approval_keys, n in approvals:
        _add(ApprovalRollup, dict(zip(APPROVAL_KEYS, (day, agent, *approval_keys))), approvals=n)
    _insert_waits(day, waits)


def summary_added(*, run: Run, step: Step, tokens: int, cost_usd: float) -> None:
    """Add an ended run's summary call (its step, tokens and cost) to its day's rollups."""
    if run.status not in Run.FINISHED_STATUSES:
        return
    day = run_day(run)
    _day_lock(day, new_day_built=lambda: False)
    outcomes_add(day, {(run.agent_id, run.status, run.stop_reason, run.iterations): (0, tokens, cost_usd)})
    DayRollup.objects.filter(day=day, agent_id=run.agent_id).update(
        tokens=F("tokens") + tokens, cost_usd=F("cost_usd") + cost_usd)
    steps_add(day, {(run.agent_id, step.model, latency_bucket(step.latency_ms)): 1})


def runs_deleted(*, run_ids: list[int]) -> None:
    """Take the ended runs among `run_ids`, about to be deleted in this transaction, out of the rollups."""
    runs = Run.objects.filter(pk__in=run_ids, status__in=Run.FINISHED_STATUSES)
    days = sorted({timezone.localtime(at).date() for at in runs.values_list("created_at", flat=True)})
    for day in days:  # in order: two deletions never wait for each other's days
        _day_lock(day, new_day_built=lambda: False)
    for day, contribution in _contributions(runs).items():
        _subtract(day, contribution)


def rebuild_day(day: date) -> None:
    """Recount the day's rollups from the rows of its ended runs, in one transaction under its lock."""
    with write_transaction():
        lock = _day_lock(day, new_day_built=lambda: False)
        old_steps = Counter({tuple(row[:3]): row[3] for row in _day_steps(day).values_list(
            "agent_id", "model", "bucket", "steps")})
        old_waits = _wait_counts(ApprovalWait.objects.filter(day=day).values_list(
            "agent_id", "rule_name", "tool_name", "wait"))
        old_outcomes = {tuple(row[:4]): row[4:] for row in RunRollup.objects.filter(day=day, whole_month=False).values_list(
            "agent_id", "status", "stop_reason", "iterations", "runs", "tokens", "cost_usd")}
        for model in (ToolRollup, ApprovalRollup, ApprovalWait, DayRollup):
            model.objects.filter(day=day).delete()
        RunRollup.objects.filter(day=day, whole_month=False).delete()
        runs = _created_on(day).filter(status__in=Run.FINISHED_STATUSES)
        contribution = _contributions(runs).get(day) or ([], Counter(), [], [], [])
        _insert(day, contribution)
        new_outcomes = {tuple(row[:4]): row[4:] for row in contribution[0]}
        # The month's rows change by the difference (other days' endings add to them meanwhile).
        outcomes_add(day, {key: tuple(new - old for new, old in zip(new_outcomes.get(key, (0, 0, 0.0)),
                                                                    old_outcomes.get(key, (0, 0, 0.0))))
                           for key in new_outcomes.keys() | old_outcomes.keys()}, rows=(True,))
        new_steps, new_waits = contribution[1], _wait_counts(contribution[4])
        steps_add(day, {key: new_steps[key] - old_steps[key] for key in new_steps.keys() | old_steps.keys()})
        waits_add(day, {key: new_waits[key] - old_waits[key] for key in new_waits.keys() | old_waits.keys()})
        lock.built = True
        lock.save(update_fields=["built"])


def rebuild(*, days: int | None = None, progress=None) -> int:
    """Rebuild the last `days` days (today included), or every day since the first run. Days
    without runs are built too (empty), so the metrics page reads them from the rollups."""
    today = timezone.localdate()
    if days is None:
        first = Run.objects.order_by("created_at").values_list("created_at", flat=True).first()
        first_day = timezone.localtime(first).date() if first else today
    else:
        first_day = today - timedelta(days=days - 1)
    day, count = first_day, 0
    while day <= today:
        rebuild_day(day)
        count += 1
        if progress:
            progress(day)
        day += timedelta(days=1)
    return count


# --- a set of runs' contribution, by day -----------------------------------------------------------

def _contributions(runs) -> dict:
    """{day: (run rows, step rows, tool rows, approval rows, waits)} of the ended runs `runs` (a queryset)."""
    found = defaultdict(lambda: ([], Counter(), [], [], []))
    day_of_created = TruncDay("created_at")
    for day, agent, status, stop, iterations, n, tokens, cost in (
        runs.order_by().annotate(_day=day_of_created).values_list("_day", "agent_id", "status", "stop_reason", "iterations")
        .annotate(n=Count("pk"), tokens=Sum(F("tokens_in") + F("tokens_out")), cost=Sum("cost_usd"))
    ):
        found[_as_date(day)][0].append((agent, status, stop, iterations, n, tokens or 0, cost or 0.0))
    run_ids = runs.order_by().values("pk")
    steps = Step.objects.filter(run_id__in=run_ids).annotate(_day=TruncDay("run__created_at"))
    for day, agent, model, latency in steps.values_list("_day", "run__agent_id", "model", "latency_ms").iterator():
        found[_as_date(day)][1][(agent, model, latency_bucket(latency))] += 1
    calls = ToolCall.objects.filter(run_id__in=run_ids).annotate(_day=TruncDay("run__created_at"))
    for day, agent, tool, finished, failed, rejected in (
        calls.order_by().values_list("_day", "run__agent_id", "tool_name").annotate(**_tool_counts())
    ):
        if finished:
            found[_as_date(day)][2].append((agent, tool, finished, failed, rejected))
    for day, (approvals, waits) in _approval_parts(runs).items():
        found[day][3].extend(approvals)
        found[day][4].extend(waits)
    return dict(found)


APPROVAL_KEYS = ("day", "agent_id", "status", "automatic", "granted", "rule_name", "rule_version", "tool_name")
PERSON_DECIDED = Q(status__in=[Approval.Status.APPROVED, Approval.Status.REJECTED], automatic=False,
                   decided_at__isnull=False)


def _approval_parts(runs) -> dict:
    """{day: (approval rows (agent, status, automatic, granted, rule name, rule version, tool, n),
    waits (approval id, agent, rule name, tool, seconds))} of the runs `runs` (a queryset)."""
    found = defaultdict(lambda: ([], []))
    approvals = Approval.objects.filter(run_id__in=runs.order_by().values("pk")).order_by().annotate(
        _day=TruncDay("run__created_at"))
    granted = ExpressionWrapper(Q(grant__isnull=False), output_field=BooleanField())
    for day, *keys, n in approvals.annotate(_granted=granted).values_list(
            "_day", "run__agent_id", "status", "automatic", "_granted", "rule_name", "rule_version",
            "tool_call__tool_name").annotate(n=Count("pk")):
        found[_as_date(day)][0].append((*keys, n))
    # The wait as the raw page computes it (the same SQL), so a stored wait is the raw value exactly.
    for approval, day, agent, rule, tool, wait in approvals.filter(PERSON_DECIDED).annotate(
            _wait=SecondsBetween("decided_at", "requested_at")).values_list(
            "pk", "_day", "run__agent_id", "rule_name", "tool_call__tool_name", "_wait"):
        found[_as_date(day)][1].append((approval, agent, rule, tool, wait))
    return dict(found)


def _insert(day: date, contribution) -> None:
    """The day's rows (not its month's) of `contribution`, into a day that has none."""
    run_rows, step_counts, tool_rows, approval_rows, waits = contribution
    RunRollup.objects.bulk_create([
        RunRollup(day=day, agent_id=agent, status=status, stop_reason=stop, iterations=iterations, runs=n,
                  tokens=tokens, cost_usd=cost) for agent, status, stop, iterations, n, tokens, cost in run_rows
    ])
    by_agent = defaultdict(lambda: [0, 0, 0.0])
    for agent, _status, _stop, _iterations, n, tokens, cost in run_rows:
        found = by_agent[agent]
        found[0], found[1], found[2] = found[0] + n, found[1] + tokens, found[2] + cost
    DayRollup.objects.bulk_create([DayRollup(day=day, agent_id=agent, runs=n, tokens=tokens, cost_usd=cost)
                                   for agent, (n, tokens, cost) in by_agent.items()])
    ToolRollup.objects.bulk_create([
        ToolRollup(day=day, agent_id=agent, tool_name=tool, finished=finished, failed=failed, rejected=rejected)
        for agent, tool, finished, failed, rejected in tool_rows
    ])
    ApprovalRollup.objects.bulk_create([
        ApprovalRollup(**dict(zip(APPROVAL_KEYS, (day, *keys))), approvals=n) for *keys, n in approval_rows
    ])
    _insert_waits(day, waits, counts=False)


def _insert_waits(day: date, waits: list, *, counts: bool = True) -> None:
    """Store each wait of `waits` (see _approval_parts), and with `counts` add them to the buckets."""
    ApprovalWait.objects.bulk_create([
        ApprovalWait(approval_id=approval, day=day, agent_id=agent, rule_name=rule, tool_name=tool,
                     bucket=latency_bucket(wait), wait=wait) for approval, agent, rule, tool, wait in waits
    ], batch_size=500)
    if counts:
        waits_add(day, _wait_counts(waits))


def _wait_counts(waits) -> Counter:
    """{(agent, rule name, tool, bucket): decisions} of waits given as rows ending (agent, rule, tool, wait)."""
    return Counter((*row[-4:-1], latency_bucket(row[-1])) for row in waits)


def _subtract(day: date, contribution) -> None:
    run_rows, step_counts, tool_rows, approval_rows, waits = contribution
    outcomes_add(day, {tuple(row[:4]): tuple(-value for value in row[4:]) for row in run_rows})
    by_agent = defaultdict(lambda: [0, 0, 0.0])
    for agent, _status, _stop, _iterations, n, tokens, cost in run_rows:
        found = by_agent[agent]
        found[0], found[1], found[2] = found[0] + n, found[1] + tokens, found[2] + cost
    for agent, (n, tokens, cost) in by_agent.items():
        DayRollup.objects.filter(day=day, agent_id=agent).update(
            runs=F("runs") - n, tokens=F("tokens") - tokens, cost_usd=F("cost_usd") - cost)
    steps_add(day, {key: -n for key, n in step_counts.items()})
    for agent, tool, finished, failed, rejected in tool_rows:
        ToolRollup.objects.filter(day=day, agent_id=agent, tool_name=tool).update(
            finished=F("finished") - finished, failed=F("failed") - failed, rejected=F("rejected") - rejected)
    for *keys, n in approval_rows:
        ApprovalRollup.objects.filter(**dict(zip(APPROVAL_KEYS, (day, *keys)))).update(approvals=F("approvals") - n)
    waits_add(day, {key: -n for key, n in _wait_counts(waits).items()})
    ApprovalWait.objects.filter(approval_id__in=[row[0] for row in waits]).delete()
    # Rows of no run any more say nothing; the pages must not list them as zeros.
    DayRollup.objects.filter(day=day, runs=0).delete()
    ToolRollup.objects.filter(day=day, finished=0).delete()
    ApprovalRollup.objects.filter(day=day, approvals=0).delete()


def _created_on(day: date):
    return Run.objects.filter(created_at__gte=day_start(day), created_at__lt=day_start(day + timedelta(days=1)))


def _day_steps(day: date):
    return StepRollup.objects.filter(day=day, whole_month=False)


def steps_add(day: date, deltas: dict) -> None:
    """Add {(agent id, model, bucket): steps} to the day's StepRollup rows and its month's."""
    _month_add(StepRollup, ("agent_id", "model", "bucket"), ("steps",), day, {k: (n,) for k, n in deltas.items()})


def waits_add(day: date, deltas: dict) -> None:
    """Add {(agent id, rule name, tool, bucket): decisions} to the day's WaitRollup rows and its month's."""
    _month_add(WaitRollup, ("agent_id", "rule_name", "tool_name", "bucket"), ("decisions",), day,
               {k: (n,) for k, n in deltas.items()})


def outcomes_add(day: date, deltas: dict, *, rows=(False, True)) -> None:
    """Add {(agent id, status, stop reason, iterations): (runs, tokens, cost)} to the day's RunRollup
    rows and its month's (`rows`: (True,) for the month's only)."""
    _month_add(RunRollup, ("agent_id", "status", "stop_reason", "iterations"), ("runs", "tokens", "cost_usd"), day,
               deltas, rows=rows)


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
                cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {', '.join([marks] * len(chunk))} "
                               f"ON CONFLICT ({conflict}) DO UPDATE SET {update}", params)
        # Rows that count nothing any more say nothing; the pages must not list them.
        model.objects.filter(day=row_day, whole_month=whole_month, **{sums[0]: 0}).delete()


def _step_buckets(rows) -> Counter:
    return Counter((model, latency_bucket(latency)) for model, latency in rows)


def _as_date(value) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value
