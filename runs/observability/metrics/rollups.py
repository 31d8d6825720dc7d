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

from collections import Counter
from datetime import date, timedelta

from django.db.models import F
from django.utils import timezone

from runs.days import day_of, day_start
from runs.engine.db import write_transaction
from runs.models import RollupDay, Run, RunRollup, Step, StepRollup, ToolRollup
from runs.models.rollups import ApprovalRollup, ApprovalWait, DayRollup
from runs.observability.metrics import own_work
from runs.observability.metrics.rollup_rows import (  # noqa: F401 (RELATIVE_ACCURACY, bucket_value: read here)
    APPROVAL_KEYS,
    RELATIVE_ACCURACY,
    approval_parts,
    bucket_value,
    contributions,
    day_insert,
    day_subtract,
    latency_bucket,
    outcomes_add,
    row_add,
    step_buckets,
    steps_add,
    tool_counts,
    wait_counts,
    waits_add,
    waits_insert,
)


def run_day(run: Run) -> date:
    """The day a run belongs to on the metrics page: the site's day of its creation."""
    return day_of(run.created_at)


def _day_lock(day: date, *, new_day_built) -> RollupDay:
    """Lock the day's row, creating it when missing: `new_day_built()` says whether the rollups
    hold every ended run of a new day (a day whose runs ended before the rollups existed does not)."""
    locked = RollupDay.objects.select_for_update()
    # An UPDATE takes SQLite's write lock too; on PostgreSQL the SELECT FOR UPDATE below locks.
    if not RollupDay.objects.filter(day=day).update(built=F("built")):
        RollupDay.objects.bulk_create([RollupDay(day=day, built=new_day_built())], ignore_conflicts=True)
    return locked.get(day=day)


def count_ended_run(*, run: Run, fields: dict) -> None:
    """Count `run`, ending in this transaction with its new `fields`, in its day's rollups."""
    values = {
        name: fields.get(name, getattr(run, name))
        for name in ("status", "stop_reason", "iterations", "tokens_in", "tokens_out", "cost_usd")
    }
    if values["status"] not in Run.FINISHED_STATUSES:
        return
    day = run_day(run)
    # The run's own rows are read before the day's lock: they are the ending run's, final in this
    # transaction (its pending approvals were expired first), so the lock, which every ending of
    # the day waits for, is held only for the upserts and the commit. Its own work only
    # (runs/observability/metrics/own_work.py): a fork's copies are its parent's.
    inherited_iterations, inherited_tokens, inherited_cost = own_work.inherited_of(run)
    steps = step_buckets(own_work.run_steps(run).values_list("model", "latency_ms"))
    tools = list(own_work.run_calls(run).order_by().values_list("tool_name").annotate(**tool_counts()))
    approvals, waits = approval_parts(Run.objects.filter(pk=run.pk)).get(day, ([], []))
    others_ended = _created_on(day).filter(status__in=Run.FINISHED_STATUSES).exclude(pk=run.pk)
    _day_lock(day, new_day_built=lambda: not others_ended.exists())
    keys = {"day": day, "agent_id": run.agent_id}
    tokens = values["tokens_in"] + values["tokens_out"] - inherited_tokens
    cost = values["cost_usd"] - inherited_cost
    iterations = values["iterations"] - inherited_iterations
    outcomes_add(day, {(run.agent_id, values["status"], values["stop_reason"], iterations): (1, tokens, cost)})
    row_add(DayRollup, keys, runs=1, tokens=tokens, cost_usd=cost)
    steps_add(day, {(run.agent_id, model, bucket): n for (model, bucket), n in steps.items()})
    for tool, finished, failed, rejected in tools:
        if finished:
            row_add(ToolRollup, {**keys, "tool_name": tool}, finished=finished, failed=failed, rejected=rejected)
    for agent, *approval_keys, n in approvals:
        row_add(ApprovalRollup, dict(zip(APPROVAL_KEYS, (day, agent, *approval_keys))), approvals=n)
    waits_insert(day, waits)


def count_summary(*, run: Run, step: Step, tokens: int, cost_usd: float) -> None:
    """Add an ended run's summary call (its step, tokens and cost) to its day's rollups."""
    if run.status not in Run.FINISHED_STATUSES:
        return
    day = run_day(run)
    iterations = run.iterations - own_work.inherited_of(run)[0]  # the key its ending was counted under
    _day_lock(day, new_day_built=lambda: False)
    outcomes_add(day, {(run.agent_id, run.status, run.stop_reason, iterations): (0, tokens, cost_usd)})
    DayRollup.objects.filter(day=day, agent_id=run.agent_id).update(
        tokens=F("tokens") + tokens, cost_usd=F("cost_usd") + cost_usd
    )
    steps_add(day, {(run.agent_id, step.model, latency_bucket(step.latency_ms)): 1})


def runs_deleted(*, run_ids: list[int]) -> None:
    """Take the ended runs among `run_ids`, about to be deleted in this transaction, out of the rollups."""
    runs = Run.objects.filter(pk__in=run_ids, status__in=Run.FINISHED_STATUSES)
    days = sorted({timezone.localtime(at).date() for at in runs.values_list("created_at", flat=True)})
    for day in days:  # in order: two deletions never wait for each other's days
        _day_lock(day, new_day_built=lambda: False)
    for day, contribution in contributions(runs).items():
        day_subtract(day, contribution)


def rebuild_day(day: date) -> None:
    """Recount the day's rollups from the rows of its ended runs, in one transaction under its lock."""
    with write_transaction():
        lock = _day_lock(day, new_day_built=lambda: False)
        old_steps = Counter(
            {tuple(row[:3]): row[3] for row in _day_steps(day).values_list("agent_id", "model", "bucket", "steps")}
        )
        old_waits = wait_counts(
            ApprovalWait.objects.filter(day=day).values_list("agent_id", "rule_name", "tool_name", "wait")
        )
        old_outcomes = {
            tuple(row[:4]): row[4:]
            for row in RunRollup.objects.filter(day=day, whole_month=False).values_list(
                "agent_id", "status", "stop_reason", "iterations", "runs", "tokens", "cost_usd"
            )
        }
        for model in (ToolRollup, ApprovalRollup, ApprovalWait, DayRollup):
            model.objects.filter(day=day).delete()
        RunRollup.objects.filter(day=day, whole_month=False).delete()
        runs = _created_on(day).filter(status__in=Run.FINISHED_STATUSES)
        contribution = contributions(runs).get(day) or ([], Counter(), [], [], [])
        day_insert(day, contribution)
        new_outcomes = {tuple(row[:4]): row[4:] for row in contribution[0]}
        # The month's rows change by the difference (other days' endings add to them meanwhile).
        outcomes_add(
            day,
            {
                key: tuple(
                    new - old
                    for new, old in zip(new_outcomes.get(key, (0, 0, 0.0)), old_outcomes.get(key, (0, 0, 0.0)))
                )
                for key in new_outcomes.keys() | old_outcomes.keys()
            },
            rows=(True,),
        )
        new_steps, new_waits = contribution[1], wait_counts(contribution[4])
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


def build_pending(*, limit: int = 7) -> int:
    """Rebuild up to `limit` days before today that are not built yet, newest first; how many.

    After an upgrade (migration 0016 marks every day unbuilt) the page reads those days raw:
    exact, but slow over a long history. The workers' periodic task builds them a few at a time,
    so nobody has to remember to run rebuild_rollups; each day is one short transaction under
    its lock, like the command's. Today is left alone: read raw (exact) until it is over.
    """
    days = list(
        RollupDay.objects.filter(built=False, day__lt=timezone.localdate())
        .order_by("-day")
        .values_list("day", flat=True)[:limit]
    )
    for day in days:
        rebuild_day(day)
    return len(days)


def _created_on(day: date):
    return Run.objects.filter(created_at__gte=day_start(day), created_at__lt=day_start(day + timedelta(days=1)))


def _day_steps(day: date):
    return StepRollup.objects.filter(day=day, whole_month=False)
