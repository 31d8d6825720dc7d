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
"""
import math
from collections import Counter, defaultdict
from datetime import date, timedelta

from django.db import connection
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from runs.models import RollupDay, Run, RunRollup, Step, StepRollup, ToolCall, ToolRollup
from runs.selectors.aggregates import TruncDay
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
    _add(RunRollup, {**keys, "status": values["status"], "stop_reason": values["stop_reason"],
                     "iterations": values["iterations"]},
         runs=1, tokens=values["tokens_in"] + values["tokens_out"], cost_usd=values["cost_usd"])
    steps = _step_buckets(Step.objects.filter(run=run).values_list("model", "latency_ms"))
    steps_add(day, {(run.agent_id, model, bucket): n for (model, bucket), n in steps.items()})
    for tool, finished, failed, rejected in (
        ToolCall.objects.filter(run=run).order_by().values_list("tool_name").annotate(**_tool_counts())
    ):
        if finished:
            _add(ToolRollup, {**keys, "tool_name": tool}, finished=finished, failed=failed, rejected=rejected)


def summary_added(*, run: Run, step: Step, tokens: int, cost_usd: float) -> None:
    """Add an ended run's summary call (its step, tokens and cost) to its day's rollups."""
    if run.status not in Run.FINISHED_STATUSES:
        return
    day = run_day(run)
    _day_lock(day, new_day_built=lambda: False)
    keys = {"day": day, "agent_id": run.agent_id}
    run_keys = {**keys, "status": run.status, "stop_reason": run.stop_reason, "iterations": run.iterations}
    RunRollup.objects.filter(**run_keys).update(tokens=F("tokens") + tokens, cost_usd=F("cost_usd") + cost_usd)
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
        for model in (RunRollup, ToolRollup):
            model.objects.filter(day=day).delete()
        runs = _created_on(day).filter(status__in=Run.FINISHED_STATUSES)
        contribution = _contributions(runs).get(day) or ([], Counter(), [])
        _insert(day, contribution)
        new_steps = contribution[1]
        steps_add(day, {key: new_steps[key] - old_steps[key] for key in new_steps.keys() | old_steps.keys()})
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
    """{day: (run rows, step rows, tool rows)} of the ended runs `runs` (a queryset)."""
    found = defaultdict(lambda: ([], Counter(), []))
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
    return dict(found)


def _insert(day: date, contribution) -> None:
    run_rows, step_counts, tool_rows = contribution
    RunRollup.objects.bulk_create([
        RunRollup(day=day, agent_id=agent, status=status, stop_reason=stop, iterations=iterations, runs=n,
                  tokens=tokens, cost_usd=cost) for agent, status, stop, iterations, n, tokens, cost in run_rows
    ])
    ToolRollup.objects.bulk_create([
        ToolRollup(day=day, agent_id=agent, tool_name=tool, finished=finished, failed=failed, rejected=rejected)
        for agent, tool, finished, failed, rejected in tool_rows
    ])


def _subtract(day: date, contribution) -> None:
    run_rows, step_counts, tool_rows = contribution
    for agent, status, stop, iterations, n, tokens, cost in run_rows:
        RunRollup.objects.filter(day=day, agent_id=agent, status=status, stop_reason=stop, iterations=iterations).update(
            runs=F("runs") - n, tokens=F("tokens") - tokens, cost_usd=F("cost_usd") - cost)
    steps_add(day, {key: -n for key, n in step_counts.items()})
    for agent, tool, finished, failed, rejected in tool_rows:
        ToolRollup.objects.filter(day=day, agent_id=agent, tool_name=tool).update(
            finished=F("finished") - finished, failed=F("failed") - failed, rejected=F("rejected") - rejected)
    # Rows of no run any more say nothing; the pages must not list them as zeros.
    RunRollup.objects.filter(day=day, runs=0).delete()
    ToolRollup.objects.filter(day=day, finished=0).delete()


def _created_on(day: date):
    return Run.objects.filter(created_at__gte=day_start(day), created_at__lt=day_start(day + timedelta(days=1)))


def _day_steps(day: date):
    return StepRollup.objects.filter(day=day, whole_month=False)


def steps_add(day: date, deltas: dict) -> None:
    """Add {(agent id, model, bucket): steps} to the day's rows and its month's, in one upsert each
    (keys sorted: two transactions adding to one month's rows lock them in the same order)."""
    rows = sorted((key, n) for key, n in deltas.items() if n)
    if not rows:
        return
    table = connection.ops.quote_name(StepRollup._meta.db_table)
    for row_day, whole_month in ((day, False), (day.replace(day=1), True)):
        for first in range(0, len(rows), 1000):  # within every database's limit of parameters
            chunk = rows[first : first + 1000]
            values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk))
            params = [p for (agent, model, bucket), n in chunk for p in (row_day, whole_month, agent, model, bucket, n)]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} (day, whole_month, agent_id, model, bucket, steps) VALUES {values} ON CONFLICT "
                    f"(day, agent_id, model, bucket, whole_month) DO UPDATE SET steps = {table}.steps + excluded.steps",
                    params,
                )
        # Rows of no step any more say nothing; the pages must not list them.
        StepRollup.objects.filter(day=row_day, whole_month=whole_month, steps=0).delete()


def _step_buckets(rows) -> Counter:
    return Counter((model, latency_bucket(latency)) for model, latency in rows)


def _as_date(value) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value
