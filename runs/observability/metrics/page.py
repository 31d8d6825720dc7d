"""Reads for the metrics page: what runs, models, tools and approvers did in a period.

A period holds the runs created in it and everything of those runs: their model calls
(steps), tool calls and approvals. Related rows are selected with `run_id IN (the period's
runs)`, which the Step(model, run), ToolCall(run, ...) and Approval(run) indexes answer.

Sums and counts are GROUP BY queries; percentiles are nearest-rank, computed by the database
(runs/observability/metrics/aggregates.py). Full days come from the daily rollups when they are built
(runs/observability/metrics/rollup_reads.py: the same figures, model latency percentiles within 1%), the
approvals of those days too. All of it is read in one snapshot of the database.
"""

from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, router, transaction
from django.db.models import Count, F, QuerySet, Sum
from django.utils import timezone

from runs.days import TruncDay, day_start
from runs.models import Agent, Approval, BudgetAlert, Run, Step, ToolCall
from runs.observability.metrics import own_work
from runs.observability.metrics.aggregates import (  # noqa: F401 (nearest_rank_offset: read here by tests)
    PercentileDisc,
    approval_wait_seconds,
    has_percentile_disc,
    nearest_rank_offset,
    percentile_values,
)
from runs.observability.metrics.figures import FigureValue, figure_values
from runs.observability.metrics.rollup_rows import tool_counts
from runs.observability.metrics.supervision_figures import SupervisionFigures, supervision_summary
from runs.observability.metrics.totals import totals_of

DEFAULT_PERIOD_DAYS = 7


def default_period(today: date | None = None) -> tuple[date, date]:
    """The last seven days, today included."""
    today = today or timezone.localdate()
    return today - timedelta(days=DEFAULT_PERIOD_DAYS - 1), today


@dataclass(frozen=True)
class Percentiles:
    count: int
    p50: float | None = None
    p95: float | None = None


@dataclass(frozen=True)
class CountRow:
    value: str
    label: str
    count: int


@dataclass(frozen=True)
class ToolErrorRow:
    tool: str
    finished: int  # succeeded + failed + rejected
    failed: int
    rejected: int

    @property
    def errors(self) -> int:
        return self.failed + self.rejected

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.finished if self.finished else None

    @property
    def error_percent(self) -> float:
        return 100 * (self.error_rate or 0.0)


@dataclass(frozen=True)
class ModelLatencyRow:
    model: str
    steps: int
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class DayRow:
    day: date
    runs: int
    tokens: int
    cost_usd: float


@dataclass(frozen=True)
class ApprovalStats:
    approved: int
    rejected: int
    expired: int
    pending: int
    closed: int  # nobody decided: the run ended first
    wait_seconds: Percentiles  # requested → decided, approvals a person approved or rejected


@dataclass(frozen=True)
class Metrics:
    start: date
    end: date
    agent: Agent | None
    figures: dict[str, FigureValue]  # every figure declared in figures.py, by name
    by_status: list[CountRow]
    by_stop_reason: list[CountRow]
    iterations: Percentiles
    tool_errors: list[ToolErrorRow]
    model_latency: list[ModelLatencyRow]
    per_day: list[DayRow]
    approvals: ApprovalStats
    supervision: SupervisionFigures
    latency_estimated: bool = False  # model latency percentiles from the rollups' buckets (within 1%)

    @property
    def tiles(self) -> list[FigureValue]:
        """The figures shown as tiles of their own (the others the page lays out by hand)."""
        return [found for found in self.figures.values() if found.figure.tile]

    @property
    def runs_total(self) -> int:
        return self.figures["runs_total"].value

    @property
    def finished_runs(self) -> int:
        return self.figures["finished_runs"].value

    @property
    def succeeded_runs(self) -> int:
        return self.figures["succeeded_runs"].value

    @property
    def success_rate(self) -> float | None:
        """Succeeded among finished runs (runs still going are left out)."""
        return self.figures["success_rate"].value

    @property
    def success_percent(self) -> float | None:
        rate = self.success_rate
        return None if rate is None else 100 * rate


def metrics_summary(*, start: date, end: date, agent: Agent | None = None, rollups: bool | None = None) -> Metrics:
    """Everything the metrics page shows for the days start..end (both included); `rollups`
    False reads only the runs' rows (the default: settings.METRICS_ROLLUPS, on)."""
    from runs.observability.metrics import rollup_reads as metrics_rollups

    if rollups is None:
        rollups = getattr(settings, "METRICS_ROLLUPS", True)
    with read_snapshot():
        built = metrics_rollups.built_days(start, end) if rollups else []
        return _summary(start=start, end=end, agent=agent, built=built)


def metrics_with_series(*, start: date, end: date, agent: Agent | None = None) -> tuple[Metrics, dict]:
    """The page's figures and its charts' time series (series.py), read in one snapshot, so each
    chart's points add up to the figures beside it."""
    from runs.observability.metrics import rollup_reads as metrics_rollups
    from runs.observability.metrics.series import metrics_series, per_point_buckets

    with read_snapshot():
        built = metrics_rollups.built_days(start, end) if getattr(settings, "METRICS_ROLLUPS", True) else []
        # The latency and wait buckets per point, read once: the charts draw them, the figures sum them.
        buckets = per_point_buckets(start=start, end=end, agent=agent, built=built)
        summary = _summary(start=start, end=end, agent=agent, built=built, buckets=buckets)
        series = metrics_series(
            start=start, end=end, agent=agent, built=built, per_day=summary.per_day, buckets=buckets
        )
    return summary, series


def _summary(*, start: date, end: date, agent: Agent | None, built: list[date], buckets=None) -> Metrics:
    from runs.observability.metrics import rollup_reads as metrics_rollups

    if not built:
        return _metrics_raw(start=start, end=end, agent=agent)
    read = {} if buckets is None else {"steps": buckets.steps(), "waits": buckets.wait_counts()}
    figures = metrics_rollups.rolled_figures(start=start, end=end, agent=agent, built=built, **read)
    return _metrics_from(figures, start=start, end=end, agent=agent)


@contextmanager
def read_snapshot():
    """Every read inside sees one state of the database, so a run ending meanwhile is counted once
    (in the rollups or in its own row, never both). Inside an outer transaction: that one's."""
    alias = router.db_for_read(Run) or DEFAULT_DB_ALIAS  # a read replica's, when the page reads one
    connection = connections[alias]
    if connection.in_atomic_block:
        yield
    elif connection.vendor == "postgresql":
        with transaction.atomic(using=alias):
            connection.cursor().execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
    elif connection.vendor == "sqlite":  # a deferred transaction: reads only, other writers go on (WAL)
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("BEGIN DEFERRED")
            try:
                yield
            finally:
                cursor.execute("COMMIT")
    else:
        yield


def _metrics_from(figures: dict, *, start: date, end: date, agent) -> Metrics:
    from runs.observability.metrics.approval_figures import approval_figures
    from runs.observability.metrics.rollup_reads import histogram_percentile, latency_percentiles

    approval_counts, (decisions, p50, p95), supervision = approval_figures(
        figures["approvals"], figures["waits"], vendor=connection.vendor
    )
    approval_stats = ApprovalStats(
        approved=approval_counts[Approval.Status.APPROVED],
        rejected=approval_counts[Approval.Status.REJECTED],
        expired=approval_counts[Approval.Status.EXPIRED],
        closed=approval_counts[Approval.Status.CLOSED],
        pending=approval_counts[Approval.Status.PENDING],
        wait_seconds=Percentiles(count=decisions, p50=_rounded(p50), p95=_rounded(p95))
        if decisions
        else Percentiles(count=0),
    )

    statuses, stops, iterations, per_day = Counter(), Counter(), Counter(), figures["per_day"]
    for (status, stop, iteration_count), n in figures["outcomes"].items():
        statuses[status] += n
        stops[stop] += n
        if status in Run.FINISHED_STATUSES:
            iterations[iteration_count] += n
    by_status = _count_rows(statuses, Run.Status)
    finished_runs = sum(iterations.values())
    buckets = defaultdict(Counter)
    for (model, bucket), n in figures["steps"].items():
        buckets[model][bucket] += n
    latency = [
        ModelLatencyRow(model, sum(counts.values()), *latency_percentiles(counts)) for model, counts in buckets.items()
    ]
    tools = figures["tools"]
    tool_errors = [
        ToolErrorRow(tool=tool, finished=n, failed=tools[tool, "failed"], rejected=tools[tool, "rejected"])
        for (tool, name), n in tools.items()
        if name == "finished" and n
    ]
    days = [
        DayRow(day=day, runs=per_day[day][0], tokens=per_day[day][1], cost_usd=per_day[day][2])
        if day in per_day
        else DayRow(day=day, runs=0, tokens=0, cost_usd=0.0)
        for day in _days(start, end)
    ]
    return Metrics(
        start=start,
        end=end,
        agent=agent,
        figures=figure_values(figures["totals"]),
        by_status=by_status,
        by_stop_reason=_count_rows(stops, Run.StopReason),
        iterations=Percentiles(
            count=finished_runs, p50=histogram_percentile(iterations, 50), p95=histogram_percentile(iterations, 95)
        )
        if finished_runs
        else Percentiles(count=0),
        tool_errors=sorted(tool_errors, key=lambda row: (-(row.error_rate or 0), row.tool)),
        model_latency=sorted(latency, key=lambda row: (-row.steps, row.model)),
        per_day=days,
        approvals=approval_stats,
        supervision=supervision,
        latency_estimated=True,
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _count_rows(counts: Counter, choices) -> list[CountRow]:
    labels = dict(choices.choices)
    rows = [
        CountRow(value=value, label=labels.get(value, value or "(not stopped)"), count=n)
        for value, n in counts.items()
        if n
    ]
    return sorted(rows, key=lambda row: (-row.count, row.value))


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


def _metrics_raw(*, start: date, end: date, agent: Agent | None = None) -> Metrics:
    """The page's figures from the runs' own rows only (no rollups)."""
    since, until = day_start(start), day_start(end + timedelta(days=1))
    runs = Run.production.filter(created_at__gte=since, created_at__lt=until)
    if agent is not None:
        runs = runs.filter(agent=agent)
    run_ids = runs.order_by().values("pk")
    # Each run's own work (runs/observability/metrics/own_work.py): a fork's copies are its parent's.
    steps = own_work.own_steps(Step.objects.filter(run_id__in=run_ids), runs=run_ids)
    calls = own_work.own_calls(ToolCall.objects.filter(run_id__in=run_ids), runs=run_ids)
    approvals = Approval.objects.filter(run_id__in=run_ids)

    by_status = _count_by(runs, "status", Run.Status)
    finished_runs = sum(row.count for row in by_status if row.value in Run.FINISHED_STATUSES)
    finished = runs.filter(status__in=Run.FINISHED_STATUSES)
    return Metrics(
        start=start,
        end=end,
        agent=agent,
        figures=figure_values(totals_of(runs=runs, steps=steps, calls=calls)),
        by_status=by_status,
        by_stop_reason=_count_by(runs, "stop_reason", Run.StopReason),
        iterations=_percentiles(finished, own_work.own_iterations(), finished_runs),
        tool_errors=_tool_errors(calls),
        model_latency=_model_latency(steps),
        per_day=_per_day(runs, start, end),
        approvals=_approval_stats(approvals),
        supervision=supervision_summary(approvals),
    )


def _count_by(queryset: QuerySet, field_name: str, choices) -> list[CountRow]:
    labels = dict(choices.choices)
    rows = queryset.order_by().values_list(field_name).annotate(n=Count("pk"))
    result = [CountRow(value=value, label=labels.get(value, value or "(not stopped)"), count=n) for value, n in rows]
    return sorted(result, key=lambda row: (-row.count, row.value))


def _percentiles(queryset: QuerySet, expression, count: int) -> Percentiles:
    """Nearest-rank p50 and p95 of `expression` over `queryset`, which holds `count` rows."""
    found = percentile_values(queryset, expression, count, (50, 95))
    return Percentiles(count=count, p50=found[50], p95=found[95]) if count else Percentiles(count=0)


def _tool_errors(calls: QuerySet[ToolCall]) -> list[ToolErrorRow]:

    rows = calls.order_by().values_list("tool_name").annotate(**tool_counts())
    result = [ToolErrorRow(tool=t, finished=f, failed=fa, rejected=r) for t, f, fa, r in rows if f]
    return sorted(result, key=lambda row: (-(row.error_rate or 0), row.tool))


def _model_latency(steps: QuerySet[Step]) -> list[ModelLatencyRow]:
    by_model = steps.order_by().values_list("model")
    if has_percentile_disc(steps):
        rows = [
            ModelLatencyRow(model=model, steps=n, p50_ms=p50, p95_ms=p95)
            for model, n, p50, p95 in by_model.annotate(
                n=Count("pk"), p50=PercentileDisc("latency_ms", 50), p95=PercentileDisc("latency_ms", 95)
            )
        ]
    else:
        rows = []
        for model, n in by_model.annotate(n=Count("pk")):
            latency = _percentiles(steps.filter(model=model), F("latency_ms"), n)
            rows.append(ModelLatencyRow(model=model, steps=n, p50_ms=latency.p50, p95_ms=latency.p95))
    return sorted(rows, key=lambda row: (-row.steps, row.model))


def _per_day(runs: QuerySet[Run], start: date, end: date) -> list[DayRow]:
    """Runs, tokens and cost by the day each run was created; days without runs show zero."""
    rows = (
        runs.order_by()
        .annotate(day=TruncDay("created_at"))
        .values_list("day")
        .annotate(n=Count("pk"), tokens=Sum(own_work.own_tokens()), cost=Sum(own_work.own_cost()))
    )
    by_day = {day: (n, tokens or 0, cost or 0.0) for day, n, tokens, cost in rows}
    days = []
    day = start
    while day <= end:
        n, tokens, cost = by_day.get(day, (0, 0, 0.0))
        days.append(DayRow(day=day, runs=n, tokens=tokens, cost_usd=cost))
        day += timedelta(days=1)
    return days


def _approval_stats(approvals: QuerySet[Approval]) -> ApprovalStats:
    counts = dict(approvals.order_by().values_list("status").annotate(n=Count("pk")))
    decided = approvals.filter(
        status__in=[Approval.Status.APPROVED, Approval.Status.REJECTED], automatic=False, decided_at__isnull=False
    )
    waits = _percentiles(decided, approval_wait_seconds(), decided.count())
    return ApprovalStats(
        approved=counts.get(Approval.Status.APPROVED, 0),
        rejected=counts.get(Approval.Status.REJECTED, 0),
        expired=counts.get(Approval.Status.EXPIRED, 0),
        closed=counts.get(Approval.Status.CLOSED, 0),
        pending=counts.get(Approval.Status.PENDING, 0),
        wait_seconds=Percentiles(
            count=waits.count,
            p50=round(waits.p50, 3) if waits.p50 is not None else None,
            p95=round(waits.p95, 3) if waits.p95 is not None else None,
        ),
    )


def budget_alerts_recent(*, limit: int = 20) -> list[BudgetAlert]:
    """The latest daily budget alerts, newest first."""
    return list(BudgetAlert.objects.select_related("agent")[:limit])
