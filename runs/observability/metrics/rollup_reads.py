"""The metrics page's run, model and tool figures from the daily rollups (runs/models/rollups.py).

Days whose rollups are built (today included: a day is built from its first counted run on, and
every ended run is counted soon after it ends) are read from the rollups; the runs' own rows are
read only for what the rollups do not hold: days not built (from before the rollups, or left
unbuilt by an upgrade), the runs of the window still going, and those ended but not counted yet
(runs/observability/metrics/counter.py). The page
reads both in one snapshot (metrics.read_snapshot) and the two parts never overlap, so every
count, sum and the iteration percentiles are exactly what the raw queries give (sums of costs up
to float rounding). Model latency percentiles come from the rollups' latency
buckets: each within 1% of the exact value (`Metrics.latency_estimated` says so on the page).
Approvals are counted with their runs, and their waits' percentiles are exact (approval_figures.py).
"""

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta

from django.db.models import Q, Sum
from django.utils import timezone

from runs.days import TruncDay, day_start
from runs.models import Approval, RollupDay, Run, RunRollup, Step, StepRollup, ToolCall, ToolRollup, UncountedRun
from runs.models.rollups import AllAgentsStepRollup, ApprovalRollup, ApprovalWait, DayRollup, FigureRollup, WaitRollup
from runs.observability.metrics import figures, own_work
from runs.observability.metrics.aggregates import nearest_rank_offset
from runs.observability.metrics.approval_figures import Waits, approval_rows, counted_rows, plain_rows
from runs.observability.metrics.rollup_rows import tool_counts
from runs.observability.metrics.rollups import RELATIVE_ACCURACY, bucket_value, latency_bucket
from runs.observability.metrics.totals import totals_of

RAW_IDS = 5_000  # runs read from their own rows: their work is read this many runs at a time
STILL_GOING = tuple(value for value in Run.Status.values if value not in Run.FINISHED_STATUSES)
ACCURACY_PERCENT = round(100 * RELATIVE_ACCURACY)


def built_days(start: date, end: date) -> list[date]:
    """The days of start..end read from the rollups: those built. Today too: at a year of history
    its runs were the biggest part read raw, and its rollups are as exact as any day's."""
    return list(_counted_days().filter(day__gte=start, day__lte=end).values_list("day", flat=True))


def _counted_days():
    """The days whose rollups hold every ended run, counted with every total declared now (figures.py)."""
    return RollupDay.objects.filter(built=True, totals=figures.totals_key())


def latency_rollup(agent):
    """The rollup of model latency buckets to read: one agent's rows, or for every agent their
    sums (AllAgentsStepRollup: 30 days of five agents are 21,500 rows there against 55,500, and
    nothing to sum again)."""
    return StepRollup if agent is not None else AllAgentsStepRollup


def rolled_figures(
    *, start: date, end: date, agent, built: list[date], steps: Counter | None = None, waits: Counter | None = None
) -> dict:
    """Runs by (status, stop reason, iterations) and by day ([runs, tokens, cost]), steps by (model,
    latency bucket), tool counts, the declared totals {name: value} (figures.py), approvals (rows
    as approval_figures.counted_rows gives them) and people's Waits of the window, from the
    rollups of `built` days and the raw rows of the rest. `steps` {(model, bucket): steps} and `waits` {(rule name, tool, bucket): decisions} of the
    built days, when the caller has read them already (the charts read them per point)."""
    outcomes, per_day = Counter(), defaultdict(lambda: [0, 0, 0.0])
    days = _counted_days().filter(day__gte=start, day__lte=max(built)).values("day")
    by_agent = {} if agent is None else {"agent": agent}
    plan = month_plan(start, end, set(built))
    for (status, stop, iterations), n in _summed(
        RunRollup, plan, by_agent, ("status", "stop_reason", "iterations"), "runs"
    ).items():
        outcomes[status, stop, iterations] += n
    for day, n, t, c in (
        DayRollup.objects.filter(day__in=days, **by_agent)
        .values_list("day")
        .annotate(n=Sum("runs"), t=Sum("tokens"), c=Sum("cost_usd"))
    ):
        _add_day(per_day, day, n, t, c)
    if steps is None:
        steps = _summed(latency_rollup(agent), plan, by_agent, ("model", "bucket"), "steps")
    else:
        steps = Counter(steps)
    tools = Counter()
    for tool, *counts in (
        ToolRollup.objects.filter(day__in=days, **by_agent)
        .values_list("tool_name")
        .annotate(f=Sum("finished"), fa=Sum("failed"), r=Sum("rejected"))
    ):
        _add_tool(tools, tool, counts)
    totals = Counter({name: value for (name,), value in _summed(FigureRollup, plan, by_agent, ("name",), "value").items()})

    raw = raw_runs(raw_parts(start=start, end=end, built=set(built), agent=agent))
    for day, status, stop, iterations, tokens, cost, _forked in raw.values():
        outcomes[status, stop, iterations] += 1
        _add_day(per_day, day, 1, tokens, cost)
    raw_approvals = []
    for ids, forks in raw_chunks(raw):
        raw_steps, raw_calls = Step.objects.filter(run_id__in=ids), ToolCall.objects.filter(run_id__in=ids)
        if forks:  # a fork's copies of its parent's work are its parent's (own_work.py)
            raw_steps, raw_calls = own_work.own_steps(raw_steps, runs=forks), own_work.own_calls(raw_calls, runs=forks)
        for model, latency in plain_rows(raw_steps.order_by().values_list("model", "latency_ms")):
            steps[model, latency_bucket(latency)] += 1
        for tool, *counts in raw_calls.order_by().values_list("tool_name").annotate(**tool_counts()):
            _add_tool(tools, tool, counts)
        raw_approvals += approval_rows(Approval.objects.filter(run_id__in=ids))
        totals.update(totals_of(runs=Run.objects.filter(pk__in=ids), steps=raw_steps, calls=raw_calls))
    approvals, waits = _approvals(days=days, plan=plan, by_agent=by_agent, raw=raw_approvals, rolled=waits)
    return {
        "outcomes": outcomes,
        "per_day": per_day,
        "steps": steps,
        "tools": tools,
        "totals": totals,
        "approvals": approvals,
        "waits": waits,
    }


def _approvals(*, days, plan: tuple, by_agent: dict, raw: list[tuple], rolled: Counter | None) -> tuple[list, Waits]:
    """The approvals of the built `days` (their rollups) and the `raw` ones (approval_rows), counted;
    `rolled`: the built days' wait buckets when read already (see rolled_figures)."""
    rows = list(
        ApprovalRollup.objects.filter(day__in=days, **by_agent)
        .values_list("status", "automatic", "granted", "rule_name", "rule_version", "tool_name")
        .annotate(n=Sum("approvals"))
    )
    raw_rows, raw_waits = counted_rows(raw)
    counts = defaultdict(Counter)
    for key, buckets in raw_waits.counts.items():
        counts[key].update(buckets)
    if rolled is None:
        rolled = _summed(WaitRollup, plan, by_agent, ("rule_name", "tool_name", "bucket"), "decisions")
    for (rule, tool, bucket), n in rolled.items():
        counts[rule, tool][bucket] += n

    def read(buckets: set) -> list[tuple]:
        rolled = ApprovalWait.objects.filter(bucket__in=sorted(buckets), day__in=days, **by_agent)
        return plain_rows(rolled.values_list("rule_name", "tool_name", "wait")) + list(raw_waits.read(buckets))

    return rows + raw_rows, Waits(counts, read)


def _add_day(per_day: dict, day: date, runs: int, tokens: int | None, cost: float | None) -> None:
    found = per_day[day]
    found[0] += runs
    found[1] += tokens or 0
    found[2] += cost or 0.0


def month_plan(start: date, end: date, built: set[date]) -> tuple[list[date], list[date], list[date]]:
    """How to read the built days of start..end from rows with month rows (RunRollup, StepRollup,
    WaitRollup): (months, days to add, days to take away). A month row is the sum of its days'
    rows, built or not (every change adds to both), so a month mostly in the window is read as its
    month row less its other days' rows, and a month barely in it as its days' rows: a 90-day
    window reads three months and a few days instead of sixty days of rows."""
    months, plus, minus = [], [], []
    month = start.replace(day=1)
    while month <= end:
        after = (month.replace(day=28) + timedelta(days=4)).replace(day=1)
        days = [month + timedelta(days=n) for n in range((after - month).days)]
        included = [day for day in days if start <= day <= end and day in built]
        excluded = [day for day in days if day not in included and day <= timezone.localdate()]
        if len(excluded) + 1 < len(included):
            months.append(month)
            minus.extend(excluded)
        else:
            plus.extend(included)
        month = after
    return months, plus, minus


def _summed(model, plan: tuple, by_agent: dict, keys: tuple, count: str) -> Counter:
    """{key values: sum of `count`} of `model` over the built days `plan` (month_plan) stands for."""
    months, plus, minus = plan
    found = Counter()
    rows = model.objects.filter(Q(whole_month=True, day__in=months) | Q(whole_month=False, day__in=plus), **by_agent)
    for *key, n in rows.values_list(*keys).annotate(n=Sum(count)):
        found[tuple(key)] += n
    if minus:
        for *key, n in (
            model.objects.filter(whole_month=False, day__in=minus, **by_agent).values_list(*keys).annotate(n=Sum(count))
        ):
            found[tuple(key)] -= n
    return +found  # keys counted in a month row and taken away entirely are not there


def _add_tool(tools: Counter, tool: str, counts) -> None:
    for name, n in zip(("finished", "failed", "rejected"), counts):
        tools[tool, name] += n or 0


def raw_parts(*, start: date, end: date, built: set[date], agent=None) -> list:
    """The runs of the window the rollups do not hold: those still going, those ended but not
    counted yet (marked: a few, counted soon after they end) and those of days not built, as one
    queryset per range of its own index (Run(status, created_at), the marks' primary key,
    Run(created_at)). As one OR-ed query the database walks every run of the window to find the
    few still going (a year of runs: over 100 ms for nothing)."""
    window = {"created_at__gte": day_start(start), "created_at__lt": day_start(end + timedelta(days=1))}
    parts = [
        Run.production.filter(status__in=STILL_GOING, **window),
        Run.production.filter(pk__in=UncountedRun.objects.values("run_id"), **window),
    ]
    for first, last in _spans(start, end, built):
        parts.append(Run.production.filter(created_at__gte=day_start(first), created_at__lt=day_start(last + timedelta(days=1))))
    return parts if agent is None else [runs.filter(agent=agent) for runs in parts]


def raw_runs(parts: list, trunc=TruncDay) -> dict[int, tuple]:
    """{run pk: (point, status, stop reason, own iterations, own tokens, own cost, forked at step)}
    of the runs of `parts` (querysets that may overlap), the point being `trunc` (TruncDay or
    TruncHour) of the run's creation, as a date (a day) or an aware datetime in UTC (an hour)."""
    found, converted = {}, {}
    for runs in parts:
        rows = (
            runs.order_by()
            .annotate(
                _point=trunc("created_at"),
                _iterations=own_work.own_iterations(),
                _tokens=own_work.own_tokens(),
                _cost=own_work.own_cost(),
            )
            .values_list("pk", "_point", "status", "stop_reason", "_iterations", "_tokens", "_cost", "forked_at_step")
        )
        for pk, point, *rest in plain_rows(rows):
            if pk not in found:
                if point not in converted:
                    converted[point] = as_point(point)
                found[pk] = (converted[point], *rest)
    return found


def raw_chunks(runs: dict[int, tuple]):
    """(ids, forks among them) of the runs raw_runs found, RAW_IDS at a time: their work is read by
    these lists of ids (index lookups of Step(run), ToolCall(run), Approval(run), no join back to
    the runs), and nothing at all is read when there are none."""
    ids = list(runs)
    for n in range(0, len(ids), RAW_IDS):
        chunk = ids[n : n + RAW_IDS]
        yield chunk, [pk for pk in chunk if runs[pk][-1] is not None]


def as_point(value):
    """A point as the database driver gives it (SQLite: text), as a date or a datetime in UTC."""
    if isinstance(value, str):
        value = date.fromisoformat(value) if len(value) == 10 else datetime.fromisoformat(value)
    if isinstance(value, datetime):
        if timezone.is_naive(value):  # the site's wall clock (the truncation's zone)
            value = timezone.make_aware(value)
        return value.astimezone(UTC)
    return value


def _spans(start: date, end: date, built: set[date]) -> list[tuple[date, date]]:
    """The runs of consecutive days of start..end not in `built`, as (first, last) pairs."""
    spans, day, first = [], start, None
    while day <= end:
        if day in built:
            if first is not None:
                spans.append((first, day - timedelta(days=1)))
                first = None
        elif first is None:
            first = day
        day += timedelta(days=1)
    if first is not None:
        spans.append((first, end))
    return spans


def histogram_percentile(counts: dict, percent: float):
    """Nearest-rank percentile of values given as {value: how many}; None when empty."""
    total = sum(counts.values())
    if not total:
        return None
    offset = nearest_rank_offset(total, percent)
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen > offset:
            return value
    return None


def latency_percentiles(buckets: dict) -> tuple[float | None, float | None]:
    """p50 and p95 in ms from {bucket: steps}: the value standing for the nearest-rank bucket."""
    found = [histogram_percentile(buckets, p) for p in (50, 95)]
    return tuple(None if bucket is None else bucket_value(bucket) for bucket in found)
