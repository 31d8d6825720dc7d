"""The metrics page's run, model and tool figures from the daily rollups (runs/models/rollups.py).

Full days whose rollups are built are read from the rollups; the runs' own rows are read only for
what the rollups do not hold: days not built (today, always, and days from before the rollups),
and the runs of the window still going (not ended, so not counted yet). The two parts never
overlap, so every count, sum and the iteration percentiles are exactly what the raw queries give
(sums of costs up to float rounding). Model latency percentiles come from the rollups' latency
buckets: each within 1% of the exact value (`Metrics.latency_estimated` says so on the page).
"""
from collections import Counter, defaultdict
from datetime import date, timedelta

from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from runs.models import RollupDay, Run, RunRollup, Step, StepRollup, ToolCall, ToolRollup
from runs.selectors.aggregates import TruncDay, nearest_rank_offset
from runs.selectors.approval_figures import plain_rows
from runs.selectors.history import day_start
from runs.services.rollups import RELATIVE_ACCURACY, bucket_value, latency_bucket

STILL_GOING = tuple(value for value in Run.Status.values if value not in Run.FINISHED_STATUSES)
ACCURACY_PERCENT = round(100 * RELATIVE_ACCURACY)


def built_days(start: date, end: date) -> list[date]:
    """The days of start..end read from the rollups: built, and over (today never is)."""
    last = min(end, timezone.localdate() - timedelta(days=1))
    return list(RollupDay.objects.filter(day__gte=start, day__lte=last, built=True).values_list("day", flat=True))


def rolled_figures(*, start: date, end: date, agent, built: list[date]) -> dict:
    """Runs by (status, stop reason, iterations) and by day ([runs, tokens, cost]), steps by (model,
    latency bucket) and tool counts of the window, from the rollups of `built` days and the raw
    rows of the rest."""
    outcomes, per_day = Counter(), defaultdict(lambda: [0, 0, 0.0])
    days = RollupDay.objects.filter(day__gte=start, day__lte=max(built), built=True).values("day")
    by_agent = {} if agent is None else {"agent": agent}
    rolled_runs = RunRollup.objects.filter(day__in=days, **by_agent)
    for status, stop, iterations, n in rolled_runs.values_list("status", "stop_reason", "iterations").annotate(
            n=Sum("runs")):
        outcomes[status, stop, iterations] += n
    for day, n, t, c in rolled_runs.values_list("day").annotate(n=Sum("runs"), t=Sum("tokens"), c=Sum("cost_usd")):
        _add_day(per_day, day, n, t, c)
    steps = Counter()
    months, single_days = _whole_months(start, end, set(built))
    step_rows = Q(whole_month=True, day__in=months) | Q(whole_month=False, day__in=single_days)
    for model, bucket, n in StepRollup.objects.filter(step_rows, **by_agent).values_list(
            "model", "bucket").annotate(n=Sum("steps")):
        steps[model, bucket] += n
    tools = Counter()
    for tool, *counts in ToolRollup.objects.filter(day__in=days, **by_agent).values_list("tool_name").annotate(
            f=Sum("finished"), fa=Sum("failed"), r=Sum("rejected")):
        _add_tool(tools, tool, counts)

    raw_runs = _raw_runs(start=start, end=end, built=set(built))
    if agent is not None:
        raw_runs = raw_runs.filter(agent=agent)
    for day, status, stop, iterations, n, t, c in raw_runs.order_by().annotate(_day=TruncDay("created_at")).values_list(
            "_day", "status", "stop_reason", "iterations").annotate(
            n=Count("pk"), t=Sum(F("tokens_in") + F("tokens_out")), c=Sum("cost_usd")):
        outcomes[status, stop, iterations] += n
        _add_day(per_day, date.fromisoformat(day) if isinstance(day, str) else day, n, t, c)
    raw_ids = raw_runs.order_by().values("pk")
    for model, latency in plain_rows(Step.objects.filter(run_id__in=raw_ids).order_by().values_list("model", "latency_ms")):
        steps[model, latency_bucket(latency)] += 1
    status = ToolCall.Status
    for tool, *counts in ToolCall.objects.filter(run_id__in=raw_ids).order_by().values_list("tool_name").annotate(
            f=Count("pk", filter=Q(status__in=[status.SUCCEEDED, status.FAILED, status.REJECTED])),
            fa=Count("pk", filter=Q(status=status.FAILED)), r=Count("pk", filter=Q(status=status.REJECTED))):
        _add_tool(tools, tool, counts)
    return {"outcomes": outcomes, "per_day": per_day, "steps": steps, "tools": tools}


def _add_day(per_day: dict, day: date, runs: int, tokens: int | None, cost: float | None) -> None:
    found = per_day[day]
    found[0] += runs
    found[1] += tokens or 0
    found[2] += cost or 0.0


def _whole_months(start: date, end: date, built: set[date]) -> tuple[list[date], list[date]]:
    """(first days of the months inside start..end whose every day is built, the other built days)."""
    months = []
    for day in sorted(built):
        if day.day != 1:
            continue
        after = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
        if after - timedelta(days=1) <= end and all(day + timedelta(days=n) in built for n in range((after - day).days)):
            months.append(day)
    single_days = [day for day in built if day.replace(day=1) not in months]
    return months, single_days


def _add_tool(tools: Counter, tool: str, counts) -> None:
    for name, n in zip(("finished", "failed", "rejected"), counts):
        tools[tool, name] += n or 0


def _raw_runs(*, start: date, end: date, built: set[date]):
    """The runs of the window the rollups do not hold: those of days not built, and those still going."""
    window = Run.objects.filter(created_at__gte=day_start(start), created_at__lt=day_start(end + timedelta(days=1)))
    raw = Q(status__in=STILL_GOING)
    for first, last in _spans(start, end, built):
        raw |= Q(created_at__gte=day_start(first), created_at__lt=day_start(last + timedelta(days=1)))
    return window.filter(raw)


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
