"""Keep the daily rollups (runs/models/rollups.py) exact: a run is marked uncounted by the
transaction that ends it, added to its day's rows by a counter soon after (in batches, off the
loop's path), changed by the transaction that adds its summary, taken out by the one that deletes
it, and a day is rebuilt from the runs' own rows under the same lock. The metrics page reads the
runs still going and those not counted yet from their own rows, so it is exact at every moment.

Why a run is counted exactly once, even while a rebuild runs: every change of a day's rollups
first locks the day's `RollupDay` row (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the one write
transaction at a time) and keeps it until its transaction commits, and a run's mark
(`UncountedRun`) is deleted only under its day's lock, by the transaction that counts the run:
- the counter locks the days of the marks it read, then deletes those marks (DELETE ... RETURNING:
  a mark another counter or a rebuild deleted meanwhile is not returned) and counts only the runs
  whose marks it deleted;
- a rebuild locks the day, deletes the day's marks, and counts the day's ended runs that have no
  mark: a run whose ending commits during the rebuild has its mark (written with its status), is
  left out, and is left to the counter, whose turn waits for the lock (READ COMMITTED: each
  statement after the lock sees every commit made before it, so every statement of the rebuild
  sees such a run either going, or ended and marked);
- a summary added after the end locks the day and adds itself only when the run has no mark (a
  marked run is counted whole, summary included, by the counter, which waits for that lock);
- a deletion takes out only the runs that have no mark (the marks go with the runs).
There is no other case.

Model latency is kept as counts per logarithmic bucket (the DDSketch mapping: bucket i holds
(GAMMA^(i-1), GAMMA^i] and stands for the value within 1% of all of it), so percentiles merge
over any days; counts, tokens, cost and iterations (a count per iteration number) are exact.

A run's approvals are counted with it (they do not change once it has ended: its ending expires
the pending ones first, in the same transaction): counts by status, decider, rule and tool, the
waits of people's decisions as counts per bucket of seconds (the same mapping), and each of those
waits exactly (ApprovalWait), so the page finds an exact percentile inside the bucket it falls in.
"""

from collections import Counter, defaultdict
from datetime import date, timedelta

from django.db import connection
from django.db.models import F, Q
from django.utils import timezone

from runs.days import TruncDay, day_of, day_start
from runs.engine.storage.db import write_transaction
from runs.models import RollupDay, Run, RunRollup, Step, StepRollup, ToolRollup, UncountedRun
from runs.models.rollups import ApprovalRollup, ApprovalWait, DayRollup, FigureRollup
from runs.observability.metrics import figures, own_work
from runs.observability.metrics.rollup_rows import (  # noqa: F401 (RELATIVE_ACCURACY, bucket_value: read here)
    RELATIVE_ACCURACY,
    as_date,
    bucket_value,
    contributions,
    day_add,
    day_insert,
    day_subtract,
    empty_contribution,
    latency_bucket,
    outcomes_add,
    steps_add,
    totals_add,
    wait_counts,
    waits_add,
)
from runs.observability.metrics.totals import totals_of


def run_day(run: Run) -> date:
    """The day a run belongs to on the metrics page: the site's day of its creation."""
    return day_of(run.created_at)


def _day_lock(day: date, *, new_day_built) -> RollupDay:
    """Lock the day's row, creating it when missing: `new_day_built()` says whether the rollups
    hold every ended run of a new day (a day whose runs ended before the rollups existed does not)."""
    locked = RollupDay.objects.select_for_update()
    # An UPDATE takes SQLite's write lock too; on PostgreSQL the SELECT FOR UPDATE below locks.
    if not RollupDay.objects.filter(day=day).update(built=F("built")):
        # Its rows will be counted with today's declarations of the totals (figures.py).
        new_day = RollupDay(day=day, built=new_day_built(), totals=figures.totals_key())
        RollupDay.objects.bulk_create([new_day], ignore_conflicts=True)
    return locked.get(day=day)


# Marks counted in one transaction: a batch's statements cost about as much as one run's did.
COUNT_BATCH = 500


def count_uncounted(*, limit: int = COUNT_BATCH) -> int:
    """Add up to `limit` ended runs not counted yet to their days' rollups, in one transaction
    under their days' locks; how many were counted (fewer than `limit`: none are left)."""
    with write_transaction():
        marked = list(UncountedRun.objects.order_by("run_id").values_list("run_id", "run__created_at")[:limit])
        if not marked:
            return 0
        for day in sorted({day_of(created) for _, created in marked}):  # in order: never a deadlock
            _day_lock(day, new_day_built=lambda day=day: not _counted_ended(day).exists())
        claimed = _claim_marks([run_id for run_id, _ in marked])
        if claimed:
            for day, contribution in contributions(Run.production.filter(pk__in=claimed)).items():
                day_add(day, contribution)
        return len(marked)


def _claim_marks(run_ids: list[int]) -> list[int]:
    """Delete the marks of `run_ids` that are still there; the runs whose marks this deleted."""
    table = UncountedRun._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE run_id IN ({', '.join(['%s'] * len(run_ids))}) RETURNING run_id", run_ids
        )
        return [row[0] for row in cursor.fetchall()]


def _counted_ended(day: date):
    """The ended runs of `day` that the rollups hold (or should: a new day's row is built when
    none exists yet)."""
    return _created_on(day).filter(status__in=Run.FINISHED_STATUSES).exclude(pk__in=_marked())


def _marked():
    return UncountedRun.objects.values("run_id")


def count_summary(*, run: Run, step: Step, tokens: int, cost_usd: float) -> None:
    """Add an ended run's summary call (its step, tokens and cost) to its day's rollups."""
    if run.status not in Run.FINISHED_STATUSES or run.experiment:
        return
    day = run_day(run)
    iterations = run.iterations - own_work.inherited_of(run)[0]  # the key its ending was counted under
    _day_lock(day, new_day_built=lambda: False)
    if UncountedRun.objects.filter(run_id=run.pk).exists():
        return  # the counter counts the whole run, this summary included, once this commits
    outcomes_add(day, {(run.agent_id, run.status, run.stop_reason, iterations): (0, tokens, cost_usd)})
    DayRollup.objects.filter(day=day, agent_id=run.agent_id).update(
        tokens=F("tokens") + tokens, cost_usd=F("cost_usd") + cost_usd
    )
    steps_add(day, {(run.agent_id, step.model, latency_bucket(step.latency_ms)): 1})
    # The summary's model call is one of the run's own steps: the totals over steps count it.
    summary_totals = totals_of(steps=Step.objects.filter(pk=step.pk))
    totals_add(day, {(run.agent_id, name): value for name, value in summary_totals.items()})


def runs_deleted(*, run_ids: list[int]) -> None:
    """Take the ended runs among `run_ids`, about to be deleted in this transaction, out of the rollups."""
    runs = Run.production.filter(pk__in=run_ids, status__in=Run.FINISHED_STATUSES)
    days = sorted({timezone.localtime(at).date() for at in runs.values_list("created_at", flat=True)})
    for day in days:  # in order: two deletions never wait for each other's days
        _day_lock(day, new_day_built=lambda: False)
    for day, contribution in contributions(runs.exclude(pk__in=_marked())).items():  # a marked run was never added
        day_subtract(day, contribution)


def rebuild_day(day: date) -> None:
    """Recount the day's rollups from the rows of its ended runs, in one transaction under its lock."""
    with write_transaction():
        lock = _day_lock(day, new_day_built=lambda: False)
        # The runs of the day that ended so far are counted here: their marks go. A run whose ending
        # commits from now on keeps its mark, is left out below, and is left to the counter.
        UncountedRun.objects.filter(run__in=_created_on(day)).delete()
        old_steps = Counter(
            {tuple(row[:3]): row[3] for row in _day_steps(day).values_list("agent_id", "model", "bucket", "steps")}
        )
        old_waits = wait_counts(
            ApprovalWait.objects.filter(day=day).values_list("agent_id", "rule_name", "tool_name", "wait")
        )
        old_totals = Counter(
            {tuple(row[:2]): row[2] for row in _day_rows(FigureRollup, day).values_list("agent_id", "name", "value")}
        )
        old_outcomes = {
            tuple(row[:4]): row[4:]
            for row in RunRollup.objects.filter(day=day, whole_month=False).values_list(
                "agent_id", "status", "stop_reason", "iterations", "runs", "tokens", "cost_usd"
            )
        }
        for model in (ToolRollup, ApprovalRollup, ApprovalWait, DayRollup):
            model.objects.filter(day=day).delete()
        for model in (RunRollup, FigureRollup):
            _day_rows(model, day).delete()
        contribution = contributions(_counted_ended(day)).get(day) or empty_contribution()
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
        new_totals = contribution[5]
        totals_add(
            day, {key: new_totals[key] - old_totals[key] for key in new_totals.keys() | old_totals.keys()}, rows=(True,)
        )
        lock.built, lock.totals = True, figures.totals_key()
        lock.save(update_fields=["built", "totals"])


def rebuild(*, days: int | None = None, progress=None) -> int:
    """Rebuild the last `days` days (today included), or every day since the first run. Days
    without runs are built too (empty), so the metrics page reads them from the rollups."""
    today = timezone.localdate()
    if days is None:
        first = Run.production.order_by("created_at").values_list("created_at", flat=True).first()
        first_day = timezone.localtime(first).date() if first else today
    else:
        first_day = today - timedelta(days=days - 1)
    busy = _busy_days(first_day) | {today}  # today may gain runs while this goes on
    day, count = first_day, 0
    while day <= today:
        if day in busy:
            rebuild_day(day)
        else:
            _quiet_day_built(day)
        count += 1
        if progress:
            progress(day)
        day += timedelta(days=1)
    return count


def _busy_days(first_day: date) -> set[date]:
    """The days since `first_day` that have runs or rollup rows: only those have anything to
    count or to take away. A day before today never gains runs (a run is created now)."""
    days = {
        as_date(day)
        for day in Run.production.filter(created_at__gte=day_start(first_day))
        .order_by()  # Run's default order (-pk) would make DISTINCT one row per run
        .annotate(day=TruncDay("created_at"))
        .values_list("day", flat=True)
        .distinct()
    }
    for model in (RunRollup, StepRollup, ToolRollup, ApprovalRollup, ApprovalWait, DayRollup, FigureRollup):
        days.update(model.objects.filter(day__gte=first_day).values_list("day", flat=True).distinct())
    return days


def _quiet_day_built(day: date) -> None:
    """A day with no runs and no rows: built, empty, without reading what is not there."""
    with write_transaction():
        lock = _day_lock(day, new_day_built=lambda: True)
        if not lock.built or lock.totals != figures.totals_key():
            lock.built, lock.totals = True, figures.totals_key()
            lock.save(update_fields=["built", "totals"])


def build_pending(*, limit: int = 7) -> int:
    """Rebuild up to `limit` days before today that are not built yet, or were counted before a
    total was declared (figures.py), newest first; how many.

    After an upgrade (migration 0016 marks every day unbuilt; a new total leaves every day without
    it) the page reads those days raw: exact, but slow over a long history. The workers' periodic task builds them a few at a time,
    so nobody has to remember to run rebuild_rollups; each day is one short transaction under
    its lock, like the command's. Today is left alone: read raw (exact) until it is over.
    """
    days = list(
        RollupDay.objects.filter(Q(built=False) | ~Q(totals=figures.totals_key()), day__lt=timezone.localdate())
        .order_by("-day")
        .values_list("day", flat=True)[:limit]
    )
    for day in days:
        rebuild_day(day)
    return len(days)


def forget_agent_steps(sender, instance, **kwargs) -> None:
    """pre_delete of an Agent (inside the deletion's transaction): its StepRollup rows are taken
    away through steps_add, so their steps leave AllAgentsStepRollup's sums too, rather than
    vanishing from StepRollup alone by CASCADE. An agent is deleted only once its runs are (they
    protect it), so the counter never adds to these rows meanwhile; a rebuild of one of the days
    would, and waits for the days' locks taken here."""
    by_row = defaultdict(Counter)
    for day, whole_month, model, bucket, n in StepRollup.objects.filter(agent=instance).values_list(
        "day", "whole_month", "model", "bucket", "steps"
    ):
        by_row[day, whole_month][instance.pk, model, bucket] -= n
    days = sorted({day for day, whole_month in by_row if not whole_month})
    list(RollupDay.objects.select_for_update().filter(day__in=days).order_by("day"))
    for (day, whole_month), deltas in sorted(by_row.items()):
        steps_add(day, deltas, rows=(whole_month,))


def _created_on(day: date):
    return Run.production.filter(created_at__gte=day_start(day), created_at__lt=day_start(day + timedelta(days=1)))


def _day_steps(day: date):
    return _day_rows(StepRollup, day)


def _day_rows(model, day: date):
    """The day's own rows of a rollup with month rows."""
    return model.objects.filter(day=day, whole_month=False)
