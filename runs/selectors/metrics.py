"""Reads for the metrics page: what runs, models, tools and approvers did in a period.

A period holds the runs created in it and everything of those runs: their model calls
(steps), tool calls and approvals. Related rows are selected with `run_id IN (the period's
runs)`, which the Step(model, run), ToolCall(run, ...) and Approval(run) indexes answer.

Sums and counts are GROUP BY queries; percentiles are nearest-rank, computed by the database
(runs/selectors/aggregates.py).
"""
from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from runs.models import Agent, Approval, BudgetAlert, Run, Step, ToolCall
from runs.selectors.aggregates import (  # noqa: F401 (nearest_rank_offset: read here by tests)
    PercentileDisc,
    SecondsBetween,
    TruncDay,
    has_percentile_disc,
    nearest_rank_offset,
    percentile_values,
)
from runs.selectors.history import day_start
from runs.selectors.supervision_metrics import Supervision, supervision_summary

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
    wait_seconds: Percentiles  # requested → decided, approvals a person approved or rejected


@dataclass(frozen=True)
class Metrics:
    start: date
    end: date
    agent: Agent | None
    runs_total: int
    by_status: list[CountRow]
    by_stop_reason: list[CountRow]
    finished_runs: int
    succeeded_runs: int
    iterations: Percentiles
    tool_errors: list[ToolErrorRow]
    model_latency: list[ModelLatencyRow]
    per_day: list[DayRow]
    approvals: ApprovalStats
    supervision: Supervision

    @property
    def success_rate(self) -> float | None:
        """Succeeded among finished runs (runs still going are left out)."""
        return self.succeeded_runs / self.finished_runs if self.finished_runs else None

    @property
    def success_percent(self) -> float | None:
        rate = self.success_rate
        return None if rate is None else 100 * rate


def metrics_summary(*, start: date, end: date, agent: Agent | None = None) -> Metrics:
    """Everything the metrics page shows for the days start..end (both included)."""
    since, until = day_start(start), day_start(end + timedelta(days=1))
    runs = Run.objects.filter(created_at__gte=since, created_at__lt=until)
    if agent is not None:
        runs = runs.filter(agent=agent)
    run_ids = runs.order_by().values("pk")
    steps = Step.objects.filter(run_id__in=run_ids)
    calls = ToolCall.objects.filter(run_id__in=run_ids)
    approvals = Approval.objects.filter(run_id__in=run_ids)

    by_status = _count_by(runs, "status", Run.Status)
    finished_runs = sum(row.count for row in by_status if row.value in Run.FINISHED_STATUSES)
    succeeded_runs = sum(row.count for row in by_status if row.value == Run.Status.SUCCEEDED)
    finished = runs.filter(status__in=Run.FINISHED_STATUSES)
    return Metrics(
        start=start,
        end=end,
        agent=agent,
        runs_total=sum(row.count for row in by_status),
        by_status=by_status,
        by_stop_reason=_count_by(runs, "stop_reason", Run.StopReason),
        finished_runs=finished_runs,
        succeeded_runs=succeeded_runs,
        iterations=_percentiles(finished, F("iterations"), finished_runs),
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
    status = ToolCall.Status
    rows = (
        calls.order_by()
        .values_list("tool_name")
        .annotate(
            finished=Count("pk", filter=Q(status__in=[status.SUCCEEDED, status.FAILED, status.REJECTED])),
            failed=Count("pk", filter=Q(status=status.FAILED)),
            rejected=Count("pk", filter=Q(status=status.REJECTED)),
        )
    )
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
        .annotate(n=Count("pk"), tokens=Sum(F("tokens_in") + F("tokens_out")), cost=Sum("cost_usd"))
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
    waits = _percentiles(decided, SecondsBetween("decided_at", "requested_at"), decided.count())
    return ApprovalStats(
        approved=counts.get(Approval.Status.APPROVED, 0),
        rejected=counts.get(Approval.Status.REJECTED, 0),
        expired=counts.get(Approval.Status.EXPIRED, 0),
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
