"""The metrics page's time series: its figures per hour (windows of up to HOURLY_DAYS days) or
per day, as the charts draw them.

The same runs as the rest of the page (those created in the window, each in the point of its
creation) and the same sources: built days from the daily rollups (runs/models/rollups.py), the
rest (runs still going, ended but not counted yet, days not built) from the runs' own rows, so
every point's runs, tokens, cost and tool and approval counts add up to the page's totals.

There is no hourly rollup: an hour's points read the window's runs themselves (one indexed range
of Run.created_at, at most two days of runs and their work). Percentiles (model latency, people's
waits) come from the rollups' latency buckets, each within 1% of the exact value; a point's
buckets are its day's rows, and over windows longer than DAILY_PERCENTILE_DAYS the month rows
(one point per month): a year of daily buckets is hundreds of thousands of rows, more than the
page's whole time budget.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db import connections
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from runs.days import TruncDay, day_start
from runs.models import Approval, Run, RunRollup, Step, ToolCall, ToolRollup
from runs.models.deciders import decider_kind
from runs.models.rollups import ApprovalRollup, WaitRollup
from runs.observability.metrics import own_work
from runs.observability.metrics.aggregates import approval_wait_seconds
from runs.observability.metrics.approval_figures import plain_rows
from runs.observability.metrics.rollup_reads import (
    histogram_percentile,
    latency_rollup,
    month_plan,
    raw_chunks,
    raw_parts,
    raw_runs,
)
from runs.observability.metrics.rollup_rows import bucket_value, latency_bucket, tool_counts
from runs.observability.metrics.supervision_figures import DECIDERS

HOURLY_DAYS = 2  # windows of at most this many days: a point per hour
DAILY_PERCENTILE_DAYS = 31  # longer windows: percentile points per month (see the module)
MODEL_SERIES = 6  # models drawn (those with the most calls); the table lists the same
TOOL_SERIES = 8  # tools drawn (those with the most finished calls)

# Colours are CSS variables (static/css/metrics_charts.css), read by the page when it draws.
STATUS_COLOURS = {
    Run.Status.SUCCEEDED: "--ok",
    Run.Status.FAILED: "--bad",
    Run.Status.CANCELLED: "--chart-grey",
    Run.Status.AWAITING_APPROVAL: "--wait",
    Run.Status.PAUSED: "--warn",
    Run.Status.RUNNING: "--accent",
    Run.Status.QUEUED: "--chart-violet",
}
DECIDER_COLOURS = {
    "person": "--accent", "rule": "--ok", "grant": "--chart-teal", "policy": "--chart-violet",
    "expiry": "--warn", "run_ended": "--chart-grey",
}
PALETTE = ["--accent", "--chart-orange", "--ok", "--chart-violet", "--bad", "--chart-teal", "--warn", "--chart-grey"]


@dataclass
class Tallies:
    """What the runs of each point did: every dict is keyed by the point first."""

    outcomes: Counter  # (point, status) -> runs
    tokens: Counter  # point -> tokens
    cost: Counter  # point -> USD
    latency: defaultdict  # (point, model) -> {bucket: model calls}
    tools: Counter  # (point, tool, "finished" | "failed" | "rejected") -> calls
    deciders: Counter  # (point, decider kind) -> approvals
    waits: defaultdict  # point -> {bucket: people's decisions}

    @classmethod
    def empty(cls) -> "Tallies":
        return cls(Counter(), Counter(), Counter(), defaultdict(Counter), Counter(), Counter(), defaultdict(Counter))


@dataclass
class RolledBuckets:
    """The latency and wait buckets of the built days of a window, per percentile point (a day, or
    a month over windows longer than DAILY_PERCENTILE_DAYS): read once for the charts and, summed,
    for the page's figures beside them."""

    latency: defaultdict  # (point, model) -> {bucket: model calls}
    waits: defaultdict  # (point, rule name, tool) -> {bucket: people's decisions}

    def steps(self) -> Counter:
        """{(model, bucket): model calls} of the whole window."""
        found = Counter()
        for (_point, model), buckets in self.latency.items():
            for bucket, n in buckets.items():
                found[model, bucket] += n
        return +found

    def wait_counts(self) -> Counter:
        """{(rule name, tool, bucket): decisions} of the whole window."""
        found = Counter()
        for (_point, rule, tool), buckets in self.waits.items():
            for bucket, n in buckets.items():
                found[rule, tool, bucket] += n
        return +found


def per_point_buckets(*, start: date, end: date, agent, built: list[date]) -> RolledBuckets | None:
    """The RolledBuckets of the built days of start..end, for windows drawn per day (None for those
    drawn per hour, which read the runs' own rows, and when no day is built)."""
    if (end - start).days < HOURLY_DAYS or not built:
        return None
    counted = set(built)
    days = {"day__gte": start, "day__lte": end, **({} if agent is None else {"agent": agent})}
    plan = month_plan(start, end, counted) if (end - start).days >= DAILY_PERCENTILE_DAYS else None
    buckets = RolledBuckets(defaultdict(Counter), defaultdict(Counter))
    _bucket_rows(latency_rollup(agent), ("model", "bucket"), "steps", days, counted, plan, into=buckets.latency)
    _bucket_rows(WaitRollup, ("rule_name", "tool_name", "bucket"), "decisions", days, counted, plan, into=buckets.waits)
    return buckets


def metrics_series(
    *, start: date, end: date, agent, built: list[date], per_day: list, buckets: RolledBuckets | None = None
) -> dict:
    """The charts' data for the days start..end: the point unit, the site's time zone and one
    entry per chart (chart_data). `built`: the days read from the rollups; `per_day`: the page's
    DayRows (its tokens and cost per day, reused as they are); `buckets`: per_point_buckets, when
    read already."""
    now = timezone.now()
    if (end - start).days < HOURLY_DAYS:
        points = _hours(start, end, now)
        runs = Run.production.filter(created_at__gte=day_start(start), created_at__lt=day_start(end + timedelta(days=1)))
        tallies = _raw_tallies([runs if agent is None else runs.filter(agent=agent)], TruncHour, tokens=True)
        unit, percentile_unit = "hour", "hour"
    else:
        points = [day for day in _days(start, end) if day_start(day) <= now]
        monthly = (end - start).days >= DAILY_PERCENTILE_DAYS
        if buckets is None:
            buckets = per_point_buckets(start=start, end=end, agent=agent, built=built)
        tallies = _daily_tallies(start=start, end=end, agent=agent, built=built, monthly=monthly, buckets=buckets)
        for row in per_day:
            tallies.tokens[row.day], tallies.cost[row.day] = row.tokens, row.cost_usd
        unit, percentile_unit = "day", "month" if monthly else "day"
    months = sorted({point.replace(day=1) for point in points}) if percentile_unit == "month" else points
    return chart_data(tallies, points=points, percentile_points=months, unit=unit, percentile_unit=percentile_unit)


def _hours(start: date, end: date, now: datetime) -> list[datetime]:
    first, last = day_start(start), min(day_start(end + timedelta(days=1)), now)
    hours, hour = [], first
    while hour < last:
        hours.append(hour)
        hour += timedelta(hours=1)
    return hours


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


# --- Reads ---------------------------------------------------------------------------------------


def _same(day: date) -> date:
    return day


def _raw_tallies(parts: list, trunc, *, into: Tallies | None = None, unit_of=_same, tokens=False) -> Tallies:
    """Tallies of the runs of `parts` (Run querysets, which may overlap) from their own rows, each
    run in the point `trunc` (TruncHour or TruncDay) gives its created_at; `unit_of` maps a day to
    its percentile point; `tokens`: count tokens and cost too (a day's are the page's own).

    The runs are found first, then their work by lists of ids (rollup_reads.raw_chunks)."""
    tallies = into or Tallies.empty()
    runs = raw_runs(parts, trunc)
    for point, status, _stop, _iterations, used, cost, _forked in runs.values():
        tallies.outcomes[point, status] += 1
        if tokens:
            tallies.tokens[point] += used or 0
            tallies.cost[point] += cost or 0.0
    point_of = {pk: row[0] for pk, row in runs.items()}
    for ids, forks in raw_chunks(runs):
        _add_work(tallies, ids, point_of, forks=forks, unit_of=unit_of)
    return tallies


def _add_work(tallies: Tallies, ids: list[int], point_of: dict, *, forks: list[int], unit_of) -> None:
    """The model calls, tool calls and approvals of the runs `ids` (whose points `point_of` holds)."""
    steps = Step.objects.filter(run_id__in=ids)
    calls = ToolCall.objects.filter(run_id__in=ids)
    if forks:  # a fork's copies of its parent's work are its parent's (own_work.py)
        steps, calls = own_work.own_steps(steps, runs=forks), own_work.own_calls(calls, runs=forks)
    for run_id, model, latency in plain_rows(steps.order_by().values_list("run_id", "model", "latency_ms")):
        tallies.latency[unit_of(point_of[run_id]), model][latency_bucket(latency)] += 1
    for run_id, tool, *counts in calls.order_by().values_list("run_id", "tool_name").annotate(**tool_counts()):
        _add_tool(tallies, point_of[run_id], tool, counts)
    approvals = Approval.objects.filter(run_id__in=ids).order_by()
    granted = ExpressionWrapper(Q(grant__isnull=False), output_field=BooleanField())
    for run_id, status, automatic, by_grant, rule_name, n in (
        approvals.annotate(_granted=granted)
        .values_list("run_id", "status", "automatic", "_granted", "rule_name")
        .annotate(n=Count("pk"))
    ):
        kind = decider_kind(status, automatic, by_grant, rule_name)
        if kind:
            tallies.deciders[point_of[run_id], kind] += n
    people = approvals.filter(DECIDERS["person"][1], decided_at__isnull=False)
    wait = approval_wait_seconds()
    for run_id, seconds in people.annotate(_wait=wait).values_list("run_id", "_wait"):
        tallies.waits[unit_of(point_of[run_id])][latency_bucket(seconds)] += 1


def _add_tool(tallies: Tallies, point, tool: str, counts) -> None:
    for name, n in zip(("finished", "failed", "rejected"), counts):
        tallies.tools[point, tool, name] += n or 0


def _daily_tallies(*, start: date, end: date, agent, built: list[date], monthly: bool, buckets) -> Tallies:
    """Per day: the built days from the rollups, the rest from the runs' rows (as rolled_figures).
    Rollup rows are read by a range of days (their index) and those of days not built dropped here."""
    by_agent = {} if agent is None else {"agent": agent}
    tallies = Tallies.empty()
    if built:
        counted = set(built)
        days = {"day__gte": start, "day__lte": end, **by_agent}
        for day, status, n in (
            RunRollup.objects.filter(whole_month=False, **days).values_list("day", "status").annotate(n=Sum("runs"))
        ):
            if day in counted:
                tallies.outcomes[day, status] += n
        for day, tool, *counts in (
            ToolRollup.objects.filter(**days)
            .values_list("day", "tool_name")
            .annotate(f=Sum("finished"), fa=Sum("failed"), r=Sum("rejected"))
        ):
            if day in counted:
                _add_tool(tallies, day, tool, counts)
        for day, status, automatic, granted, rule_name, n in (
            ApprovalRollup.objects.filter(**days)
            .values_list("day", "status", "automatic", "granted", "rule_name")
            .annotate(n=Sum("approvals"))
        ):
            kind = decider_kind(status, automatic, granted, rule_name)
            if kind and day in counted:
                tallies.deciders[day, kind] += n
        for key, found in buckets.latency.items():
            tallies.latency[key].update(found)
        for (point, _rule, _tool), found in buckets.waits.items():
            tallies.waits[point].update(found)
    parts = raw_parts(start=start, end=end, built=set(built), agent=agent)
    month_of = (lambda day: day.replace(day=1)) if monthly else _same
    return _raw_tallies(parts, TruncDay, into=tallies, unit_of=month_of)


def _bucket_rows(model, keys: tuple, count: str, days: dict, counted: set, plan, into: defaultdict) -> None:
    """Adds to `into` {(point, *keys[:-1]): {bucket: count}} the rows of a rollup with month rows
    (StepRollup, AllAgentsStepRollup, WaitRollup; `keys` end with "bucket"): per built day, or
    with a month_plan `plan` per month (a month's row less its days outside the window, or its
    days in it). Read without Django's conversions, each day converted once and each row added
    once: a month of latency buckets is tens of thousands of rows."""
    point_of = {}

    def point(value):
        found = point_of.get(value)
        if found is None:
            day = date.fromisoformat(value) if isinstance(value, str) else value
            found = point_of[value] = (day if day in counted else False) if plan is None else day.replace(day=1)
        return found

    # Rows of a rollup without agents are one per (day, *keys) already: nothing to sum (at a
    # million runs, summing 30 days of AllAgentsStepRollup's rows again took 4 times the read).
    summed = "agent" in {field.name for field in model._meta.fields}

    def add(rows, sign: int) -> None:
        if summed:
            grouped = rows.values_list("day", *keys).annotate(n=Sum(count))
        else:
            grouped = rows.order_by().annotate(n=F(count)).values_list("day", *keys, "n")
        if connections[grouped.db].vendor == "postgresql":  # (day, *keys but the bucket, [buckets], [counts])
            found_rows = ((row[0], row[1:-2], row[-2], row[-1]) for row in _bucket_arrays(grouped, keys))
        else:
            found_rows = ((row[0], row[1:-2], (row[-2],), (row[-1],)) for row in plain_rows(grouped))
        for day, key, buckets, counts in found_rows:
            at = point(day)
            if not at:
                continue
            found = into[(at, *key)]
            if sign > 0 and not found:
                found.update(dict(zip(buckets, counts)))  # an empty Counter takes a dict at C speed
            else:
                for bucket, n in zip(buckets, counts):
                    found[bucket] += sign * n

    if plan is None:
        add(model.objects.filter(whole_month=False, **days), 1)
    else:
        months, plus, minus = plan
        by_agent = {name: value for name, value in days.items() if name == "agent"}
        add(model.objects.filter(Q(whole_month=True, day__in=months) | Q(whole_month=False, day__in=plus), **by_agent), 1)
        if minus:  # a bucket of the month taken away entirely stays at 0, which no percentile picks
            add(model.objects.filter(whole_month=False, day__in=minus, **by_agent), -1)


def _bucket_arrays(grouped, keys: tuple) -> list[tuple]:
    """PostgreSQL: the rows of `grouped` ((day, *keys, n), keys ending with "bucket") as one row
    per (day, *keys but the bucket) with two arrays, its buckets and their counts: a month of
    days is tens of thousands of bucket rows, and Python pays for each row, not for each value."""
    sql, params = grouped.query.sql_with_params()
    outer = ", ".join(f'"{name}"' for name in ("day", *keys[:-1]))
    sql = (
        f'SELECT {outer}, array_agg("bucket" ORDER BY "bucket"), array_agg("n" ORDER BY "bucket") '
        f"FROM ({sql}) AS bucket_rows GROUP BY {outer}"
    )
    with connections[grouped.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# --- The charts ----------------------------------------------------------------------------------


def chart_data(tallies: Tallies, *, points: list, percentile_points: list, unit: str, percentile_unit: str) -> dict:
    """The charts as the page's script draws them: x as Unix seconds, one list of values per
    series (None where a point has nothing to measure), each series with its colour variable."""
    status_labels = dict(Run.Status.choices)
    statuses = [status for status in Run.Status.values if any(tallies.outcomes[p, status] for p in points)]
    finished = [sum(tallies.outcomes[p, status] for status in Run.FINISHED_STATUSES) for p in points]
    failed = [tallies.outcomes[p, Run.Status.FAILED] for p in points]

    steps = Counter()
    for (_point, model), buckets in tallies.latency.items():
        steps[model] += sum(buckets.values())
    models = sorted((model for model, n in steps.items() if n > 0), key=lambda model: (-steps[model], model))[:MODEL_SERIES]
    finished_calls = Counter()
    for (_point, tool, name), n in tallies.tools.items():
        if name == "finished":
            finished_calls[tool] += n
    tools = sorted((tool for tool, n in finished_calls.items() if n), key=lambda t: (-finished_calls[t], t))[:TOOL_SERIES]

    def x(of: list) -> list[int]:
        return [int(_instant(p).timestamp()) for p in of]

    def series(label: str, colour: str, values: list, **extra) -> dict:
        return {"label": label, "colour": colour, "values": values, **extra}

    def percentile(buckets, percent: float):
        found = histogram_percentile(buckets, percent) if buckets else None
        return None if found is None else round(bucket_value(found), 1)

    latency_series = []
    for index, model in enumerate(models):
        colour = PALETTE[index % len(PALETTE)]
        for percent, dash in ((50, False), (95, True)):
            values = [percentile(tallies.latency.get((p, model)), percent) for p in percentile_points]
            latency_series.append(series(f"{model} p{percent}", colour, values, dash=dash))

    def rate(tool, p):
        n = tallies.tools[p, tool, "finished"]
        return round(100 * (tallies.tools[p, tool, "failed"] + tallies.tools[p, tool, "rejected"]) / n, 2) if n else None

    monthly_note = f", per month over windows longer than {DAILY_PERCENTILE_DAYS} days." if percentile_unit == "month" else "."
    return {
        "unit": unit,
        "zone": timezone.get_current_timezone_name(),
        "charts": [
            {
                "id": "runs", "title": "Runs by outcome",
                "note": "Runs created in each period, by their status now.", "unit": unit, "x": x(points), "format": "count",
                "series": [
                    series(status_labels[s], STATUS_COLOURS.get(s, "--muted"), [tallies.outcomes[p, s] for p in points])
                    for s in statuses
                ],
            },
            {
                "id": "error-rate", "title": "Error rate",
                "note": "Failed runs among the finished ones (succeeded, failed or cancelled); empty where none finished.", "unit": unit, "x": x(points), "format": "percent",
                "series": [
                    series("Failed, % of finished runs", "--bad",
                           [round(100 * f / n, 2) if n else None for f, n in zip(failed, finished)]),
                ],
            },
            {
                "id": "latency", "title": "Model latency",
                "note": f"Median (solid) and p95 (dashed, a larger marker) per model, {MODEL_SERIES} models at most; within 1% (latency buckets)"
                + monthly_note, "unit": percentile_unit, "x": x(percentile_points),
                "format": "ms", "series": latency_series,
            },
            {
                "id": "tokens", "title": "Tokens and cost",
                "note": "Tokens in and out (left axis) and cost in USD (right axis) of the runs created in each period.", "unit": unit, "x": x(points), "format": "count",
                "series": [
                    series("Tokens", "--accent", [tallies.tokens[p] for p in points]),
                    series("Cost (USD)", "--chart-orange", [round(tallies.cost[p], 6) for p in points],
                           format="usd", axis="right"),
                ],
            },
            {
                "id": "tool-errors", "title": "Tool error rates",
                "note": f"Failed or rejected calls among finished calls, per tool ({TOOL_SERIES} busiest at most); empty where a tool had none.", "unit": unit, "x": x(points), "format": "percent",
                "series": [
                    series(tool, PALETTE[index % len(PALETTE)], [rate(tool, p) for p in points])
                    for index, tool in enumerate(tools)
                ],
            },
            {
                "id": "approval-wait", "title": "Approval wait",
                "note": "Asked → decided, people's decisions only: median (solid) and p90 (dashed, a larger marker); within 1% (wait buckets)"
                + monthly_note, "unit": percentile_unit, "x": x(percentile_points),
                "format": "seconds",
                "series": [
                    series(f"p{percent}", "--wait", [percentile(tallies.waits.get(p), percent) for p in percentile_points],
                           dash=percent == 90)
                    for percent in (50, 90)
                ],
            },
            {
                "id": "deciders", "title": "How decisions were made",
                "note": "Decisions on the approvals of the runs created in each period, by who or what made them.", "unit": unit, "x": x(points), "format": "count",
                "series": [
                    series(label, DECIDER_COLOURS[kind], [tallies.deciders[p, kind] for p in points])
                    for kind, (label, _q) in DECIDERS.items()
                    if any(tallies.deciders[p, kind] for p in points)
                ],
            },
        ],
    }


def _instant(point) -> datetime:
    return point if isinstance(point, datetime) else day_start(point)
